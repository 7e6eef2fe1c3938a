"""relmem-train-babi (tasks/train_babi.py) end to end on tiny settings: the command, its flags and its errors."""

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from keras_relmem import recipes
from keras_relmem.commands import train as commands
from keras_relmem.tasks import babi as babi_task

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tasks" / "train_babi.py"

pytestmark = pytest.mark.skipif(
    not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA (../shared/data)"
)

TINY = ["--epochs", "2", "--max-steps", "3", "--batch-size", "16", "--verbose", "0"]


# EntNet and MEMO by default; the RMC and LSTM runs (the same script and export) with `-m slow`.
@pytest.mark.parametrize("model", ["entnet", pytest.param("rmc", marks=pytest.mark.slow),
                                   pytest.param("lstm", marks=pytest.mark.slow), "memo"])
def test_tiny_run_writes_table_json_and_a_servable_export(model, tmp_path, capsys):
    tied = ["--tied-keys"] if model == "entnet" else []  # the authors' -tied 1 through to the export
    summary = commands.babi(
        ["--model", model, "--task", "1", "--workdir", str(tmp_path), "--embedding-dim", "16"] + TINY + tied
    )
    out = capsys.readouterr().out
    assert "solved (error < 5%)" in out and "single-supporting-fact" in out
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["tasks"]["1"]["questions"] == 1000
    assert written == json.loads(json.dumps(summary))
    metrics = json.loads((tmp_path / "qa1" / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [0, 1]
    export_dir = pathlib.Path(summary["exports"]["qa1"])
    assert export_dir.parent.name == f"babi_{model}_qa1" and export_dir.name == "1"
    assert (export_dir / "assets" / "vocab.txt").is_file()
    # The run says where it exported and the command that serves it.
    assert f"Exported the SavedModel to {export_dir}" in out
    assert f"--model_name=babi_{model}_qa1 --model_base_path={export_dir.parent.resolve()}" in out

    # The SavedModel answers in a fresh process that cannot import keras_relmem,
    # with the predictions of the checkpointed model.
    import keras

    from keras_relmem.data import load_babi

    data = load_babi(1, "en")
    arrays = data.arrays("test")
    np.savez(tmp_path / "inputs.npz", story=arrays["story"][:8], query=arrays["query"][:8])
    code = f"""
import sys
sys.modules["keras_relmem"] = None
import numpy as np, tensorflow as tf
inputs = np.load(r"{tmp_path / 'inputs.npz'}")
serve = tf.saved_model.load(r"{export_dir}").signatures["serving_default"]
out = serve(story=tf.constant(inputs["story"]), query=tf.constant(inputs["query"]))
np.save(r"{tmp_path / 'probs.npy'}", out["probabilities"].numpy())
print(out["top_answers"].numpy()[0, 0].decode())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] in data.answer_vocab.tokens
    # The checkpoint loads in a fresh process after `import keras_relmem` alone (its optimizer and
    # schedule, e.g. EntNet's ScopedAdam, are registered by the package, not by keras_relmem.training).
    code = f"""
import keras, keras_relmem
model = keras.saving.load_model(r"{tmp_path / 'qa1' / 'checkpoint.keras'}")
print(type(model.optimizer).__name__)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    if model == "entnet":
        assert result.stdout.split()[-1] == "ScopedAdam"
    model_back = keras.saving.load_model(tmp_path / "qa1" / "checkpoint.keras")
    expected = keras.ops.softmax(
        model_back.predict({"story": arrays["story"][:8], "query": arrays["query"][:8]}, verbose=0)
    )
    np.testing.assert_allclose(np.load(tmp_path / "probs.npy"), expected, atol=1e-5)


@pytest.mark.parametrize("schedule", ["cyclic", "plateau"])
def test_schedules_set_the_rate_each_epoch_records(schedule, tmp_path):
    """--schedule cyclic: the rate after epoch e is the triangle's at step 3(e + 1) (3 steps an epoch).
    --weight-decay reaches the optimizer, and the checkpoint keeps it for a resumed run."""
    argv = ["--task", "1", "--workdir", str(tmp_path), "--embedding-dim", "8", "--num-blocks", "2",
            "--no-export", "--schedule", schedule, "--half-cycle-epochs", "1", "--epochs", "3",
            "--max-steps", "3", "--batch-size", "16", "--verbose", "0", "--weight-decay", "0.02"]
    import keras

    commands.babi(argv)
    rates = [e["learning_rate"] for e in json.loads((tmp_path / "qa1" / "metrics.json").read_text())["epochs"]]
    if schedule == "cyclic":
        # Smith 2017 §3.1 with base 2e-4, max 1e-2 and a half cycle of one epoch = 3 steps (--max-steps 3),
        # read at each epoch's end; Keras counts one optimizer iteration more per epoch than it has batches
        # on a dataset of unknown length, so the epoch's iterations come from the saved optimizer.
        optimizer = keras.saving.load_model(tmp_path / "qa1" / "checkpoint.keras").optimizer
        assert optimizer.weight_decay == 0.02
        per_epoch = int(optimizer.iterations) // 3
        t = per_epoch * np.arange(1, 4)
        cycle = np.floor(1 + t / 6)
        expected = 2e-4 + (1e-2 - 2e-4) * np.maximum(0, 1 - np.abs(t / 3 - 2 * cycle + 1))
        np.testing.assert_allclose(rates, expected, rtol=1e-5)
        assert len(set(np.round(rates, 6))) > 1  # the rate moves
    else:  # three epochs are too few for a plateau: the starting rate throughout
        np.testing.assert_allclose(rates, [0.01] * 3, rtol=1e-6)


@pytest.mark.slow  # trains on all 20 tasks
def test_joint_training_reports_every_task(tmp_path, capsys):
    summary = commands.babi(
        [
            "--task",
            "all",
            "--joint",
            "--workdir",
            str(tmp_path),
            "--embedding-dim",
            "8",
            "--num-blocks",
            "2",
            "--no-export",
        ]
        + TINY
    )
    assert sorted(int(t) for t in summary["tasks"]) == list(range(1, 21))
    assert "/20" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--task", "21"], "BabiConfig.task: expected 1..20 or 'all'; got 21"),
        (["--task", "3", "--data", "en-10k"], "qa3_three-supporting-facts_train.txt"),
        (["--model", "transformer"], "--model: expected one of 'entnet', 'lstm', 'memo', 'rmc'; got 'transformer'"),
        (["--epochs", "0"], "BabiConfig.epochs: expected an integer >= 1; got 0"),
        (["--epoch", "3"], "unrecognized arguments: --epoch"),
        (["--model", "rmc", "--tied-keys"], "tied_keys is an EntNet setting; model is 'rmc'"),
        (["--schedule", "plateau", "--validation-split", "0"], "schedule 'plateau' watches the validation loss"),
        (["--schedule", "cyclic", "--min-learning-rate", "0.1"], "need min <= max"),
        (["--weight-decay", "-0.1"], "BabiConfig.weight_decay: expected a number >= 0; got -0.1"),
        (["--model", "lstm", "--embedding-stddev", "0.3"], "embedding_stddev is an EntNet setting; model is 'lstm'"),
        (["--embedding-stddev", "0"], "BabiConfig.embedding_stddev: expected a number > 0 and finite; got 0.0"),
        (["--recipe", "nonesuch"], "no recipe 'nonesuch'"),
        (["--recipe", "lm_ptb_rmc"], "--recipe lm_ptb_rmc is a recipe of relmem-train-lm"),
        (["--model", "rmc", "--recipe", "entnet_babi"], "--recipe entnet_babi is for --model entnet; got --model rmc"),
        (["--model", "rmc", "--starts", "3"], "--starts: not a setting of BabiConfig (recipe rmc_babi)"),
    ],
)
def test_impossible_combinations_fail_before_training(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        commands.babi(argv + ["--workdir", str(tmp_path)])
    assert info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "qa1").exists()


def test_data_dir_without_babi_files(tmp_path, capsys):
    with pytest.raises(SystemExit):
        commands.babi(["--data-dir", str(tmp_path), "--workdir", str(tmp_path / "w")])
    assert "No bAbI files" in capsys.readouterr().err


def test_help_lists_the_flags():
    result = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    for flag in ("--model", "--joint", "--strategy", "--resume", "--logdir", "--seed", "--export-dir"):
        assert flag in result.stdout


def test_killed_run_resumes_from_last_completed_epoch(tmp_path):
    """SIGKILL mid-training, rerun the same command: it continues and ends at the same epoch count."""
    workdir = tmp_path / "run"
    command = [
        sys.executable, str(SCRIPT), "--task", "1", "--epochs", "6", "--embedding-dim", "16",
        "--batch-size", "8", "--workdir", str(workdir), "--no-export", "--verbose", "0",
    ]
    metrics_file = workdir / "qa1" / "metrics.json"
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline:
        if metrics_file.is_file() and len(json.loads(metrics_file.read_text())["epochs"]) >= 2:
            break
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = len(json.loads(metrics_file.read_text())["epochs"])
    assert 2 <= done_before < 6, "the run must be killed mid-training"

    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    record = json.loads(metrics_file.read_text())
    assert [e["epoch"] for e in record["epochs"]] == list(range(6))
    # Metrics are written just before the epoch's backup, so a kill between the
    # two redoes that one epoch; the run never starts over from 0.
    assert record["starts"][0] == 0 and record["starts"][-1] >= max(1, done_before - 1)
    assert json.loads((workdir / "results.json").read_text())["tasks"]["1"]["questions"] == 1000


def test_quick_default_survives_run_control_flags():
    quick, options = commands.parse_babi(["--verbose", "0", "--workdir", "x", "--seed", "3"])
    assert quick.recipe == "quickstart" and quick.epochs == 20 and quick.tasks == [1] and quick.seed == 3
    assert (options["workdir"], options["verbose"]) == ("x", 0)
    recipe, _ = commands.parse_babi(["--task", "2"])
    assert recipe.recipe == "entnet_babi" and recipe.epochs == 200 and recipe.data == "en-10k"
    assert commands.parse_babi(["--model", "rmc"])[0].epochs == 100


def test_entnet_trains_the_best_measured_recipe_and_the_papers_is_one_flag_away():
    def recipe(*argv):
        config, _ = commands.parse_babi(list(argv))
        return config.schedule, config.tied_keys, config.weight_decay, config.decay_scope, config.embedding_stddev

    assert recipe() == ("cyclic", True, 0.02, "matrices", 0.3)  # the quick start too
    assert recipe("--task", "2", "--data", "en-10k") == ("cyclic", True, 0.02, "matrices", 0.3)
    assert recipe("--recipe", "entnet_babi_paper") == ("step", False, 0.0, "all", 0.1)
    assert recipe("--recipe", "entnet_babi_paper", "--tied-keys") == ("step", True, 0.0, "all", 0.1)
    assert recipe("--no-tied-keys", "--weight-decay", "0", "--embedding-stddev", "0.1") == (
        "cyclic", False, 0.0, "matrices", 0.1)
    assert recipe("--model", "rmc") == ("step", False, 0.0, "all", None)  # other models keep their recipe
    assert recipe("--recipe", "rmc_babi")[0] == "step" and commands.parse_babi(["--recipe", "rmc_babi"])[0].model == \
        "rmc"  # a recipe names its model

    # the scale reaches the embedding (and so the tied keys): N(0, 0.3) against the paper's N(0, 0.1)
    import keras

    from keras_relmem.data import load_babi

    data = load_babi(1, "en")
    for name, stddev in (("entnet_babi", 0.3), ("entnet_babi_paper", 0.1)):
        model = babi_task.build_model(dataclasses.replace(recipes.get(name), embedding_dim=8), data)
        init = keras.initializers.get(model.get_config()["embeddings_initializer"])
        assert init.get_config()["stddev"] == stddev


def test_memo_with_joint_trains_the_joint_recipe():
    user = ["--model", "memo", "--task", "all", "--joint", "--data", "en-10k"]
    config, options = commands.parse_babi(user)
    assert config == recipes.get("memo_babi_joint") and config.recipe == "memo_babi_joint"
    assert commands.parse_babi([*user, "--recipe", "memo_babi_joint_paper"])[0].gamma == 0.9
    assert commands.parse_babi(["--recipe", "memo_babi_joint"])[0].model == "memo"  # the recipe names its model
    assert type(commands.parse_babi(["--model", "memo", "--task", "3"])[0]).__name__ == "BabiConfig"
    assert type(commands.parse_babi(["--model", "entnet", "--task", "all", "--joint"])[0]).__name__ == "BabiConfig"
    # a part of the joint recipe taken back: no curriculum, the default embedding initialiser
    config, _ = commands.parse_babi(["--recipe", "memo_babi_joint", "--first-tasks", "--embedding-stddev", "none"])
    assert (config.first_tasks, config.embedding_stddev) == ((), None)


def test_list_recipes_gives_a_command_for_each(capsys):
    with pytest.raises(SystemExit) as stop:
        commands.babi(["--list-recipes"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    runs = [line.split("run:", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("run:")]
    assert len(runs) == len(recipes.names()) and all(run.startswith("relmem-") for run in runs)
    babi, others = out.split("Recipes of the other commands")
    assert "quickstart  [entnet; quick start: the bare command]" in babi and "run:  relmem-train-babi\n" in babi
    assert "entnet_babi  [entnet; default of --model entnet]" in babi and "memo_babi_joint" in babi
    assert "lm_ptb_rmc" in others and "lm_ptb_rmc" not in babi
