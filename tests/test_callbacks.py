"""MEMO's training controls (keras_relmem.callbacks): each change must reach the compiled training step."""

import keras
import numpy as np
import pytest

from keras_relmem.callbacks import AnswerLossWarmup, HaltingWarmup, LinearStart, piecewise_rate
from keras_relmem.models.memo import MEMOClassifier


def _data(seed=0, batch=8):
    rng = np.random.default_rng(seed)
    x = {"facts": rng.integers(1, 20, (batch, 6, 4)), "query": rng.integers(1, 20, (batch, 3))}
    return x, rng.integers(0, 3, (batch,))


def _memo(learning_rate=1e-2, **kwargs):
    keras.utils.set_random_seed(0)
    model = MEMOClassifier(3, vocab_size=20, embedding_dim=16, key_size=8, max_hops=3, halting="reinforce",
                           attention_dropout=0.0, answer_dropout=0.0, seed=0, **kwargs)
    model.compile(keras.optimizers.Adam(learning_rate))
    return model


def _cross_entropy_by_hop(model, x, y):
    """(b, N) cross-entropy of every hop's answer, in NumPy from the unrolled logits (MEMO §2.3: each
    hop t gives an answer a_t = softmax(W_a relu(W_qa q_t)); the task loss is its cross-entropy)."""
    embedded, mask = model.embed_inputs(x)
    logits = np.asarray(model.memo.unrolled(embedded, mask=mask, training=False)["answer_logits"], "float64")
    logits -= logits.max(-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(log_p, y[:, None, None].repeat(logits.shape[1], 1), -1)[..., 0]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_answer_loss_warmup_changes_the_traced_loss(jit_compile):
    # Adam at rate 0 keeps the weights, so each epoch's reported task loss is the loss of the same weights:
    # hop N's cross-entropy alone under "last" (epoch 0), the mean over all hops under "all" (epoch 1).
    # Without the rebuilt step, epoch 1 would still report hop N's.
    x, y = _data()
    model = _memo(learning_rate=0.0, answer_loss="all", halting_learning_rate=0.0)
    model.compile(keras.optimizers.Adam(0.0), jit_compile=jit_compile)
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False,
                        callbacks=[AnswerLossWarmup("last", 1)])
    ce = _cross_entropy_by_hop(model, x, y)
    last, every = ce[:, -1].mean(), ce.mean()
    assert abs(last - every) > 1e-3  # the two losses differ, so the test can tell them apart
    np.testing.assert_allclose(history.history["loss"], [last, every], rtol=1e-4)
    assert model.answer_loss == "all"


def test_answer_loss_warmup_resumes_in_its_phase_and_checks_names():
    x, y = _data()
    model = _memo(answer_loss="all")
    model.fit(x, y, epochs=3, initial_epoch=2, verbose=0, callbacks=[AnswerLossWarmup("last", 5)])
    assert model.answer_loss == "last"  # epoch 2 < 5: a run resumed at epoch 2 is still warming up
    with pytest.raises(ValueError, match="warmup_loss must be one of"):
        AnswerLossWarmup("lats", 1)
    with pytest.raises(ValueError, match="epochs must be an int >= 0"):
        AnswerLossWarmup("last", -1)


def test_halting_warmup_holds_the_halting_network_then_trains_it():
    x, y = _data()
    model = _memo(halting_learning_rate=1e-2)
    model(x)
    policy = [v for v in model.trainable_variables if model._is_policy_variable(v)]
    others = [v for v in model.trainable_variables if not model._is_policy_variable(v)]
    before = [np.array(v) for v in policy]
    before_others = [np.array(v) for v in others]
    warmup = HaltingWarmup(1)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[warmup])
    assert all(np.array_equal(b, np.array(v)) for b, v in zip(before, policy))  # held
    assert not all(np.array_equal(b, np.array(v)) for b, v in zip(before_others, others))  # MEMO learned
    model.fit(x, y, epochs=2, initial_epoch=1, verbose=0, callbacks=[warmup])
    assert not all(np.array_equal(b, np.array(v)) for b, v in zip(before, policy))  # now it learns
    assert float(model.halting_optimizer.learning_rate) == pytest.approx(1e-2)


def test_linear_start_switches_the_softmax_back():
    x, y = _data()
    model = _memo()
    phases = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            phases.append(float(keras.ops.convert_to_numpy(model.memo.linear_phase)))

    model.fit(x, y, epochs=3, verbose=0, callbacks=[LinearStart(2), Record()])
    assert phases == [1.0, 1.0, 0.0]
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    plain.compile("sgd", "mse")
    with pytest.raises(ValueError, match="LinearStart needs a MEMO"):
        plain.fit(np.zeros((2, 2)), np.zeros((2, 1)), epochs=1, verbose=0, callbacks=[LinearStart(1)])


def test_piecewise_rate_reaches_the_optimizer_through_keras_scheduler():
    x, y = _data()
    model = _memo()
    rates = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            rates.append(float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)))

    schedule = keras.callbacks.LearningRateScheduler(piecewise_rate({0: 3e-4, 2: 1e-4}))
    model.fit(x, y, epochs=3, verbose=0, callbacks=[schedule, Record()])
    np.testing.assert_allclose(rates, [3e-4, 3e-4, 1e-4], rtol=1e-6)
    with pytest.raises(ValueError, match="rate of epoch 0"):
        piecewise_rate({5: 1e-4})
