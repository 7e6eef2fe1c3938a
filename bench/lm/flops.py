"""Matrix-product FLOPs of the language models, and the machine's measured matrix-product rate.

What a training step of `bench.lm.speed` has to do is counted from the layer
sizes: every matrix product (dense layers, the attention's two products, the
tied softmax), forward, times 3 for training (the backward pass multiplies by
each weight's transpose for the input gradient and by the input for the weight
gradient: two products of the forward one's size). Element-wise work
(LayerNorm, gates, softmax, the optimizer) is not counted: a step's share of
the machine's matrix-product rate is the fraction of the arithmetic the
hardware could do that the step gets done.

Example:

```python
>>> from keras_relmem.models.language_model import lm_defaults
>>> flops = lm_training_flops_per_token("rmc", lm_defaults("rmc"), vocab=10_000)
>>> round(flops / 1e6, 1)  # MFLOPs per training token
49.9

```
"""

import time

# Forward products per token, times 3 for a training step (see the module docstring).
TRAINING_FACTOR = 3


def rmc_step_flops(input_size, mem_slots, head_size, num_heads=1, num_blocks=1, key_size=None,
                   attention_mlp_layers=2, gate_style="unit", input_rows=1, **_):
    """Forward matrix-product FLOPs of one `RelationalMemoryCell` step, per example.

    Counts what Sonnet's `relational_memory.py` computes, less what our cell
    skips because it is dropped unused (the input rows' queries and MLP in the
    last block): the input projection, each block's q/k/v projection (block 0 of
    the memory rows and the input rows, later blocks of all rows), the
    attention's logits and weighted sum, the shared MLP, and the two sides of
    the gates.

    Args:
        input_size: int, features of one input row.
        mem_slots, head_size, num_heads, num_blocks, key_size,
            attention_mlp_layers, gate_style: the cell's arguments.
        input_rows: int, rows a step's input adds to the memory (1 unless
            `treat_input_as_matrix`).
    """
    key_size = key_size or head_size
    mem = head_size * num_heads
    qkv = (2 * key_size + head_size) * num_heads
    rows = mem_slots + input_rows
    flops = 2 * input_rows * input_size * mem  # input projection
    for block in range(num_blocks):
        last = block == num_blocks - 1
        flops += 2 * rows * mem * qkv
        queries = mem_slots if last else rows
        flops += 2 * num_heads * queries * rows * (key_size + head_size)
        flops += attention_mlp_layers * 2 * queries * mem * mem
    gate = {"unit": mem, "memory": 1, None: 0}[gate_style]
    flops += 2 * (input_rows * mem) * 2 * gate  # input side of the gates
    flops += 2 * mem_slots * mem * 2 * gate  # memory side
    return flops


def lstm_step_flops(input_size, units):
    """Forward matrix-product FLOPs of one LSTM step per example: `x W` and `h U` for the four gates."""
    return 2 * (input_size + units) * 4 * units


def lm_training_flops_per_token(model, config, vocab):
    """Training matrix-product FLOPs per token of `build_language_model(model, vocab, **config)`.

    Args:
        model: `"rmc"` or `"lstm"`.
        config: the model's hyper-parameters (`lm_defaults(model)` and overrides).
        vocab: int, vocabulary size (the softmax).
    """
    embedding = config["embedding_dim"]
    if model == "rmc":
        core = rmc_step_flops(embedding, **config)
        width = config["head_size"] * config["num_heads"] * config["mem_slots"]
    elif model == "lstm":
        units, layers = config["units"], config.get("num_layers", 1)
        core = lstm_step_flops(embedding, units) + (layers - 1) * lstm_step_flops(units, units)
        width = units
    else:
        raise ValueError(f"model must be 'rmc' or 'lstm'; received {model!r}.")
    head = 0
    if config.get("tied", True) and width != embedding:
        head += 2 * width * embedding  # projection down to the tied embedding
        width = embedding
    head += 2 * width * vocab  # the softmax
    return TRAINING_FACTOR * (core + head)


def matmul_gflops(rows=6400, inner=768, columns=1280, repeats=5):
    """The machine's matrix-product rate in GFLOP/s, measured with `keras.ops.matmul` (compiled).

    A product the size of the language model's largest (a whole batch of
    tokens through a 768 x 1280 weight) on the current backend, on the threads
    the backend was given; the best of `repeats` runs after a warm-up.
    """
    import keras
    import numpy as np

    backend = keras.backend.backend()
    a = keras.ops.convert_to_tensor(np.random.default_rng(0).standard_normal((rows, inner), "float32"))
    b = keras.ops.convert_to_tensor(np.random.default_rng(1).standard_normal((inner, columns), "float32"))
    if backend == "tensorflow":
        import tensorflow as tf

        product = tf.function(keras.ops.matmul, jit_compile=False)
    elif backend == "jax":
        import jax

        product = jax.jit(keras.ops.matmul)
    else:
        product = keras.ops.matmul
    best = float("inf")
    for repeat in range(repeats + 1):
        start = time.perf_counter()
        keras.ops.convert_to_numpy(product(a, b))
        if repeat:  # the first call traces and compiles
            best = min(best, time.perf_counter() - start)
    return 2 * rows * inner * columns / best / 1e9
