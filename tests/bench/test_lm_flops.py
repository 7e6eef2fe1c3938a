"""The FLOP counts of bench.lm.flops against the matrix products TensorFlow actually runs.

The reference count is read off the traced graph: every MatMul and
BatchMatMul op, 2 x m x k x n FLOPs from its operands' shapes (and transpose
flags). It knows nothing of the layers' equations, so it checks the analytic
count's reading of Sonnet's `relational_memory.py` (one q/k/v projection per
block, the attention's two products, the shared MLP, the gates' two Linears)
against what our cell computes.
"""

import doctest
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from bench.lm import flops
from keras_relmem import RelationalMemoryCell
from keras_relmem.models.language_model import build_language_model, lm_defaults


def graph_matmul_flops(graph, skip_scope=None):
    """2 m k n summed over the MatMul/BatchMatMul ops of `graph` (its top level only),
    leaving out the ops whose name has the scope `skip_scope`."""
    total = 0
    for op in graph.get_operations():
        if skip_scope and any(re.fullmatch(rf"{skip_scope}(_\d+)*", part) for part in op.name.split("/")[:-1]):
            continue
        if op.type == "MatMul":
            a, b = (tuple(x.shape) for x in op.inputs)
            m, k = a[::-1] if op.get_attr("transpose_a") else a
            n = b[0] if op.get_attr("transpose_b") else b[1]
            total += 2 * m * k * n
        elif op.type.startswith("BatchMatMul"):
            a, b = (tuple(x.shape) for x in op.inputs)
            m, k = a[-1:-3:-1] if op.get_attr("adj_x") else a[-2:]
            n = b[-2] if op.get_attr("adj_y") else b[-1]
            total += 2 * int(np.prod(a[:-2])) * m * k * n
    return total


def step_graph_flops(cell, batch, input_shape):
    cell.build((batch,) + input_shape)
    memory = tf.TensorSpec((batch, cell.mem_slots, cell.mem_size))
    step = tf.function(lambda x, m: cell.step(x, m)[0])
    return graph_matmul_flops(step.get_concrete_function(tf.TensorSpec((batch,) + input_shape), memory).graph)


@pytest.mark.parametrize(
    "config",
    [
        {"mem_slots": 2, "head_size": 8, "num_heads": 2, "key_size": 4, "attention_mlp_layers": 3},
        {"mem_slots": 3, "head_size": 6, "num_heads": 1, "num_blocks": 3, "gate_style": "memory"},
        {"mem_slots": 1, "head_size": 4, "num_heads": 4, "num_blocks": 2, "gate_style": None},
    ],
)
def test_rmc_step_flops_match_the_traced_cell(config):
    batch = 3
    counted = step_graph_flops(RelationalMemoryCell(**config), batch, (5,))
    assert flops.rmc_step_flops(5, **config) * batch == counted


def test_rmc_step_flops_with_matrix_inputs():
    config = {"mem_slots": 2, "head_size": 4, "num_heads": 2, "num_blocks": 2}
    counted = step_graph_flops(RelationalMemoryCell(treat_input_as_matrix=True, **config), 2, (3, 7))
    assert flops.rmc_step_flops(7, input_rows=3, **config) * 2 == counted


@pytest.mark.parametrize("model", ["rmc", "lstm"])
def test_lm_flops_are_the_core_step_plus_the_head(model):
    # The reference RNN(cell) model: the core's products are counted on its
    # cell's step, the head's (projection, tied softmax) on the model's graph
    # outside the core's scope (Keras also traces one step there, to infer shapes).
    small = {"rmc": {"embedding_dim": 6, "mem_slots": 2, "head_size": 4, "num_heads": 2, "key_size": 3},
             "lstm": {"embedding_dim": 6, "units": 10, "num_layers": 2}}[model]
    config = {**lm_defaults(model), **small}
    batch, time, vocab = 2, 3, 11
    lm = build_language_model(model, vocab, batch, time, precompute_inputs=False, **small)
    forward = tf.function(lambda ids: lm(ids))
    graph = forward.get_concrete_function(tf.TensorSpec((batch, time), tf.int32)).graph
    head = graph_matmul_flops(graph, skip_scope="core")
    if model == "rmc":
        cell_args = {k: v for k, v in config.items() if k not in ("embedding_dim", "tied")}
        core = step_graph_flops(RelationalMemoryCell(**cell_args), batch, (6,))
    else:  # two stacked LSTMs: x W + h U for the four gates, the second reading the first's h
        core = 0
        for inputs in (6, 10):
            lstm_cell = keras.layers.LSTMCell(10)
            lstm_cell.build((batch, inputs))
            step = tf.function(lambda x, h, c, cell=lstm_cell: cell(x, [h, c])[0])
            spec = tf.TensorSpec((batch, 10))
            core += graph_matmul_flops(step.get_concrete_function(tf.TensorSpec((batch, inputs)), spec, spec).graph)
    per_token = (core / batch) + head / (batch * time)
    assert flops.lm_training_flops_per_token(model, config, vocab) == 3 * per_token


def test_module_example_and_defaults():
    # The PTB configuration's count, as the module docstring shows it.
    assert doctest.testmod(flops, optionflags=doctest.ELLIPSIS).failed == 0
    with pytest.raises(ValueError, match="'rmc' or 'lstm'"):
        flops.lm_training_flops_per_token("gru", {"embedding_dim": 4}, 10)


def test_matmul_gflops_is_a_positive_rate():
    rate = flops.matmul_gflops(rows=64, inner=32, columns=48, repeats=2)
    assert np.isfinite(rate) and rate > 0
