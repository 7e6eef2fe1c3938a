"""RelationalMemory (input-only terms before the recurrence) against NumPy and against RNN(cell)."""

import keras
import numpy as np
import pytest

from keras_relmem import RelationalMemory, RelationalMemoryCell
from tests.harness import run_layer_test
from tests.helpers import assert_close, gradients, randomize_weights, weights_by_name
from tests.layers.test_relational_memory import (
    BATCH,
    CONFIGS,
    FEATURES,
    STEPS,
    np_initial_memory,
    np_rmc_step,
    sequence,
)

CELL = dict(mem_slots=3, head_size=4, num_heads=2, key_size=3, attention_mlp_layers=2,
            forget_bias=0.7, input_bias=-0.3)


def make_layer(gate_style="unit", num_blocks=1, input_shape=(None, STEPS, FEATURES), **kwargs):
    cfg = dict(CELL, gate_style=gate_style, num_blocks=num_blocks)
    layer = RelationalMemory(**cfg, **kwargs)
    layer.build(input_shape)
    randomize_weights(layer)
    return layer, cfg


# -- the equations: Sonnet's step (NumPy, see test_relational_memory.py) at every step --
@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda c: f"{c}")
def test_sequence_matches_numpy(overrides):
    layer, cfg = make_layer(return_sequences=True, **overrides)
    xs = sequence()
    outputs = layer(xs)
    w = weights_by_name(layer.cell)
    memory = np_initial_memory(3, 8, BATCH)
    for t in range(STEPS):
        memory = np_rmc_step(w, xs[:, t], memory, cfg)
        assert_close(outputs[:, t], memory.reshape(BATCH, -1), atol=2e-5)


@pytest.mark.parametrize("gate_style", ["unit", "memory", None])
def test_matrix_input_matches_numpy(gate_style):
    layer, cfg = make_layer(gate_style, num_blocks=2, treat_input_as_matrix=True,
                            input_shape=(None, STEPS, 3, FEATURES), return_sequences=True)
    xs = np.random.default_rng(4).normal(size=(BATCH, STEPS, 3, FEATURES)).astype("float32")
    outputs = layer(xs)
    w = weights_by_name(layer.cell)
    memory = np_initial_memory(3, 8, BATCH)
    for t in range(STEPS):
        memory = np_rmc_step(w, xs[:, t], memory, cfg, matrix=True)
        assert_close(outputs[:, t], memory.reshape(BATCH, -1), atol=2e-5)


# -- the same computation as the reference path, values and gradients ----------
def twins(transposed_kernels=None, **kwargs):
    layer, _ = make_layer(num_blocks=2, transposed_kernels=transposed_kernels, **kwargs)
    cell_config = {k: v for k, v in layer.cell.get_config().items() if k not in ("name", "dtype", "trainable")}
    twin = keras.layers.RNN(RelationalMemoryCell(**cell_config), **kwargs)
    twin.build((None, STEPS, FEATURES))
    twin.set_weights(layer.get_weights())
    return layer, twin


def test_the_backends_speed_setting_stays_out_of_the_config():
    # None (the default) is the backend's choice, made when the layer runs, not written into the config:
    # a model saved on tensorflow (where it is on) loaded on jax gets jax's choice.
    layer, _ = make_layer()
    assert layer.get_config()["transposed_kernels"] is None
    back = RelationalMemory.from_config(layer.get_config())
    assert back.transposed_kernels is None
    assert back.uses_transposed_kernels == (keras.backend.backend() == "tensorflow")
    # the cell is left as it was after a call, whichever the setting
    for setting in (None, True, False):
        if setting and keras.backend.backend() == "torch":
            continue
        layer, _ = make_layer(transposed_kernels=setting)
        layer(keras.ops.convert_to_tensor(sequence()))
        assert layer.cell._transposed_kernels is None


@pytest.mark.parametrize("transposed_kernels", [False, True])
def test_outputs_and_gradients_equal_rnn_of_cell(transposed_kernels):
    # transposed_kernels=True: the per-step products' input gradients use kernels transposed once per
    # sequence (a custom gradient); the gradients must still be autodiff's of the reference.
    if transposed_kernels and keras.backend.backend() == "torch":  # a documented limit: a clear error
        with pytest.raises(ValueError, match="needs keras.ops.custom_gradient, which Keras' torch backend"):
            RelationalMemory(mem_slots=2, head_size=4, transposed_kernels=True)
        return
    layer, twin = twins(transposed_kernels=transposed_kernels, return_sequences=True)
    assert RelationalMemory.from_config(layer.get_config()).transposed_kernels is transposed_kernels
    xs = keras.ops.convert_to_tensor(sequence())
    assert_close(layer(xs), twin(xs), atol=1e-5)
    # a backend tensor: torch will not multiply a tensor that requires grad by a NumPy array
    target = keras.ops.convert_to_tensor(np.random.default_rng(5).normal(size=(BATCH, STEPS, 24)).astype("float32"))

    def loss(model):
        return lambda: keras.ops.sum(model(xs) * target)

    ours = gradients(loss(layer), layer.trainable_weights)
    reference = gradients(loss(twin), twin.trainable_weights)
    assert len(ours) == len(reference) == 26  # 2 + 2 blocks x 8 + MLP 4 + gates 4
    for a, b, w in zip(ours, reference, layer.trainable_weights):
        assert np.abs(b).max() > 0, w.path
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4, err_msg=w.path)


def test_masked_steps_keep_the_memory():
    xs = sequence()
    mask = np.ones((BATCH, STEPS), bool)
    mask[0, 2:] = False
    layer, twin = twins(return_sequences=True)
    ours = keras.ops.convert_to_numpy(layer(xs, mask=mask))
    assert_close(ours, twin(xs, mask=mask), atol=1e-5)
    np.testing.assert_array_equal(ours[0, 2], ours[0, 1])  # padded: memory unchanged
    assert np.abs(ours[1, 2] - ours[1, 1]).max() > 1e-3


def test_stateful_and_go_backwards_and_return_state():
    for kwargs in (dict(go_backwards=True), dict(return_state=True)):
        layer, twin = twins(**kwargs)
        for a, b in zip(keras.tree.flatten(layer(sequence())), keras.tree.flatten(twin(sequence()))):
            assert_close(a, b, atol=1e-5)
    layer = RelationalMemory(**CELL, stateful=True)
    layer.build((BATCH, STEPS, FEATURES))
    randomize_weights(layer)
    whole = RelationalMemory(**CELL)
    whole.build((BATCH, 2 * STEPS, FEATURES))
    whole.set_weights(layer.get_weights())
    xs = sequence(steps=2 * STEPS)
    layer(xs[:, :STEPS])
    assert_close(layer(xs[:, STEPS:]), whole(xs), atol=1e-5)  # the memory carried over


def test_dropout_only_in_training():
    layer, _ = make_layer(return_sequences=True, dropout=0.5, seed=3)
    plain, _ = make_layer(return_sequences=True)
    xs = sequence()
    inference = keras.ops.convert_to_numpy(layer(xs))
    assert_close(inference, plain(xs), atol=1e-6)
    assert np.abs(keras.ops.convert_to_numpy(layer(xs, training=True)) - inference).max() > 1e-3


def test_weights_transfer_from_rnn_of_cell():
    """Weights of a model with the reference RNN(cell) core, in get_weights()
    order, fit a model with RelationalMemory in its place."""
    inputs = keras.Input((STEPS, FEATURES))
    old = keras.Model(inputs, keras.layers.RNN(RelationalMemoryCell(**CELL))(inputs))
    randomize_weights(old)
    new = keras.Model(inputs, RelationalMemory(**CELL)(inputs))
    new.set_weights(old.get_weights())
    assert [w.shape for w in new.weights] == [w.shape for w in old.weights]
    assert_close(new(sequence()), old(sequence()), atol=1e-5)


def test_layer_harness(tmp_path):
    init = dict(
        mem_slots=2, head_size=4, num_heads=2, key_size=3, num_blocks=2, gate_style="memory",
        forget_bias=0.5, input_bias=0.2, dropout=0.1, seed=5, return_sequences=True,
        kernel_initializer=keras.initializers.GlorotUniform(seed=1), bias_initializer="ones",
    )
    xs = np.random.default_rng(0).normal(size=(3, 4, 8)).astype("float32")
    run_layer_test(
        RelationalMemory, init, xs, expected_output_shape=(3, 4, 16),
        expected_num_trainable_weights=2 + 2 * 8 + 4 + 4, tmp_path=tmp_path,
    )


def test_unknown_argument_is_refused():
    with pytest.raises(ValueError, match="bogus"):
        RelationalMemory(mem_slots=2, head_size=4, bogus=1)
