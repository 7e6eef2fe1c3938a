"""Look inside the memories without changing the layers' normal outputs.

Each probe re-runs a layer's own step function (`RelationalMemoryCell.step`,
`EntNetCell.step`, `MEMO.unrolled`) eagerly, one step at a time, and collects
what it attends to; a model that is not probed pays nothing.
"""

import keras
import numpy as np
from keras import ops


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _run_steps(step, inputs, memory, mask):
    """Run `step(x_t, memory) -> (new_memory, numpy extra)` over time.

    Masked steps keep the memory (as `keras.layers.RNN` does) and report NaN.
    """
    collected = []
    for t in range(inputs.shape[1]):
        new_memory, extra = step(inputs[:, t], memory)
        extra = np.array(extra, dtype="float64")
        if mask is not None:
            keep = np.asarray(mask)[:, t].astype(bool)
            new_memory = ops.where(keep.reshape((-1,) + (1,) * (len(new_memory.shape) - 1)), new_memory, memory)
            extra[~keep] = np.nan
        memory = new_memory
        collected.append(extra)
    return np.stack(collected, axis=1), memory


def rmc_attention(cell, sequence, mask=None):
    """Attention of a `RelationalMemoryCell` at every step and block.

    Args:
        cell: a built `RelationalMemoryCell`.
        sequence: `(batch, time, features)` inputs of the cell.
        mask: optional `(batch, time)`; masked steps keep the memory (as
            `keras.layers.RNN` does) and their attention is reported as NaN.

    Returns:
        `(attention, memory)`: `attention` of shape
        `(batch, time, blocks, heads, slots, rows)` (earlier blocks' query rows
        cut to the memory slots; rows = slots + input rows) and the final
        memory `(batch, slots * mem_size)`.
    """
    sequence = np.asarray(sequence)
    batch = sequence.shape[0]
    memory = ops.reshape(cell.get_initial_state(batch)[0], (batch, cell.mem_slots, cell.mem_size))

    def step(x, memory):
        new_memory, attention = cell.step(x, memory)
        return new_memory, np.stack([_np(a)[:, :, : cell.mem_slots, :] for a in attention], axis=1)

    attention, memory = _run_steps(step, sequence, memory, mask)
    return attention, _np(ops.reshape(memory, (batch, -1)))


def entnet_gates(cell, sentences, mask=None):
    """Gate activations `g_j` of an `EntNetCell` for every sentence and block.

    Args:
        cell: a built `EntNetCell`.
        sentences: encoded sentences `(batch, time, units)`.
        mask: optional `(batch, time)`; padded sentences get gates NaN and
            leave the memory untouched.

    Returns:
        `(gates (batch, time, blocks), memory (batch, blocks, units))`.
    """
    sentences = np.asarray(sentences)
    batch = sentences.shape[0]
    memory = ops.reshape(cell.get_initial_state(batch)[0], (batch, cell.num_blocks, cell.units))
    gates, memory = _run_steps(lambda x, m: cell.step(x, m), sentences, memory, mask)
    return gates, _np(memory)


def memo_trace(model, inputs):
    """Every hop of a `MEMOClassifier` on `inputs`.

    Returns a dict with `attention (batch, N, heads, facts)`, `p_halt
    (batch, N)` (when it has a halting policy), `answers (batch, N)` (the
    argmax answer id of every hop), `hops (batch,)` (what inference takes)
    and `mask (batch, facts)`.
    """
    embedded, mask = model.embed_inputs(inputs)
    out = model.memo.unrolled(embedded, mask=mask)
    trace = {
        "attention": _np(out["attention"]),
        "answers": np.argmax(_np(out["answer_logits"]), axis=-1),
        "hops": _np(model(inputs, return_hops=True)["hops"]),
        "mask": None if mask is None else _np(mask),
    }
    if "halt_logits" in out:
        trace["p_halt"] = 1.0 / (1.0 + np.exp(-_np(out["halt_logits"])))
    return trace


def nearest_words(vectors, embeddings, words, k=3):
    """The `k` words whose embeddings have the highest cosine with each vector."""
    vectors = np.asarray(vectors, "float64")
    embeddings = np.asarray(embeddings, "float64")
    a = vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)
    b = embeddings / np.maximum(np.linalg.norm(embeddings, axis=-1, keepdims=True), 1e-12)
    scores = a @ b.T
    return [[words[i] for i in np.argsort(-row)[:k]] for row in scores]
