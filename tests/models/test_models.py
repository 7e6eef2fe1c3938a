"""The task models build, fit, save and reload on the current Keras backend.

These tests take NumPy inputs only, so they run unchanged under
`KERAS_BACKEND=tensorflow|jax|torch`. The last test saves a `.keras` file here
and loads it under every other installed backend, in a subprocess (the backend
is fixed per process), comparing the outputs.
"""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_relmem.models import build_babi_model, build_language_model
from tests.helpers import assert_close

VOCAB, ANSWERS, K, S, Q = 12, 4, 3, 4, 3
BATCH = 8
SMALL = {
    "entnet": {"embedding_dim": 8, "num_blocks": 2},
    "rmc": {"embedding_dim": 8, "mem_slots": 2, "head_size": 4, "num_heads": 2},
    "lstm": {"embedding_dim": 8, "units": 8},
    "memo": {"embedding_dim": 8, "num_heads": 2, "key_size": 4, "max_hops": 2,
             "answer_units": 8},
}
SMALL_LM = {
    "rmc": {"embedding_dim": 8, "mem_slots": 1, "head_size": 8, "num_heads": 2, "key_size": 4},
    "lstm": {"embedding_dim": 8, "units": 6},  # 6 != 8: a projection before the tied softmax
}
OTHER_BACKENDS = [
    name for name in ("tensorflow", "jax", "torch")
    if name != keras.backend.backend() and importlib.util.find_spec(name)
]
# Once per CI run is enough (a minute of subprocesses): from the JAX run, the
# files go to TensorFlow; under torch, to TensorFlow and JAX.


def babi_batch(seed=0):
    rng = np.random.default_rng(seed)
    story = rng.integers(1, VOCAB, size=(BATCH, K, S)).astype("int32")
    story[:, -1] = 0  # a padded sentence in every story
    query = rng.integers(1, VOCAB, size=(BATCH, Q)).astype("int32")
    answer = rng.integers(0, ANSWERS, size=(BATCH,)).astype("int32")
    return {"story": story, "query": query}, answer


def compiled_babi(name):
    model = build_babi_model(name, VOCAB, ANSWERS, K, S, Q, **SMALL[name])
    if name == "memo":
        model.compile(keras.optimizers.Adam(0.01))
    else:
        model.compile(
            keras.optimizers.Adam(0.01),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    return model


def _fit_and_check_learning(model, x, y):
    """Fitting on one batch lowers the loss on it: the gradients reach the model."""
    before = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    history = model.fit(x, y, batch_size=BATCH, epochs=8, verbose=0)
    after = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    assert np.isfinite(history.history["loss"]).all()
    assert after < before, (before, after)


def _reload_equal(model, x, tmp_path):
    path = tmp_path / f"{model.name}.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert_close(reloaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5)
    return reloaded


# The RMC and LSTM bAbI models with `-m slow`: the RMC's file round trip is tested by default with the
# language model and the layer harness.
@pytest.mark.parametrize("name", ["entnet", pytest.param("rmc", marks=pytest.mark.slow),
                                  pytest.param("lstm", marks=pytest.mark.slow), "memo"])
def test_babi_model_fits_saves_and_reloads(name, tmp_path):
    x, y = babi_batch()
    model = compiled_babi(name)
    _fit_and_check_learning(model, x, y)
    reloaded = _reload_equal(model, x, tmp_path)
    # The reloaded model is compiled and keeps training.
    reloaded.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)


@pytest.mark.parametrize("name", ["rmc", "lstm"])
def test_language_model_fits_saves_and_reloads(name, tmp_path):
    ids = np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, 6)).astype("int32")
    model = build_language_model(name, VOCAB, **SMALL_LM[name])
    model.compile(
        keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    _fit_and_check_learning(model, ids[:, :-1], ids[:, 1:])
    _reload_equal(model, ids[:, :-1], tmp_path)


def test_zaremba_lstm_stacks_layers_with_dropout_and_uniform_weights():
    """Zaremba et al. 2014 (§4.1): stacked LSTMs, dropout on the non-recurrent connections only,
    every weight uniform in [-init_scale, init_scale], an untied softmax."""
    model = build_language_model(
        "lstm", VOCAB, embedding_dim=6, units=5, num_layers=2, dropout=0.5, init_scale=0.1, tied=False
    )
    cores = [layer for layer in model.layers if isinstance(layer, keras.layers.LSTM)]
    assert [c.name for c in cores] == ["core", "core_2"] and cores[1].input.shape[-1] == 5
    assert sum(isinstance(layer, keras.layers.Dropout) for layer in model.layers) == 3
    assert all(c.cell.recurrent_dropout == 0 for c in cores)
    matrices = [model.get_layer("embedding").embeddings, model.get_layer("softmax").kernel]
    matrices += [w for c in cores for w in (c.cell.kernel, c.cell.recurrent_kernel)]
    values = [keras.ops.convert_to_numpy(w).ravel() for w in matrices]
    assert all(np.abs(v).max() <= 0.1 for v in values)
    # U(-0.1, 0.1) has std 0.058, Keras' default U(-0.05, 0.05) 0.029: pooled, since one small matrix's
    # sample std strays (a 3 x 6 embedding drew 0.0497)
    assert np.concatenate(values).std() > 0.05
    # every weight draws its own values (one shared Keras initializer would repeat them)
    same_shape = [keras.ops.convert_to_numpy(w) for c in cores[1:] for w in (c.cell.kernel, c.cell.recurrent_kernel)]
    same_shape.append(keras.ops.convert_to_numpy(cores[0].cell.recurrent_kernel))
    assert len({v.tobytes() for v in same_shape}) == len(same_shape) == 3
    assert not model.get_layer("embedding").use_bias  # untied: no unused softmax bias
    ids = np.zeros((2, 4), "int32")
    assert_close(model(ids, training=False), model(ids, training=False))  # dropout off at inference
    assert np.abs(keras.ops.convert_to_numpy(model(ids, training=True) - model(ids, training=False))).max() > 0


def test_tied_softmax_uses_the_embedding_and_its_bias():
    """Logits = h E^T + b with E the input embedding (Press & Wolf 2017, eq. 1)."""
    model = build_language_model("rmc", VOCAB, **SMALL_LM["rmc"])
    embedding = model.get_layer("embedding")
    assert isinstance(embedding, keras.layers.ReversibleEmbedding)
    rng = np.random.default_rng(2)
    embedding.reverse_bias.assign(rng.normal(size=(VOCAB,)).astype("float32"))
    h = rng.normal(size=(2, 8)).astype("float32")
    expected = h @ keras.ops.convert_to_numpy(embedding.embeddings).T + keras.ops.convert_to_numpy(
        embedding.reverse_bias
    )
    assert_close(embedding(h, reverse=True), expected, atol=1e-5)


LOAD_ELSEWHERE = """
import json, sys
import numpy as np
import keras
import keras_relmem  # registers the layers
inputs = {k: np.asarray(v, "int32") for k, v in json.loads(sys.argv[1]).items()}
outputs = {}
for path in sys.argv[2:]:
    # compile=False: the saved jit_compile=True would mean torch.compile on torch,
    # minutes of tracing for a test that only predicts.
    model = keras.saving.load_model(path, compile=False)
    outputs[path] = np.asarray(model.predict(inputs, verbose=0)).tolist()
print(json.dumps(outputs))
"""


@pytest.mark.skipif(not OTHER_BACKENDS, reason="only one Keras backend installed")
@pytest.mark.skipif(
    keras.backend.backend() == "tensorflow", reason="run from the jax/torch runs (once per CI run)"
)
def test_keras_files_load_under_every_other_backend(tmp_path):
    """One subprocess per other backend loads every model (a backend is fixed per process)."""
    x, y = babi_batch()
    expected = {}
    for name in ("entnet", "rmc", "memo"):
        model = compiled_babi(name)
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        path = str(tmp_path / f"{name}.keras")
        model.save(path)
        expected[path] = keras.ops.convert_to_numpy(model.predict(x, verbose=0))
    payload = json.dumps({k: v.tolist() for k, v in x.items()})
    for backend in OTHER_BACKENDS:
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
        result = subprocess.run(
            [sys.executable, "-c", LOAD_ELSEWHERE, payload, *expected],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )
        assert result.returncode == 0, f"{backend}: {result.stderr[-3000:]}"
        outputs = json.loads(result.stdout.strip().splitlines()[-1])
        for path, want in expected.items():
            np.testing.assert_allclose(np.asarray(outputs[path]), want, atol=1e-4,
                                       err_msg=f"{path} under {backend}")


def test_memo_classifier_says_what_it_returns():
    """`outputs=` picks the logits, the logits with hops, or a training step's outputs; `returning()`
    sets the default for Keras' steps and puts the previous one back."""
    from keras_relmem.models import MEMOClassifier

    rng = np.random.default_rng(0)
    x = {"facts": rng.integers(1, 20, size=(4, 6, 3)), "query": rng.integers(1, 20, size=(4, 3))}
    model = MEMOClassifier(num_answers=2, vocab_size=20, embedding_dim=8, key_size=4, max_hops=3, seed=1)
    logits = keras.ops.convert_to_numpy(model(x))
    assert logits.shape == (4, 2)
    with_hops = model(x, outputs="hops")
    assert sorted(with_hops) == ["hops", "logits"]
    assert_close(with_hops["logits"], logits, atol=1e-6)
    assert_close(model(x, return_hops=True)["hops"], with_hops["hops"], atol=0)
    training = model(x, outputs="training")
    assert tuple(training["answer_logits"].shape) == (4, 3, 2) and "halt_hop" in training
    with model.returning("training"):
        assert sorted(model(x)) == sorted(training)
    assert tuple(model(x).shape) == (4, 2)
    with pytest.raises(ValueError, match="outputs must be one of"):
        model(x, outputs="everything")
