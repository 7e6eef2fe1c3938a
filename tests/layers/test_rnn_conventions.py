"""Both cells honour the Keras 3 RNN contract (docs/DESIGN.md, Conventions).

What every layer must survive (config and JSON round trips, `.keras` files,
mixed precision, a jit-compiled training step that reaches every weight) is
checked by the layer harness (tests/harness.py, tests/layers/test_layer_harness.py);
here is what is particular to RNN cells: sequences and states, masking,
`stateful=True` and `Bidirectional`."""

import keras
import numpy as np
import pytest

from keras_relmem import EntNetCell, RelationalMemoryCell
from tests.helpers import assert_close, randomize_weights

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
