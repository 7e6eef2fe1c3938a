"""MEMO trains whenever gradients are taken, whatever `training` Keras passes it: inside a subclassed model
whose `call` takes no `training` (Keras then passes the layer None) and under keras-hub's layer-test harness,
on every backend. Banino et al. 2020, §2.3: the adaptive loop stops when every row has halted; its outputs
equal N unrolled hops' (later hops change neither the answer nor the hop count)."""

import keras
import numpy as np
import pytest

from keras_relmem import MEMO, HaltingPolicy

B, I, S, D, Q = 6, 5, 3, 8, 3  # batch, facts, items per fact, item size, query items
ANSWERS = 4


def _data():
    rng = np.random.default_rng(0)
    facts = rng.normal(size=(B, I, S, D)).astype("float32")
    query = rng.normal(size=(B, Q, D)).astype("float32")
    return facts, query, (np.arange(B) % ANSWERS).astype("int32")


class NoTrainingArgument(keras.Model):
    """The common way a user wraps a layer: `call(self, x)`, no `training` argument."""

    def __init__(self, memo):
        super().__init__()
        self.memo = memo

    def call(self, x):
        logits, _ = self.memo(x)
        return logits


@pytest.mark.parametrize("halting", ["reinforce", "act", None])
def test_memo_trains_in_a_subclassed_model_without_a_training_argument(halting):
    facts, query, answers = _data()
    memo = MEMO(num_answers=ANSWERS, key_size=4, num_heads=2, max_hops=3, halting=halting, seed=1)
    model = NoTrainingArgument(memo)
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=keras.backend.backend() != "torch")
    model([facts, query])
    before = {w.path: keras.ops.convert_to_numpy(w) for w in memo.trainable_weights}
    model.fit([facts, query], answers, epochs=1, batch_size=B, verbose=0)
    moved = [path for path, value in before.items()
             if np.abs(keras.ops.convert_to_numpy(next(w for w in memo.trainable_weights if w.path == path))
                       - value).max() > 0]
    assert any("keys" in path for path in moved) and any("W_a" in path or "answer" in path for path in moved)
    # the loop gradients went through answers what inference answers: the same logits, hops in [1, N]
    logits, hops = memo([facts, query], training=False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model([facts, query])),
                               keras.ops.convert_to_numpy(logits), atol=1e-5)
    assert set(np.unique(keras.ops.convert_to_numpy(hops))) <= {1, 2, 3}


@keras.saving.register_keras_serializable(package="keras_relmem_tests")
class KeywordMEMO(MEMO):
    """MEMO taking its two inputs by name, the form keras-hub's harness passes several inputs in (a dict)."""

    def build(self, facts_shape, query_shape):
        super().build([facts_shape, query_shape])

    def call(self, facts, query, training=None):
        return super().call([facts, query], training=training)

    def compute_output_spec(self, facts, query, training=None):
        return super().compute_output_spec([facts, query])


def test_memo_passes_keras_hubs_layer_test_harness():
    """keras-hub's `run_layer_test` wraps the layer in a model whose `call(self, x)` has no `training`."""
    test_case = pytest.importorskip("keras_hub.src.tests.test_case", reason="keras-hub (the [test] extra)")
    facts, query, _ = _data()
    harness = test_case.TestCase(methodName="run_layer_test")
    harness.run_layer_test(
        cls=KeywordMEMO,
        # the nested policy as its config: each layer the harness makes gets a policy of its own
        init_kwargs={"num_answers": ANSWERS, "key_size": 4, "num_heads": 2, "max_hops": 3, "seed": 1,
                     "halting": keras.saving.serialize_keras_object(HaltingPolicy(max_hops=3, gru_units=256))},
        input_data={"facts": facts, "query": query},
        expected_output_shape=((B, ANSWERS), (B,)),
        expected_num_trainable_weights=len(_weights("reinforce")),
        expected_num_non_trainable_weights=1,  # linear_phase
        # linear_phase and the dropout and halting-sample seed generators' states
        expected_num_non_trainable_variables=3,
        run_precision_checks=False,  # the mixed-precision policies are tests/harness.py's, on every backend
    )


def _weights(halting):
    facts, query, _ = _data()
    memo = MEMO(num_answers=ANSWERS, key_size=4, num_heads=2, max_hops=3, halting=halting, seed=1)
    memo([facts, query])
    return memo.trainable_weights
