"""RelationalMemoryCell against an independent NumPy computation (Sonnet semantics)."""

import keras
import numpy as np
import pytest

from keras_relmem import RelationalMemoryCell
from tests.helpers import assert_close, randomize_weights, weights_by_name

BATCH, FEATURES, STEPS = 2, 5, 4


# -- NumPy reference -------------------------------------------------------
def np_layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_linear(w, name, x):
    return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]


def np_initial_memory(slots, mem_size, batch):
    memory = np.zeros((batch, slots, mem_size))
    for i in range(min(slots, mem_size)):
        memory[:, i, i] = 1.0
    return memory


def np_rmc_step(w, x, memory, cfg, matrix=False):
    """One step of Sonnet's RelationalMemory written out in NumPy.

    Sonnet `relational_memory.py`, `_build`: a vector input is flattened and
    projected to one row; with `treat_input_as_matrix` each of the n input
    rows is projected (BatchApply Linear) and all n are appended, and
    `_create_gates` flattens the n projected rows into one vector for the
    input gates' Linear.
    """
    heads, key, head = cfg["num_heads"], cfg["key_size"], cfg["head_size"]
    mem_size = heads * head
    batch, slots = memory.shape[:2]
    if matrix:
        x_row = np_linear(w, "input_projection", x)  # (batch, n, mem_size)
    else:
        x_row = np_linear(w, "input_projection", x.reshape(batch, -1))[:, None, :]
    m = np.concatenate([memory, x_row], axis=1)
    rows = m.shape[1]
    for b in range(cfg["num_blocks"]):
        qkv = np_linear(w, f"block{b}_qkv", m)
        qkv = np_layer_norm(
            qkv, w[f"block{b}_qkv_norm/gamma"], w[f"block{b}_qkv_norm/beta"]
        )
        qkv = qkv.reshape(batch, rows, heads, 2 * key + head).transpose(0, 2, 1, 3)
        q, k, v = qkv[..., :key], qkv[..., key : 2 * key], qkv[..., 2 * key :]
        weights = np_softmax((q / np.sqrt(key)) @ k.transpose(0, 1, 3, 2))
        attended = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, rows, mem_size)
        m = np_layer_norm(
            m + attended,
            w[f"block{b}_attention_norm/gamma"],
            w[f"block{b}_attention_norm/beta"],
        )
        hidden = m
        for i in range(cfg["attention_mlp_layers"]):
            hidden = np_linear(w, f"attention_mlp_{i}", hidden)
            if i < cfg["attention_mlp_layers"] - 1:
                hidden = np.maximum(hidden, 0.0)
        m = np_layer_norm(
            hidden + m, w[f"block{b}_mlp_norm/gamma"], w[f"block{b}_mlp_norm/beta"]
        )
    candidate = m[:, :slots]
    if cfg["gate_style"] is None:
        return candidate
    gates = np_linear(w, "memory_gates", np.tanh(memory)) + np_linear(
        w, "input_gates", x_row.reshape(batch, -1)
    )[:, None, :]
    half = gates.shape[-1] // 2
    i_gate = np_sigmoid(gates[..., :half] + cfg["input_bias"])
    f_gate = np_sigmoid(gates[..., half:] + cfg["forget_bias"])
    return i_gate * np.tanh(candidate) + f_gate * memory


# -- fixtures --------------------------------------------------------------
CONFIGS = [
    dict(gate_style=g, num_blocks=nb)
    for g in ("unit", "memory", None)
    for nb in (1, 2)
]


def make_cell(gate_style="unit", num_blocks=1, build=True, **overrides):
    cfg = dict(
        mem_slots=3,
        head_size=4,
        num_heads=2,
        num_blocks=num_blocks,
        key_size=3,
        gate_style=gate_style,
        attention_mlp_layers=2,
        forget_bias=0.7,
        input_bias=-0.3,
    )
    cfg.update(overrides)
    cell = RelationalMemoryCell(**cfg)
    if build:
        cell.build((None, FEATURES))
        randomize_weights(cell)
    return cell, cfg


def sequence(seed=1, steps=STEPS):
    return np.random.default_rng(seed).normal(size=(BATCH, steps, FEATURES)).astype(
        "float32"
    )


# -- equations -------------------------------------------------------------
@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda c: f"{c}")
def test_one_step_matches_numpy(overrides):
    cell, cfg = make_cell(**overrides)
    x = sequence()[:, 0]
    memory = np.random.default_rng(2).normal(size=(BATCH, 3, 8)).astype("float32")
    flat, states = cell(x, [memory.reshape(BATCH, -1)])
    expected = np_rmc_step(weights_by_name(cell), x, memory, cfg)
    assert_close(flat, expected.reshape(BATCH, -1), atol=1e-5)
    assert_close(states[0], flat)


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda c: f"{c}")
def test_sequence_in_rnn_matches_numpy(overrides):
    cell, cfg = make_cell(**overrides)
    xs = sequence()
    outputs = keras.layers.RNN(cell, return_sequences=True)(xs)
    w = weights_by_name(cell)
    memory = np_initial_memory(3, 8, BATCH)
    for t in range(STEPS):
        memory = np_rmc_step(w, xs[:, t], memory, cfg)
        assert_close(
            outputs[:, t], memory.reshape(BATCH, -1), atol=2e-5
        )


@pytest.mark.parametrize("slots,head_size,heads", [(3, 4, 2), (5, 2, 1)])
def test_initial_memory_is_padded_or_truncated_identity(slots, head_size, heads):
    cell = RelationalMemoryCell(mem_slots=slots, head_size=head_size, num_heads=heads)
    state = keras.ops.convert_to_numpy(cell.get_initial_state(batch_size=2)[0])
    expected = np_initial_memory(slots, head_size * heads, 2).reshape(2, -1)
    np.testing.assert_array_equal(state, expected)


@pytest.mark.parametrize("gate_style", ["unit", "memory", None])
def test_matrix_input_appends_one_row_per_input_row(gate_style):
    cell, cfg = make_cell(gate_style, num_blocks=2, treat_input_as_matrix=True, build=False)
    cell.build((None, 3, FEATURES))
    randomize_weights(cell)
    if gate_style is not None:  # the input gates read all 3 rows: (3 * mem_size, 2 * gate)
        assert tuple(cell.input_gate_projection.kernel.shape)[0] == 3 * 8
    x = np.random.default_rng(0).normal(size=(BATCH, 3, FEATURES)).astype("float32")
    memory = np.random.default_rng(2).normal(size=(BATCH, 3, 8)).astype("float32")
    next_memory, attention = cell.step(x, memory)
    # The last block: 3 slots attend to 3 slots + 3 input rows.
    assert tuple(attention[-1].shape) == (BATCH, 2, 3, 6)
    expected = np_rmc_step(weights_by_name(cell), x, memory, cfg, matrix=True)
    assert_close(next_memory, expected, atol=1e-5)


def test_attention_dropout_only_in_training():
    cell, _ = make_cell(dropout=0.5, seed=3)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    xs = sequence()
    inference = keras.ops.convert_to_numpy(rnn(xs))
    cell_no_drop, _ = make_cell()
    reference = keras.ops.convert_to_numpy(keras.layers.RNN(cell_no_drop, return_sequences=True)(xs))
    assert_close(inference, reference, atol=1e-6)
    trained = keras.ops.convert_to_numpy(rnn(xs, training=True))
    assert np.abs(trained - reference).max() > 1e-3
    # The mask is shaped like the attention weights and rescales kept ones.
    mask = keras.ops.convert_to_numpy(cell.get_dropout_mask(xs[:, 0]))
    cell.reset_dropout_mask()
    assert mask.shape == (BATCH, 2, 4, 4)
    assert set(np.unique(mask)) <= {0.0, 2.0}


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(gate_style="foo"), "gate_style"),
        (dict(num_blocks=0), "num_blocks"),
        (dict(attention_mlp_layers=0), "attention_mlp_layers"),
        (dict(mem_slots=0), "mem_slots"),
        (dict(head_size=2.5), "head_size"),
        (dict(dropout=1.0), "dropout"),
        (dict(key_size=-1), "key_size"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, match):
    args = dict(mem_slots=2, head_size=4) | kwargs
    with pytest.raises(ValueError, match=match):
        RelationalMemoryCell(**args)


def test_matrix_input_needs_rows():
    cell = RelationalMemoryCell(mem_slots=2, head_size=4, treat_input_as_matrix=True)
    with pytest.raises(ValueError, match="treat_input_as_matrix"):
        cell.build((None, FEATURES))
