"""ReadThenWrite, the RMC paper's Learning to Execute model (Santoro et al. 2018, §4.4; Sonnet's
`rmc_learn_to_execute.py`), its metrics and its loss, against NumPy."""

import json

import keras
import numpy as np
import pytest

from keras_relmem.data import lte
from keras_relmem.models.seq2seq import (
    CharacterAccuracy,
    DecodeSteps,
    ReadThenWrite,
    SolvedRate,
    answer_loss,
    answer_metrics,
    build_core,
)

VOCAB = len(lte.VOCABULARY)


def _targets_and_logits(seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 5, size=12)  # answers of 0-4 characters, an end mark, padding to 6 steps
    y_true = np.zeros((12, 6), "int32")
    for row, n in enumerate(lengths):
        y_true[row, :n] = rng.integers(3, VOCAB, size=n)
        y_true[row, n] = lte.EOS
    logits = rng.normal(size=(12, 6, VOCAB)).astype("float32")
    # make most predictions right, so that some answers are solved and some are not
    right = rng.random((12, 6)) < 0.8
    logits[right, y_true[right]] += 10.0
    return y_true, logits


def test_decode_steps_append_zero_unmasked_steps():
    x = np.random.default_rng(1).normal(size=(2, 3, 4)).astype("float32")
    layer = DecodeSteps(2)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(x)), np.concatenate([x, np.zeros((2, 2, 4))], 1))
    mask = np.array([[True, True, False], [True, False, False]])
    expected = np.concatenate([mask, np.ones((2, 2), bool)], axis=1)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.compute_mask(x, mask)), expected)
    with pytest.raises(ValueError, match="steps must be a positive integer; received 0"):
        DecodeSteps(0)


def test_metrics_match_numpy():
    y_true, logits = _targets_and_logits()
    predicted = logits.argmax(-1)
    # Sonnet's rmc_learn_to_execute.py: token accuracy over the answers' characters, "solved" when all are right
    answer = (y_true != lte.PAD) & (y_true != lte.EOS)
    accuracy = ((predicted == y_true) & answer).sum() / answer.sum()
    solved = np.mean([(predicted[i][answer[i]] == y_true[i][answer[i]]).all() for i in range(len(y_true))])
    assert 0.1 < solved < 0.9
    metrics = answer_metrics()
    for metric in metrics:
        metric.update_state(y_true[:5], logits[:5])
        metric.update_state(y_true[5:], logits[5:])  # accumulates over batches
    np.testing.assert_allclose(float(metrics[0].result()), accuracy, rtol=1e-6)
    np.testing.assert_allclose(float(metrics[1].result()), solved, rtol=1e-6)
    assert isinstance(metrics[0], CharacterAccuracy) and isinstance(metrics[1], SolvedRate)


def test_loss_is_the_mean_cross_entropy_of_the_answer_and_its_end_mark():
    y_true, logits = _targets_and_logits(2)
    shifted = logits - logits.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_softmax, y_true[..., None], axis=-1)[..., 0]
    counted = y_true != lte.PAD
    np.testing.assert_allclose(float(answer_loss()(y_true, logits)), nll[counted].mean(), rtol=1e-5)


def _model(kind, answer_length=4):
    core = build_core(kind, embedding_dim=8, mem_slots=2, head_size=4, num_heads=2, units=8, entnet_blocks=3)
    return ReadThenWrite(core, VOCAB, answer_length, embedding_dim=8, mlp_units=(16,))


@pytest.mark.parametrize("kind", ["rmc", "lstm", "entnet"])
def test_padding_after_the_program_changes_nothing(kind):
    model = _model(kind)
    ids = np.array(lte.VOCABULARY.encode("print((12+3))"), "int32")[None]
    padded = np.concatenate([ids, np.zeros((1, 7), "int32")], axis=1)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(ids)), keras.ops.convert_to_numpy(model(padded)),
                               atol=1e-5)
    other = np.array(lte.VOCABULARY.encode("print((12+4))"), "int32")[None]
    assert not np.allclose(keras.ops.convert_to_numpy(model(ids)), keras.ops.convert_to_numpy(model(other)))


def test_answer_steps_are_the_core_run_on_zero_inputs_after_the_program():
    model = _model("lstm", answer_length=3)
    ids = np.array([lte.VOCABULARY.encode("print(7)")], "int32")
    embedded = keras.ops.convert_to_numpy(model.get_layer("embedding")(ids))
    steps = np.concatenate([embedded, np.zeros((1, 3, 8), "float32")], axis=1)
    hidden = keras.ops.convert_to_numpy(model.get_layer("core")(steps))[:, -3:]
    dense, logits = model.get_layer("mlp_0"), model.get_layer("logits")
    weights = [keras.ops.convert_to_numpy(w) for w in (dense.kernel, dense.bias, logits.kernel, logits.bias)]
    expected = np.maximum(hidden @ weights[0] + weights[1], 0) @ weights[2] + weights[3]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(ids)), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["rmc", "lstm", "entnet"])
def test_keras_file_round_trip(kind, tmp_path):
    model = _model(kind)
    model.compile("adam", loss=answer_loss(), metrics=answer_metrics())
    data = lte.examples(16, "add", 1, 1, seed=0, style="v1")
    data["answer"] = data["answer"][:, :4]
    model.fit(data["program"], data["answer"], epochs=1, batch_size=8, verbose=0)
    path = tmp_path / "lte.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(data["program"], verbose=0), model.predict(data["program"], verbose=0),
                               atol=1e-6)
    # tuples become lists in the file
    assert loaded.core.get_config() == json.loads(json.dumps(model.core.get_config()))
    assert {k: v for k, v in loaded.get_config().items() if k != "core"} == {
        k: v for k, v in model.get_config().items() if k != "core"}
    loaded.fit(data["program"], data["answer"], epochs=1, batch_size=8, verbose=0)  # compiled as saved


def test_core_must_return_sequences():
    with pytest.raises(ValueError, match="return_sequences=True"):
        ReadThenWrite(keras.layers.LSTM(4), VOCAB, 3)
    with pytest.raises(ValueError, match="core must be one of rmc, lstm, entnet, mlp; received .gru."):
        build_core("gru")
