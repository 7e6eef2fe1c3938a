"""Every public layer through the shared layer-test harness (tests/harness.py).

Runs on whichever backend KERAS_BACKEND selects; CI runs it on tensorflow only
(tests/conftest.py says why).
"""

import keras
import numpy as np
import pytest

from keras_relmem import MEMO, EntNetCell, EntNetEncoder, EntNetReadout, RelationalMemoryCell
from keras_relmem.layers import ACTHalting, HaltingPolicy, ReversibleEmbedding
from tests.harness import run_layer_test

RNG = np.random.default_rng(0)
SEQUENCE = RNG.normal(size=(3, 4, 8)).astype("float32")  # (batch, steps, features)


@pytest.mark.parametrize(
    "kwargs,trainable",
    [
        # input projection 2, per block qkv 2 + three LayerNorms 6, MLP 2x2, gates 2x2
        (dict(gate_style="memory", num_blocks=2), 2 + 2 * 8 + 4 + 4),
        (dict(gate_style=None, attention_mlp_layers=3), 2 + 8 + 6),
    ],
)
def test_relational_memory_cell(kwargs, trainable, tmp_path):
    init = dict(
        mem_slots=2, head_size=4, num_heads=2, key_size=3, forget_bias=0.5, input_bias=0.2,
        dropout=0.1, seed=5, kernel_initializer=keras.initializers.GlorotUniform(seed=1),
        bias_initializer="ones", kernel_regularizer=keras.regularizers.L2(1e-4), **kwargs,
    )
    run_layer_test(
        RelationalMemoryCell, init, SEQUENCE, expected_output_shape=(3, 16),
        expected_num_trainable_weights=trainable, rnn=True, tmp_path=tmp_path,
    )


@pytest.mark.parametrize("trainable_keys", [True, False])
def test_entnet_cell(trainable_keys, tmp_path):
    keys = RNG.normal(scale=0.5, size=(3, 8)).astype("float32")
    init = dict(num_blocks=3, units=8, keys=keys, trainable_keys=trainable_keys,
                gate_bias_initializer="ones", alpha_initializer=keras.initializers.Constant(0.5),
                kernel_regularizer=keras.regularizers.L2(1e-4), epsilon=1e-5)
    run_layer_test(
        EntNetCell, init, SEQUENCE, expected_output_shape=(3, 24),
        # keys, gate bias, U and its bias, V, W, the PReLU's slopes
        expected_num_trainable_weights=7 if trainable_keys else 6,
        expected_num_non_trainable_weights=0 if trainable_keys else 1,
        rnn=True, tmp_path=tmp_path,
    )


def test_entnet_encoder(tmp_path):
    words = RNG.normal(size=(3, 5, 6, 8)).astype("float32")  # (batch, sentences, words, dim)
    run_layer_test(
        EntNetEncoder, dict(mask_initializer="glorot_uniform", mask_regularizer="l2"), words,
        expected_output_shape=(3, 5, 8), expected_num_trainable_weights=1, tmp_path=tmp_path,
    )


def test_entnet_readout(tmp_path):
    memory, query = RNG.normal(size=(3, 24)).astype("float32"), RNG.normal(size=(3, 8)).astype("float32")
    run_layer_test(
        EntNetReadout, dict(num_outputs=5, alpha_initializer="zeros", kernel_regularizer="l2"),
        [memory, query], expected_output_shape=(3, 5),
        expected_num_trainable_weights=3, tmp_path=tmp_path,  # H, the PReLU's slopes, R
    )


FACTS = RNG.normal(size=(3, 5, 2, 4)).astype("float32")  # (batch, I, S, d_c)
QUERY = RNG.normal(size=(3, 2, 4)).astype("float32")
MEMO_WEIGHTS = 12  # keys, values, query0, W_h, W_q 2, LayerNorm 2, W_qa 2, W_a 2
POLICY_WEIGHTS = 9  # GRU 3, MLP 2, halt 2, value 2


@pytest.mark.parametrize(
    "halting,trainable,non_trainable",
    # linear_phase is MEMO's non-trainable weight; ACT has no value head to train
    [(None, MEMO_WEIGHTS, 1), ("reinforce", MEMO_WEIGHTS + POLICY_WEIGHTS, 1),
     ("act", MEMO_WEIGHTS + POLICY_WEIGHTS - 2, 3)],
)
def test_memo(halting, trainable, non_trainable, tmp_path):
    # The policy as its config, so that each MEMO the harness makes gets a policy of its own.
    network = dict(max_hops=3, gru_units=8, mlp_units=5, bias_init=-1.0)
    policy = {"reinforce": lambda: HaltingPolicy(**network, threshold=0.4, gamma=0.9),
              "act": lambda: ACTHalting(**network, epsilon=0.02),
              None: lambda: None}[halting]()
    init = dict(num_answers=4, key_size=3, num_heads=2, max_hops=3, answer_units=6,
                attention_dropout=0.2, answer_dropout=0.3,
                halting=None if policy is None else keras.saving.serialize_keras_object(policy),
                kernel_initializer="he_normal", seed=3)
    run_layer_test(
        MEMO, init, [FACTS, QUERY], expected_output_shape=[(3, 4), (3,)],
        expected_num_trainable_weights=trainable, expected_num_non_trainable_weights=non_trainable,
        # The adaptive loop is a while loop, which JAX cannot differentiate:
        # MEMO with a halting network trains through MEMOClassifier (unrolled).
        run_training_check=halting is None, tmp_path=tmp_path,
    )


def test_halting_policy(tmp_path):
    distance = RNG.random(3).astype("float32")
    state = RNG.normal(size=(3, 8)).astype("float32")
    run_layer_test(
        HaltingPolicy, dict(max_hops=4, gru_units=8, mlp_units=5, bias_init=2.0, inputs="distance"), [distance, state],
        expected_output_shape=[(3,), (3,), (3, 8)], expected_num_trainable_weights=POLICY_WEIGHTS,
        call=lambda layer, x: layer(x[0], hop=2, state=x[1]), tmp_path=tmp_path,
    )


def test_reversible_embedding(tmp_path):
    ids = RNG.integers(1, 10, size=(3, 5)).astype("int32")
    run_layer_test(
        ReversibleEmbedding, dict(input_dim=10, output_dim=4, tie_weights=False,
                                  embeddings_regularizer=keras.regularizers.L2(1e-3)),
        ids, expected_output_shape=(3, 5, 10), expected_num_trainable_weights=3,  # E, the reverse E, b
        # embed, then the tied softmax with its bias: every weight on the path to the output
        call=lambda layer, x: layer(layer(x), reverse=True), tmp_path=tmp_path,
    )
