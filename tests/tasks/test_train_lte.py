"""tasks/train_lte.py end to end on a tiny setting: training, resume, results and the exported text signature."""

import json
import subprocess
import sys

import numpy as np
import pytest

from keras_relmem.commands import train as commands
from keras_relmem.data import lte
from keras_relmem.tasks import lte as lte_task

TINY = ["--task", "copy", "--length", "3", "--model", "lstm", "--units", "8", "--embedding-dim", "8",
        "--mlp-units", "16", "--steps-per-epoch", "3", "--batch-size", "8", "--test-examples", "40",
        "--verbose", "0"]


def test_tiny_run_resumes_and_exports_a_text_signature(tmp_path, capsys):
    workdir = str(tmp_path / "run")
    first = commands.lte([*TINY, "--epochs", "2", "--workdir", workdir, "--no-export"])
    assert "test chars" in capsys.readouterr().out
    assert first["task"] == "copy" and 0 <= first["test_character_accuracy"] <= 1
    results = commands.lte([*TINY, "--epochs", "3", "--workdir", workdir, "--resume"])
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert [e["epoch"] for e in record["epochs"]] == [0, 1, 2] and record["starts"] == [0, 2]
    assert all("level_length" in e for e in record["epochs"])
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["test_solved"] == pytest.approx(results["test_solved"])

    # The SavedModel answers text in a process that cannot import keras_relmem; its answer is what the
    # trained model writes, decoded here with the Python vocabulary.
    import keras

    model = keras.saving.load_model(tmp_path / "run" / "checkpoint.keras")
    programs = ["123", "907", "4$5"]
    ids = np.zeros((3, 3), "int32")
    for row, text in enumerate(programs):
        ids[row] = lte.VOCABULARY.encode(text, strict=False)
    expected = [lte.VOCABULARY.decode(row) for row in model.predict(ids, verbose=0).argmax(-1)]
    code = f"""
import json, sys
sys.modules["keras_relmem"] = None
import tensorflow as tf
serve = tf.saved_model.load(r"{results['export']}").signatures["answer"]
out = serve(program=tf.constant({programs!r}))
print(json.dumps([a.decode() for a in out["answer"].numpy()]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


def test_advance_if_mastered_moves_the_level_only_past_the_threshold():
    class Perfect:  # writes every answer right: the probe's accuracy is 1
        def __init__(self, task):
            self.task = task

        def predict(self, program, batch_size=None, verbose=0):
            answers = [lte.VOCABULARY.encode(lte.VOCABULARY.decode(p)) + [lte.EOS] for p in program]
            out = np.zeros((len(program), lte.answer_length(self.task, 3, 1), len(lte.VOCABULARY)), "float32")
            for row, answer in enumerate(answers):
                out[row, np.arange(len(answer)), answer] = 1.0
            return out

    level = lte.CurriculumLevel(3, 1, "combine", task="copy")
    assert lte_task.advance_if_mastered(Perfect("copy"), level, "copy", 0.9, seed=0) == 1.0
    assert level.level == (2, 1)
    baseline = lte.CurriculumLevel(3, 1, "baseline", task="copy")
    assert lte_task.advance_if_mastered(Perfect("copy"), baseline, "copy", 0.9, seed=0) is None


def test_help_runs_without_tensorflow_noise():
    done = subprocess.run([sys.executable, "tasks/train_lte.py", "--help"], capture_output=True, text=True,
                          timeout=120)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "--curriculum" in text and "(default: combine)" in text


def test_an_empty_or_unknown_program_is_refused_and_unknown_characters_reported(tmp_path):
    """The exported `answer` signature refuses an empty program as INVALID_ARGUMENT that says so (it reached the
    recurrent core as a sequence of no steps and failed with TensorFlow's internal "empty list" message)."""
    import keras
    import tensorflow as tf

    from keras_relmem.data import lte as lte_data
    from keras_relmem.export import export_lte
    from keras_relmem.models import ReadThenWrite

    model = ReadThenWrite(keras.layers.LSTM(8, return_sequences=True), len(lte_data.VOCABULARY),
                          lte_data.answer_length("copy", 3, 1), embedding_dim=4)
    path = export_lte(model, "copy", 3, 1, tmp_path, name="lte_copy")
    loaded = tf.saved_model.load(str(path))
    assert loaded.signatures["answer"](program=tf.constant(["123"]))["answer"].shape == (1,)
    for programs in ([""], ["123", ""]):
        try:
            loaded.signatures["answer"](program=tf.constant(programs))
        except tf.errors.InvalidArgumentError as error:
            assert "input program: an empty program; each needs at least one character" in str(error)
        else:
            raise AssertionError(f"{programs} was answered")
    try:
        loaded.signatures["answer"](program=tf.constant(["ü~"]))
    except tf.errors.InvalidArgumentError as error:
        assert "input program: none of its characters is in the vocabulary" in str(error)
    else:
        raise AssertionError("a program of unknown characters was answered")
    # characters outside the grammar are reported, in order (issue 104: "~~ ünïcode" was answered silently)
    out = loaded.signatures["answer"](program=tf.constant(["print((12+34)) ~~ ünïcode", "123"]))
    assert [text.decode() for text in out["unknown_characters"].numpy()] == ["~~üï", ""]
    try:
        loaded.signatures["serving_default"](program=tf.zeros((2, 0), tf.int32))
    except tf.errors.InvalidArgumentError as error:
        assert "input program: no characters; a program needs at least one" in str(error)
    else:
        raise AssertionError("a program of no characters was answered")


def test_an_export_with_warm_up_records_is_warmed_without_a_refusal(tmp_path, caplog):
    """Issue 104: the server logged three "refused generated inputs" lines at start-up for an LTE export that
    carries warm-up records (a second, in-graph warm-up on generated inputs); only the records are replayed."""
    import logging

    import keras

    from keras_relmem.data import lte as lte_data
    from keras_relmem.export import export_lte
    from keras_relmem.models import ReadThenWrite
    from keras_relmem.serving.servable import Servable

    model = ReadThenWrite(keras.layers.LSTM(8, return_sequences=True), len(lte_data.VOCABULARY),
                          lte_data.answer_length("program", 3, 2), embedding_dim=4)
    path = export_lte(model, "program", 3, 2, tmp_path, name="lte")
    with caplog.at_level(logging.INFO, logger="keras_relmem.serving"):
        assert Servable("lte", 1, path).warm_up() == 4  # two requests per signature
    assert "refused" not in caplog.text
