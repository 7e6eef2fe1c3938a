"""relmem-train-lm and relmem-train-nth-farthest end to end on tiny settings."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_relmem.commands import train as commands
from keras_relmem.data import synthetic
from keras_relmem.models import language_model

needs_data = pytest.mark.skipif(
    not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA (../shared/data)"
)
TINY_RMC = ["--embedding-dim", "16", "--head-size", "8", "--num-heads", "2", "--key-size", "4"]


@needs_data
# The RMC run is slow (its graph traced for training, evaluation and export); the LSTM run covers the
# script by default and tests/models the RMC language model.
@pytest.mark.parametrize("model,sizes", [pytest.param("rmc", TINY_RMC, marks=pytest.mark.slow),
                                         ("lstm", ["--embedding-dim", "16", "--units", "24"])])
def test_lm_tiny_run_reports_perplexity_and_exports(model, sizes, tmp_path, capsys):
    results = commands.lm(
        ["--model", model, "--epochs", "2", "--max-steps", "2", "--max-eval-steps", "2", "--batch-size", "4",
         "--bptt", "10",
         "--learning-rate", "0.01", "--workdir", str(tmp_path), "--verbose", "0",
         "--no-jit-compile"] + sizes
    )
    out = capsys.readouterr().out
    assert "validation perplexity" in out and "test perplexity" in out
    assert len(results["epochs"]) == 2
    # Perplexity is exp(mean cross-entropy) of the logged losses.
    logged = json.loads((tmp_path / "metrics.json").read_text())["epochs"]
    for entry, log in zip(results["epochs"], logged):
        assert entry["val_perplexity"] == pytest.approx(np.exp(log["val_loss"]), rel=1e-5)
        assert entry["perplexity"] == pytest.approx(np.exp(log["loss"]), rel=1e-5)
    # Four steps already beat the uniform guess over PTB's 10k words (perplexity 10000).
    assert results["epochs"][-1]["perplexity"] < results["epochs"][0]["perplexity"] < 10000
    assert json.loads((tmp_path / "results.json").read_text())["test_perplexity"] == pytest.approx(
        results["test_perplexity"]
    )
    # The next-word SavedModel answers in a process that cannot import keras_relmem.
    code = f"""
import sys
sys.modules["keras_relmem"] = None
import tensorflow as tf
serve = tf.saved_model.load(r"{results['export']}").signatures["distribution"]
out = serve(ids=tf.constant([[5, 6, 7]], tf.int32))
p = out["probabilities"].numpy()
assert abs(p.sum() - 1) < 1e-4 and p.shape == (1, 10000), p.shape
print(out["top_words"].numpy()[0, 0].decode())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_stateful_lm_carries_memory_and_resets_to_identity():
    model = language_model.build_language_model(
        "rmc", 50, batch_size=2, sequence_length=6, stateful=True,
        embedding_dim=8, head_size=4, num_heads=2, key_size=4,
    )
    ids = np.random.default_rng(0).integers(50, size=(2, 12))
    whole = language_model.build_language_model(
        "rmc", 50, embedding_dim=8, head_size=4, num_heads=2, key_size=4,
    )
    whole.set_weights(model.get_weights())
    language_model.reset_memory(model)
    model(ids[:, :6])
    second = np.asarray(model(ids[:, 6:]))
    np.testing.assert_allclose(second, np.asarray(whole(ids))[:, 6:], atol=1e-4)
    language_model.reset_memory(model)
    state = np.asarray(model.get_layer("core").states[0])
    np.testing.assert_array_equal(state[:, :8], np.tile(np.eye(1, 8), (2, 1)))


def test_tied_softmax_uses_the_embedding_and_saves(tmp_path):
    import keras

    model = language_model.build_language_model("lstm", 30, embedding_dim=6, units=6)
    ids = np.arange(10).reshape(2, 5)
    embedding = model.get_layer("embedding")
    core_out = keras.Model(model.input, model.get_layer("core").output)(ids)
    expected = np.asarray(core_out) @ np.asarray(embedding.embeddings).T + np.asarray(embedding.reverse_bias)
    np.testing.assert_allclose(model(ids), expected, atol=1e-5)
    model.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras")
    np.testing.assert_allclose(loaded(ids), model(ids), atol=1e-6)


def test_lm_flags_are_checked(capsys, tmp_path):
    with pytest.raises(SystemExit):
        commands.lm(["--bptt", "0", "--workdir", str(tmp_path)])
    assert "LMConfig.bptt: expected an integer >= 1; got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        commands.lm(["--data-dir", str(tmp_path), "--workdir", str(tmp_path)])
    assert "No ptb train file" in capsys.readouterr().err


@pytest.mark.slow  # a training run; tests/bench/test_nth_farthest.py trains the same model by default
def test_nth_farthest_tiny_run_reports_accuracy_curve(tmp_path, capsys):
    results = commands.nth_farthest(
        ["--epochs", "2", "--train-examples", "256", "--test-examples", "64", "--mem-slots", "2",
         "--head-size", "8", "--num-heads", "2", "--workdir", str(tmp_path), "--verbose", "0"]
    )
    assert [p["epoch"] for p in results["curve"]] == [1, 2]
    assert "accuracy over training" in capsys.readouterr().out
    # The reported test accuracy is what the exported model scores on the task's
    # test set (regenerated from its seed), recomputed here outside Keras.
    args = results["args"]
    test = synthetic.nth_farthest(
        args["test_examples"], args["num_objects"], args["num_features"], seed=args["seed"] + 1
    )
    exported = tf.saved_model.load(results["export"])  # keep it: serve needs its variables
    predicted = np.argmax(exported.serve(tf.constant(test["inputs"])).numpy(), -1)
    assert results["test_accuracy"] == pytest.approx(np.mean(predicted == test["target"]), abs=1e-6)
