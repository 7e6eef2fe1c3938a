"""The README as a newcomer reads it: short, its snippets run, its names line up, no binaries in git."""

import pathlib
import re
import subprocess

import keras
import numpy as np
import pytest

from keras_relmem import export

REPO = pathlib.Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
MODEL_FILES = re.compile(r"\.(keras|h5|hdf5|pb|ckpt|weights\.[\w.]+)$|(^|/)checkpoint(s)?(/|$)|\.data-\d+-of-\d+$")
# The one exception: the small models saved by 1.1 that the compatibility tests load (tests/layers/data,
# written by make_memo_1_1.py), each a few KB.
OLD_RELEASE_FIXTURES = re.compile(r"^tests/layers/data/memo_\w+_1_1\.keras$")


def test_the_readme_is_short_and_opens_with_its_results():
    lines = README.splitlines()
    assert len(lines) <= 200
    table = next(i for i, line in enumerate(lines) if line.startswith("| claim | paper | ours |"))
    assert table < 80


def test_the_results_page_holds_the_headlines_and_each_study_page_its_runs():
    from bench.report import catalogue, pages

    results = pages.results_page()
    assert len(results.splitlines()) <= 500
    for study in catalogue.studies():
        own = pages.study_page(study)
        for entry in study.entries:
            assert f"### {entry.title}" in own
            headline = pages.on_headline_page(entry)
            assert (f"### {entry.title}" in results) == headline == (pages.mark(entry) == "headline")


def test_the_python_snippets_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    snippets = re.findall(r"```python\n(.*?)```", README, re.S)
    # a recipe's training (hours) runs on a tiny budget in tests/test_train_api.py
    snippets = [s for s in snippets if "kr.train(" not in s]
    assert snippets
    namespace = {}
    for snippet in snippets:
        exec(compile(snippet, "README.md", "exec"), namespace)
    # "Each one trains with fit, saves and loads back": the RMC model of the snippet, for one.
    rmc = namespace["rmc"]
    rmc.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = np.random.default_rng(0).normal(size=(8, 5, 16)).astype("float32"), np.arange(8) % 10
    rmc.fit(x, y, epochs=1, verbose=0)
    rmc.save(tmp_path / "rmc.keras")
    back = keras.saving.load_model(tmp_path / "rmc.keras")
    np.testing.assert_allclose(back.predict(x, verbose=0), rmc.predict(x, verbose=0), atol=1e-5)


def test_the_layers_guide_snippets_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for snippet in re.findall(r"```python\n(.*?)```", (REPO / "docs" / "layers.md").read_text(), re.S):
        exec(compile(snippet, "docs/layers.md", "exec"), namespace)
    assert set(namespace["out"]) == {"logits", "hops"}  # MEMO's return_hops=True, as its comment says


def test_names_line_up_from_the_quick_start_to_the_client():
    name = export.babi_model_name("entnet", 1)
    assert f"--model_name={name}" in README  # the serve command the quick start prints
    serving = (REPO / "docs" / "serving.md").read_text()
    served = set(re.findall(r"--model[_ ]name[= ](\w+)|--model (\w+)|/v1/models/(\w+)", serving))
    # the language model's export: the name relmem-train-lm gives it with its default recipe (tasks/lm.py)
    from keras_relmem import configs, recipes

    lm = recipes.default(configs.LMConfig, "rmc")
    lm_name = f"lm_{lm.model}_{lm.corpus}"
    names = {n for group in served for n in group if n}
    assert names == {name, lm_name}, f"docs/serving.md names {names}, the quick start exports {name}, the LM {lm_name}"


def test_no_model_or_checkpoint_file_is_tracked():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    found = [path for path in tracked.splitlines() if MODEL_FILES.search(path)]
    fixtures = [path for path in found if OLD_RELEASE_FIXTURES.search(path)]
    assert all((REPO / path).stat().st_size < 16_000 for path in fixtures), fixtures
    found = [path for path in found if path not in fixtures]
    assert not found, f"model or checkpoint files are tracked (keep them under runs/): {found[:10]}"


def test_a_relative_data_folder_as_the_readme_exports_it_holds_in_every_test():
    # README: `export KERAS_RELMEM_DATA=../shared/data`; tests that change directory must still find it
    import os

    if not os.environ.get("KERAS_RELMEM_DATA"):
        pytest.skip("needs KERAS_RELMEM_DATA")
    assert os.path.isabs(os.environ["KERAS_RELMEM_DATA"])


@pytest.mark.parametrize("module", ["search", "explain"])
def test_every_commands_help_shows_its_defaults(module):
    import importlib

    parser = importlib.import_module(f"keras_relmem.commands.{module}").build_parser()
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if action.default not in (None, False, "==SUPPRESS==") and action.option_strings:
            assert f"{action.option_strings[-1]}" in text
    assert text.count("default") >= sum(a.default not in (None, False, "==SUPPRESS==") for a in parser._actions) - 1


@pytest.mark.parametrize("command", ["babi", "lm", "nth_farthest", "lte"])
def test_every_training_commands_help_shows_each_fields_flag_and_default(command, capsys):
    from keras_relmem import configs
    from keras_relmem.commands import train as commands

    with pytest.raises(SystemExit):
        getattr(commands, command)(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    classes = {"babi": [configs.BabiConfig, configs.BabiJointConfig], "lm": [configs.LMConfig],
               "nth_farthest": [configs.NthFarthestConfig], "lte": [configs.LTEConfig]}[command]
    fields = {}
    for cls in classes:  # a field the classes share is one flag, with the first class's help
        fields.update({f.name: f for f in cls.settings() if f.name not in fields})
    for name, field in fields.items():
        flag = "--" + name.replace("_", "-")
        assert flag in text, flag
        # the field's help and its default follow the flag
        assert " ".join(field.metadata["help"].split())[:30] in text, name
    assert text.count("(default: ") >= len(fields)


def test_max_steps_caps_training_only(tmp_path, monkeypatch):
    from keras_relmem import training
    from keras_relmem.commands import train as commands

    seen = {}

    def run_fit(model, train, validation, *args, **kwargs):
        seen["train"], seen["validation"] = len(list(train)), len(list(validation))
        return {"epochs": []}

    monkeypatch.setattr(training, "run_fit", run_fit)
    common = ["--model", "mlp", "--num-objects", "4", "--num-features", "4", "--epochs", "1",
              "--train-examples", "64", "--test-examples", "40", "--batch-size", "8", "--max-steps", "1",
              "--workdir", str(tmp_path), "--no-export", "--verbose", "0"]
    commands.nth_farthest(common)
    assert seen == {"train": 1, "validation": 5}  # every one of the 40 test examples, in batches of 8
    commands.nth_farthest(common + ["--max-eval-steps", "2", "--overwrite"])
    assert seen == {"train": 1, "validation": 2}


def test_a_command_whose_extra_is_missing_names_the_extra(monkeypatch):
    import importlib

    from keras_relmem import cli

    def missing(name):
        raise ModuleNotFoundError("No module named 'grpc_health'", name="grpc_health")

    monkeypatch.setattr(cli, "_start_tensorflow", lambda: None)
    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(SystemExit, match=r'needs the \[serving\] extra .*pip install "keras-relmem\[serving\]"'):
        cli.serve()


def test_the_extras_hold_what_their_commands_need():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(req.startswith("keras-tuner[bayesian]") for req in extras["tuning"])  # --tuner bayesian: sklearn
    assert any(req.startswith("tensorflow-serving-api") for req in project["dependencies"])  # warm-up records
    assert project["requires-python"] == ">=3.11,<3.14"  # tomllib; CI runs 3.11 and 3.13


def test_tensorflows_start_up_noise_is_dropped_and_every_other_line_kept():
    import sys

    code = """
import os
from keras_relmem._startup import quiet_tensorflow
with quiet_tensorflow():
    os.write(2, b"I0000 00:00:1 1 cudart_stub.cc:31] Could not find cuda drivers on your machine.\\n")
    os.write(2, b"E0000 00:00:1 1 cuda_platform.cc:52] failed call to cuInit: INTERNAL\\n")
    os.write(2, b"a real error line\\n")
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "a real error line" in result.stderr
    assert "cuda" not in result.stderr.lower()


def test_onednns_dtype_note_is_drawn_out_at_start_up_and_not_printed_mid_run():
    """The quick start printed `E0000 ... util.cc:131] oneDNN supports DT_BOOL only on platforms with
    AVX-512` at its first training step (issue 104): TensorFlow prints it once per process, at the first
    graph op oneDNN cannot take, so a command's start-up draws it out inside the filter."""
    import sys

    code = """
import sys
from keras_relmem import cli
cli._start_tensorflow()
print("started", file=sys.stderr, flush=True)
import tensorflow as tf
tf.function(lambda a: tf.transpose(tf.cast(a, tf.int32)) > 0)(tf.ones((3, 3)))
tf.function(lambda a: tf.transpose(a > 0))(tf.ones((3, 3)))
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "only on platforms with AVX-512" not in result.stderr.split("started", 1)[1]
    assert "E0000" not in result.stderr


def test_a_distributed_command_runs_no_op_before_its_strategy(monkeypatch):
    """MultiWorkerMirroredStrategy must be configured before any op runs: the start-up draw-out of oneDNN's
    note is skipped for such runs."""
    from keras_relmem import cli

    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    assert not cli._distributed(["--task", "1"]) and not cli._distributed(["--strategy", "mirrored"])
    assert cli._distributed(["--strategy", "multiworker"]) and cli._distributed(["--strategy=tpu"])
    monkeypatch.setenv("TF_CONFIG", "{}")
    assert cli._distributed([])


def test_the_readmes_test_line_fails_when_any_backends_tests_fail():
    line = next(line for line in README.splitlines() if line.startswith("python -m pytest"))
    assert line.count("python -m pytest") == 3 and ";" not in line and line.count(" && ") == 2


def test_the_library_import_draws_out_cuinit_inside_the_start_up_filter():
    """`import keras_relmem` then training (the README's snippet) printed "failed call to cuInit" at the first
    device query on a machine without a GPU; the import makes that query inside the filter, and leaves the
    thread pools open."""
    import subprocess
    import sys

    code = ("import keras_relmem, tensorflow as tf; tf.config.threading.set_inter_op_parallelism_threads(1); "
            "tf.config.list_physical_devices(); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "cuInit" not in done.stderr and "Could not find cuda drivers" not in done.stderr
