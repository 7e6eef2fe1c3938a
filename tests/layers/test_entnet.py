"""EntNetCell, EntNetEncoder and EntNetReadout against independent NumPy code."""

import keras
import numpy as np
import pytest

from keras_relmem import EntNetCell, EntNetEncoder, EntNetReadout
from tests.helpers import assert_close, randomize_weights, weights_by_name

BATCH, BLOCKS, UNITS, STEPS = 2, 3, 4, 5


def np_prelu(x, alpha):
    return np.where(x > 0, x, alpha * x)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_entnet_step(w, s, h, keys=None, alpha=None):
    """Henaff et al. eq. 1-4 for every block j, written per block.

    With the authors' bias on the memory term: entnet.lua's candidate is
    `PReLU(nn.Linear(edim, edim)(memories) + ...)`, a Linear with a bias,
    while its sentence and key terms are `nn.Linear(edim, edim, false)`.
    """
    keys = w["keys"] if keys is None else keys
    alpha = w["prelu/alpha"] if alpha is None else alpha
    bias = w.get("U/bias", np.zeros(h.shape[-1]))
    out = np.empty_like(h)
    for b in range(h.shape[0]):
        for j in range(h.shape[1]):
            g = np_sigmoid(s[b] @ h[b, j] + s[b] @ keys[j] + w["gate_bias"][j])
            cand = np_prelu(
                h[b, j] @ w["U/kernel"] + bias + keys[j] @ w["V/kernel"] + s[b] @ w["W/kernel"],
                alpha.reshape(-1),
            )
            new = h[b, j] + g * cand
            out[b, j] = new / np.linalg.norm(new)
    return out


def make_cell(**kwargs):
    cell = EntNetCell(num_blocks=BLOCKS, units=UNITS, **kwargs)
    cell.build((None, UNITS))
    randomize_weights(cell, scale=0.5)
    return cell


def sentences(seed=1, steps=STEPS):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(BATCH, steps, UNITS)).astype("float32")


def test_one_step_matches_numpy():
    cell = make_cell()
    s = sentences()[:, 0]
    h = np.random.default_rng(3).normal(size=(BATCH, BLOCKS, UNITS)).astype("float32")
    flat, states = cell(s, [h.reshape(BATCH, -1)])
    expected = np_entnet_step(weights_by_name(cell), s, h)
    assert_close(flat, expected.reshape(BATCH, -1), atol=1e-5)
    assert_close(states[0], flat)


def test_sequence_starts_at_keys_and_matches_numpy():
    cell = make_cell()
    xs = sentences()
    outputs = keras.layers.RNN(cell, return_sequences=True)(xs)
    w = weights_by_name(cell)
    h = np.broadcast_to(w["keys"], (BATCH, BLOCKS, UNITS)).copy()
    for t in range(STEPS):
        h = np_entnet_step(w, xs[:, t], h)
        assert_close(outputs[:, t], h.reshape(BATCH, -1), atol=2e-5)
    # Every block ends with unit norm (the "forgetting" normalisation).
    norms = np.linalg.norm(keras.ops.convert_to_numpy(outputs).reshape(BATCH, STEPS, BLOCKS, UNITS), axis=-1)
    assert_close(norms, 1.0, atol=1e-5)


def test_initial_state_is_the_keys():
    keys = np.arange(BLOCKS * UNITS, dtype="float32").reshape(BLOCKS, UNITS)
    cell = EntNetCell(num_blocks=BLOCKS, units=UNITS, keys=keys, trainable_keys=False)
    cell.build((None, UNITS))
    state = keras.ops.convert_to_numpy(cell.get_initial_state(batch_size=2)[0])
    np.testing.assert_array_equal(state, np.tile(keys.reshape(1, -1), (2, 1)))
    assert not cell.key_vectors.trainable


def test_zero_norm_is_guarded():
    """A block and update that cancel to zero stay zero instead of NaN."""
    cell = EntNetCell(
        num_blocks=1,
        units=UNITS,
        keys=np.zeros((1, UNITS)),
        kernel_initializer="zeros",
        alpha_initializer="zeros",
    )
    cell.build((None, UNITS))
    out, _ = cell(np.zeros((1, UNITS), "float32"), [np.zeros((1, UNITS), "float32")])
    out = keras.ops.convert_to_numpy(out)
    assert np.all(np.isfinite(out)) and np.all(out == 0.0)


def test_masked_steps_leave_memory_untouched():
    cell = make_cell()
    xs = sentences()
    mask = np.array([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0]], dtype=bool)
    rnn = keras.layers.RNN(cell)
    masked = keras.ops.convert_to_numpy(rnn(xs, mask=mask))
    for b in range(BATCH):
        kept = xs[b : b + 1, mask[b]]
        assert_close(masked[b], keras.ops.convert_to_numpy(rnn(kept))[0], atol=1e-5)


def test_encoder_positional_mask_matches_numpy_and_masks_padding():
    enc = EntNetEncoder()
    emb = np.random.default_rng(0).normal(size=(BATCH, 3, 4, UNITS)).astype("float32")
    enc.build(emb.shape)
    # Starts as a bag of words.
    assert_close(enc(emb), emb.sum(axis=2), atol=1e-5)
    randomize_weights(enc)
    f = keras.ops.convert_to_numpy(enc.positional_mask)
    assert_close(enc(emb), (emb * f).sum(axis=2), atol=1e-5)
    word_mask = np.ones((BATCH, 3, 4), bool)
    word_mask[:, :, 3] = False  # padded last word
    word_mask[0, 2] = False  # a fully padded sentence
    out = enc(emb, mask=word_mask)
    assert_close(out, (emb * f * word_mask[..., None]).sum(axis=2), atol=1e-5)
    sentence_mask = keras.ops.convert_to_numpy(enc.compute_mask(emb, word_mask))
    np.testing.assert_array_equal(sentence_mask, [[True, True, False], [True, True, True]])


def test_encoder_works_on_queries():
    """A query is one sentence: q = sum_i f_i * e_i (Henaff et al. §2.1, the same encoder)."""
    enc = EntNetEncoder()
    q = np.random.default_rng(2).normal(size=(BATCH, 6, UNITS)).astype("float32")
    enc.build(q.shape)
    randomize_weights(enc, seed=3)
    f = keras.ops.convert_to_numpy(enc.positional_mask)
    assert f.shape == (6, UNITS)
    assert_close(enc(q), np.einsum("bwd,wd->bd", q, f), atol=1e-5)
    word_mask = np.ones((BATCH, 6), bool)
    word_mask[0, 4:] = False  # a shorter question
    expected = np.einsum("bwd,wd->bd", q * word_mask[..., None], f)
    assert_close(enc(q, mask=word_mask), expected, atol=1e-5)


def test_readout_matches_numpy():
    readout = EntNetReadout(num_outputs=7)
    memory = np.random.default_rng(0).normal(size=(BATCH, BLOCKS * UNITS)).astype("float32")
    query = np.random.default_rng(1).normal(size=(BATCH, UNITS)).astype("float32")
    readout.build([memory.shape, query.shape])
    randomize_weights(readout)
    w = weights_by_name(readout)
    logits = keras.ops.convert_to_numpy(readout([memory, query]))
    h = memory.reshape(BATCH, BLOCKS, UNITS)
    expected = np.empty((BATCH, 7))
    for b in range(BATCH):
        scores = h[b] @ query[b]
        p = np.exp(scores - scores.max())
        p /= p.sum()
        u = (p[:, None] * h[b]).sum(0)
        expected[b] = np_prelu(query[b] + u @ w["H/kernel"], w["prelu/alpha"]) @ w["R/kernel"]
    assert_close(logits, expected, atol=1e-5)
    # The attention weights are a distribution over blocks.
    p = keras.ops.convert_to_numpy(readout.attention(memory, query))
    assert_close(p.sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_blocks=0), "num_blocks"),
        (dict(units=-3), "units"),
        (dict(keys=np.zeros((2, 2))), "keys"),
        (dict(epsilon=0.0), "epsilon"),
    ],
)
def test_cell_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EntNetCell(**({"num_blocks": 3, "units": 4} | kwargs))


def test_cell_rejects_wrong_sentence_size():
    with pytest.raises(ValueError, match="units=4"):
        EntNetCell(num_blocks=2, units=4).build((None, 5))


def test_readout_rejects_bad_shapes():
    with pytest.raises(ValueError, match="multiple"):
        EntNetReadout(3).build([(None, 10), (None, 4)])
    with pytest.raises(ValueError, match="num_outputs"):
        EntNetReadout(0)


def test_candidate_bias_is_the_authors_and_can_be_left_out():
    cell = make_cell()
    assert "U/bias" in weights_by_name(cell)
    assert np.abs(weights_by_name(cell)["U/bias"]).max() > 0  # randomized: the step test covers it
    plain = make_cell(candidate_bias=False)
    assert "U/bias" not in weights_by_name(plain)
    s = sentences()[:, 0]
    h = np.random.default_rng(3).normal(size=(BATCH, BLOCKS, UNITS)).astype("float32")
    flat, _ = plain(s, [h.reshape(BATCH, -1)])
    assert_close(flat, np_entnet_step(weights_by_name(plain), s, h).reshape(BATCH, -1), atol=1e-5)


def test_cells_saved_before_the_candidate_bias_load_without_it():
    config = make_cell().get_config()
    assert config["candidate_bias"] is True
    del config["candidate_bias"]  # the config of an older file
    assert EntNetCell.from_config(config).candidate_bias is False


def test_tied_keys_are_embedding_rows_and_train_with_it():
    """entnet.lua with -tied 1: keys and the initial memory are rows E[entities] of the shared embedding."""
    embedding = keras.layers.Embedding(10, UNITS)
    embedding.build(None)
    randomize_weights(embedding, seed=4)
    entities = np.array([7, 2, 5])
    cell = make_cell(keys=lambda: embedding(entities))
    assert cell.tied_keys and not hasattr(cell, "key_vectors")
    rows = keras.ops.convert_to_numpy(embedding.embeddings)[entities]
    state = keras.ops.convert_to_numpy(cell.get_initial_state(batch_size=BATCH)[0])
    assert_close(state, np.tile(rows.reshape(1, -1), (BATCH, 1)), atol=0)
    xs = sentences()
    out = keras.ops.convert_to_numpy(keras.layers.RNN(cell)(xs))
    w = weights_by_name(cell)
    h = np.broadcast_to(rows, (BATCH, BLOCKS, UNITS)).copy()
    for t in range(STEPS):
        h = np_entnet_step(w, xs[:, t], h, keys=rows)
    assert_close(out, h.reshape(BATCH, -1), atol=2e-5)
    # The loss reaches exactly the entity rows of the embedding.
    from tests.helpers import gradients

    grad = keras.ops.convert_to_numpy(
        gradients(lambda: keras.ops.sum(keras.layers.RNN(cell)(xs)), [embedding.embeddings])[0])
    assert np.abs(grad[entities]).min() > 0
    assert np.all(grad[[0, 1, 3, 4, 6, 8, 9]] == 0)
    with pytest.raises(ValueError, match="cannot be serialized alone"):
        cell.get_config()


def test_one_prelu_shared_by_cell_and_readout():
    """entnet.lua shares every module named 'prelu': one slope vector for the memory and the output."""
    prelu = EntNetReadout.shared_prelu(UNITS)
    prelu.alpha.assign(np.linspace(-0.5, 0.5, UNITS).reshape(1, UNITS))
    cell = make_cell(activation=prelu)
    readout = EntNetReadout(num_outputs=7, activation=prelu)
    memory = np.random.default_rng(0).normal(size=(BATCH, BLOCKS * UNITS)).astype("float32")
    query = np.random.default_rng(1).normal(size=(BATCH, UNITS)).astype("float32")
    readout.build([memory.shape, query.shape])
    randomize_weights(readout, seed=2)
    prelu.alpha.assign(np.linspace(-0.5, 0.5, UNITS).reshape(1, UNITS))
    alpha = np.linspace(-0.5, 0.5, UNITS)
    assert cell.activation is readout.activation is prelu
    # The cell's step with the shared slopes.
    s = sentences()[:, 0]
    h = np.random.default_rng(3).normal(size=(BATCH, BLOCKS, UNITS)).astype("float32")
    flat, _ = cell(s, [h.reshape(BATCH, -1)])
    assert_close(flat, np_entnet_step(weights_by_name(cell), s, h, alpha=alpha).reshape(BATCH, -1), atol=1e-5)
    # The readout's y = R PReLU(q + H u) with the same slopes.
    w = weights_by_name(readout)
    blocks = memory.reshape(BATCH, BLOCKS, UNITS)
    scores = np.einsum("bjd,bd->bj", blocks, query)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    u = np.einsum("bj,bjd->bd", p, blocks)
    expected = np_prelu(query + u @ w["H/kernel"], alpha) @ w["R/kernel"]
    assert_close(readout([memory, query]), expected, atol=1e-5)
    with pytest.raises(ValueError, match="cannot be serialized alone"):
        readout.get_config()
