"""Both cells honour the Keras 3 RNN contract (DESIGN.md, Conventions)."""

import keras
import numpy as np
import pytest

from keras_relmem import EntNetCell, RelationalMemoryCell
from tests.helpers import assert_close, gradients, jit_compile_for_backend, randomize_weights

BATCH, STEPS, FEATURES = 4, 6, 8


def rmc():
    return RelationalMemoryCell(mem_slots=2, head_size=4, num_heads=2, num_blocks=2)


def entnet():
    return EntNetCell(num_blocks=3, units=FEATURES)


CELLS = {"rmc": rmc, "entnet": entnet}


@pytest.fixture(params=sorted(CELLS))
def make_cell(request):
    return CELLS[request.param]


def data(seed=0, batch=BATCH, steps=STEPS):
    return np.random.default_rng(seed).normal(size=(batch, steps, FEATURES)).astype(
        "float32"
    )


def build_rnn(make_cell, seed=0, **rnn_kwargs):
    batch_size = rnn_kwargs.pop("batch_size", None)
    rnn = keras.layers.RNN(make_cell(), **rnn_kwargs)
    rnn.build((batch_size, STEPS, FEATURES))
    randomize_weights(rnn.cell, seed=seed)
    return rnn


def test_return_sequences_and_state_agree(make_cell):
    rnn = build_rnn(make_cell, return_sequences=True, return_state=True)
    outputs, state = rnn(data())
    assert outputs.shape == (BATCH, STEPS, rnn.cell.output_size)
    assert_close(outputs[:, -1], state, atol=1e-6)
    last_only = keras.layers.RNN(rnn.cell)(data())
    assert_close(last_only, state, atol=1e-6)


def test_masking_skips_padded_steps(make_cell):
    xs = data()
    xs[:, 4:] = 0.0
    model = keras.Sequential(
        [keras.Input((STEPS, FEATURES)), keras.layers.Masking(0.0), keras.layers.RNN(make_cell())]
    )
    randomize_weights(model.layers[-1].cell)
    padded = keras.ops.convert_to_numpy(model(xs))
    unpadded = keras.ops.convert_to_numpy(model.layers[-1](xs[:, :4]))
    assert_close(padded, unpadded, atol=1e-5)


def test_stateful_carries_memory_between_calls(make_cell):
    rnn = build_rnn(make_cell, stateful=True, batch_size=BATCH)
    # The state variables were filled at build time, before the weights were
    # randomised; start them at the (new) paper memory.
    rnn.states[0].assign(rnn.cell.get_initial_state(BATCH)[0])
    xs = data()
    rnn(xs[:, :3])
    second_half = keras.ops.convert_to_numpy(rnn(xs[:, 3:]))
    whole = keras.ops.convert_to_numpy(keras.layers.RNN(rnn.cell)(xs))
    assert_close(second_half, whole, atol=1e-5)
    # Keras' reset_state() zeroes the states.
    rnn.reset_state()
    assert np.all(keras.ops.convert_to_numpy(rnn.states[0]) == 0.0)


def test_bidirectional_runs_each_direction(make_cell):
    bi = keras.layers.Bidirectional(keras.layers.RNN(make_cell()))
    xs = data()
    bi.build(xs.shape)
    randomize_weights(bi.forward_layer.cell, seed=1)
    randomize_weights(bi.backward_layer.cell, seed=2)
    out = keras.ops.convert_to_numpy(bi(xs))
    size = bi.forward_layer.cell.output_size
    forward = keras.layers.RNN(bi.forward_layer.cell)(xs)
    backward = keras.layers.RNN(bi.backward_layer.cell)(xs[:, ::-1])
    assert_close(out[:, :size], forward, atol=1e-5)
    assert_close(out[:, size:], backward, atol=1e-5)


def classifier(make_cell, dtype=None):
    inputs = keras.Input((STEPS, FEATURES))
    memory = keras.layers.RNN(make_cell() if dtype is None else make_cell_with(make_cell, dtype))(inputs)
    logits = keras.layers.Dense(3, dtype="float32")(memory)
    return keras.Model(inputs, logits)


def make_cell_with(make_cell, dtype):
    cell = make_cell()
    return cell.__class__.from_config(cell.get_config() | {"dtype": dtype})


def test_jit_compiled_fit_reduces_loss(make_cell):
    keras.utils.set_random_seed(0)
    xs = data(batch=32)
    ys = (xs[:, 0, 0] > 0).astype("int32")
    model = classifier(make_cell)
    model.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile_for_backend(),
    )
    history = model.fit(xs, ys, epochs=8, batch_size=32, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_matches_float32(make_cell, policy):
    xs = data()
    full = keras.layers.RNN(make_cell())
    full.build(xs.shape)
    randomize_weights(full.cell, scale=0.2)
    mixed = keras.layers.RNN(make_cell_with(make_cell, policy), dtype=policy)
    mixed.build(xs.shape)
    mixed.set_weights(full.get_weights())
    assert all(w.dtype == "float32" for w in mixed.weights)
    out = mixed(xs)
    expected_dtype = policy.split("_")[1]
    assert keras.backend.standardize_dtype(out.dtype) == expected_dtype
    tolerance = 0.05 if policy == "mixed_float16" else 0.15
    assert_close(
        keras.ops.convert_to_numpy(keras.ops.cast(out, "float32")), full(xs), atol=tolerance
    )


def test_get_config_round_trip(make_cell):
    cell = make_cell()
    clone = cell.__class__.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    rnn = keras.layers.RNN(cell)
    assert keras.layers.RNN.from_config(rnn.get_config()).cell.get_config() == cell.get_config()


def test_keras_file_round_trip(make_cell, tmp_path):
    model = classifier(make_cell)
    randomize_weights(model.layers[1].cell, seed=4)
    xs = data()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert_close(loaded(xs), model(xs), atol=1e-6)
    assert loaded.layers[1].cell.get_config() == model.layers[1].cell.get_config()


def test_gradients_reach_every_trainable_weight(make_cell):
    model = classifier(make_cell)
    randomize_weights(model.layers[1].cell, seed=5)
    xs = data()
    grads = gradients(lambda: keras.ops.sum(keras.ops.square(model(xs))), model.trainable_variables)
    for var, grad in zip(model.trainable_variables, grads):
        assert np.abs(grad).max() > 0, var.path
