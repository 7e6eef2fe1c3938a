"""The one run lifecycle (`keras_relmem.runs`): the workdir's lock and rule, the checks before anything is written,
one ending for every command. Each test names the case of the lifecycle issue it answers (1-10)."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

import keras_relmem as kr
from keras_relmem import configs, runs
from keras_relmem.commands import train as commands

REPO = pathlib.Path(__file__).resolve().parents[1]
needs_data = pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")
# a run of seconds: the MLP reference on a small Nth Farthest
TINY = configs.NthFarthestConfig(model="mlp", train_examples=64, test_examples=32, num_objects=4, num_features=4,
                                 epochs=1, batch_size=16, mlp_layers=1)
QUIET = dict(verbose=0, export=False)
TINY_FLAGS = ["--model", "mlp", "--train-examples", "64", "--test-examples", "32", "--num-objects", "4",
              "--num-features", "4", "--epochs", "1", "--batch-size", "16", "--mlp-layers", "1", "--verbose", "0"]


def _error_line(capsys, call):
    """Run a command that must stop with exit status 2 and one `error:` line; return that line."""
    with pytest.raises(SystemExit) as stopped:
        call()
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


# --- 1: two processes on one workdir ---------------------------------------------------------------------------

HOLD = ("import sys, time\nfrom keras_relmem import runs\nwith runs.workdir_lock(sys.argv[1]):\n"
        "    print('locked', flush=True)\n    time.sleep(120)\n")


def _holder(workdir):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(workdir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_process_on_a_workdir_is_refused_naming_the_holder_and_a_killed_holder_blocks_nothing(tmp_path,
                                                                                                       capsys):
    tmp_path.mkdir(exist_ok=True)
    holder = _holder(tmp_path)
    try:
        with pytest.raises(runs.RunRefused, match=rf"{tmp_path} is in use by another run \(pid {holder.pid}\)"):
            kr.train(TINY, workdir=tmp_path, **QUIET)
        line = _error_line(capsys, lambda: commands.nth_farthest([*TINY_FLAGS, "--workdir", str(tmp_path)]))
        assert f"in use by another run (pid {holder.pid})" in line
        assert not (tmp_path / "config.json").exists()  # refused before anything was written
    finally:
        holder.kill()  # SIGKILL: no clean-up; the lock file stays, the lock goes with the process
        holder.wait()
    assert (tmp_path / runs.LOCK_FILE).exists()
    assert kr.train(TINY, workdir=tmp_path, **QUIET)["test_accuracy"] is not None


# --- 2 and 7: one rule for rerunning a command -----------------------------------------------------------------


def test_the_same_config_reports_a_finished_run_again_without_training_or_exporting(tmp_path, capsys):
    first = kr.train(TINY, workdir=tmp_path, verbose=0)
    exports = sorted(str(p) for p in (tmp_path / "export").rglob("saved_model.pb"))
    metrics = (tmp_path / "metrics.json").read_text()
    assert len(exports) == 1
    capsys.readouterr()
    again = commands.nth_farthest([*TINY_FLAGS, "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "holds this run, finished" in out and f"Results in {tmp_path / 'results.json'}" in out
    assert "Exported" not in out
    assert again == first
    assert (tmp_path / "metrics.json").read_text() == metrics  # not trained again
    assert sorted(str(p) for p in (tmp_path / "export").rglob("saved_model.pb")) == exports  # no new version


def test_other_settings_are_refused_naming_them_and_overwrite_starts_over(tmp_path, capsys):
    kr.train(TINY, workdir=tmp_path, **QUIET)
    with pytest.raises(runs.RunRefused, match=r"learning_rate: 0.001 there, 0.01 here.*--overwrite"):
        kr.train(dataclasses.replace(TINY, learning_rate=0.01), workdir=tmp_path, **QUIET)
    line = _error_line(capsys, lambda: commands.nth_farthest([*TINY_FLAGS, "--workdir", str(tmp_path),
                                                              "--learning-rate", "0.01"]))
    assert "learning_rate: 0.001 there, 0.01 here" in line
    started = json.loads((tmp_path / "metrics.json").read_text())["starts"]
    other = kr.train(dataclasses.replace(TINY, learning_rate=0.01), workdir=tmp_path, overwrite=True, **QUIET)
    assert other["args"]["learning_rate"] == 0.01 and started == [0]
    record = json.loads((tmp_path / "config.json").read_text())
    assert record["config"]["learning_rate"] == 0.01 and record["finished"]


def test_more_epochs_continue_a_finished_run_and_the_record_says_what_changed_when(tmp_path, capsys):
    kr.train(TINY, workdir=tmp_path, **QUIET)
    # a finished run: a change that trains nothing more is refused, its record would lie (case 7)
    more = dataclasses.replace(TINY, epochs=2)
    result = kr.train(more, workdir=tmp_path, **QUIET)
    assert [e["epoch"] for e in result["curve"]] == [1, 2]
    assert result["changes"] == [{"after": 1, "fields": {"epochs": [1, 2]}}]
    record = json.loads((tmp_path / "config.json").read_text())
    assert record["config"]["epochs"] == 2 and record["changes"] == result["changes"]
    assert "continuing" in capsys.readouterr().out


@needs_data
def test_a_finished_joint_run_refuses_a_rate_that_would_train_nothing(tmp_path):
    from tests.test_train_api import TINY_JOINT

    config = dataclasses.replace(kr.recipes.get("memo_babi_joint"), **TINY_JOINT)
    first = kr.train(config, workdir=tmp_path, export=False, verbose=0)
    with pytest.raises(runs.RunRefused, match="finished run: a changed learning_rate would train nothing"):
        kr.train(dataclasses.replace(config, learning_rate=5e-4), workdir=tmp_path, export=False)
    assert json.loads((tmp_path / "results.json").read_text())["args"]["learning_rate"] == config.learning_rate
    # with more budget it trains on at the new rate, and the record says from which round
    longer = kr.train(dataclasses.replace(config, learning_rate=5e-4, budget_minutes=first["minutes"] + 0.02),
                      workdir=tmp_path, export=False, verbose=0)
    assert longer["changes"][0]["after"] == len(first["curve"])
    assert longer["changes"][0]["fields"]["learning_rate"] == [config.learning_rate, 5e-4]


# --- 3 and 4: no fresh weights passed off as a resumed run -----------------------------------------------------


def test_a_missing_or_truncated_checkpoint_is_refused_with_its_path(tmp_path, capsys):
    kr.train(TINY, workdir=tmp_path, **QUIET)
    checkpoint = tmp_path / "checkpoint.keras"
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    more = [*TINY_FLAGS, "--workdir", str(tmp_path), "--epochs", "2"]
    assert f"{checkpoint} is not a readable .keras file" in _error_line(capsys, lambda: commands.nth_farthest(more))
    checkpoint.unlink()
    line = _error_line(capsys, lambda: commands.nth_farthest([*more, "--resume"]))
    assert f"{checkpoint} (or model.keras) is missing" in line and "--overwrite" in line
    assert json.loads((tmp_path / "config.json").read_text())["config"]["epochs"] == 1  # nothing rewritten


def test_resume_needs_a_run_and_a_run_of_this_command(tmp_path, capsys):
    line = _error_line(capsys, lambda: commands.nth_farthest([*TINY_FLAGS, "--workdir", str(tmp_path / "none"),
                                                              "--resume"]))
    assert "holds no run to continue (--resume)" in line
    assert not (tmp_path / "none" / "config.json").exists()
    kr.train(TINY, workdir=tmp_path / "nth", **QUIET)
    with pytest.raises(SystemExit):
        commands.lm(["--resume", "--workdir", str(tmp_path / "nth")])
    assert "holds a NthFarthestConfig run, which relmem-train-lm does not train" in capsys.readouterr().err


# --- 5: --threads on every command -----------------------------------------------------------------------------

THREADS_RUNS = {
    "train_babi": ["--epochs", "1", "--max-steps", "1", "--max-eval-steps", "1", "--embedding-dim", "8",
                   "--num-blocks", "2", "--no-export"],
    "train_lm": ["--epochs", "1", "--max-steps", "1", "--max-eval-steps", "1", "--batch-size", "2", "--bptt", "5",
                 "--embedding-dim", "8", "--mem-slots", "1", "--head-size", "8", "--num-heads", "1", "--key-size",
                 "4", "--no-export"],
    "train_nth_farthest": [*TINY_FLAGS, "--no-export"],
    "train_lte": ["--epochs", "1", "--steps-per-epoch", "1", "--test-examples", "8", "--batch-size", "4",
                  "--head-size", "4", "--num-heads", "1", "--mem-slots", "1", "--mlp-units", "8", "--no-export"],
    "train_memo": ["--task", "shortest_path", "--setting", "10/2/2", "--model", "emn", "--graphs", "16", "--test",
                   "16", "--budget-minutes", "0.001"],
}


@needs_data
@pytest.mark.parametrize("command", sorted(THREADS_RUNS))
def test_threads_works_on_every_command(tmp_path, command):
    argv = [*THREADS_RUNS[command], "--threads", "1", "--workdir", str(tmp_path / "run"), "--verbose", "0"]
    done = subprocess.run([sys.executable, "-c", f"import sys; from keras_relmem import cli; sys.exit(cli.{command}())",
                           *argv], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Results written to" in done.stdout and "Traceback" not in done.stderr


# --- 6: answers, not tracebacks --------------------------------------------------------------------------------


@needs_data
def test_bad_paths_are_one_error_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    quick = ["--epochs", "1", "--max-steps", "1", "--verbose", "0"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    line = _error_line(capsys, lambda: commands.babi([*quick, "--workdir", str(afile)]))
    assert f"workdir {afile}: {afile} is a file, not a folder" in line
    # root writes anywhere it has permission bits for, so an unwritable folder is one in /proc
    line = _error_line(capsys, lambda: commands.babi([*quick, "--workdir", "/proc/keras_relmem_run"]))
    assert "workdir /proc/keras_relmem_run is not writable" in line
    line = _error_line(capsys, lambda: commands.babi([*quick, "--workdir", str(tmp_path / "w"), "--export-dir",
                                                      "/proc/keras_relmem_export"]))
    assert "export folder /proc/keras_relmem_export is not writable" in line
    line = _error_line(capsys, lambda: commands.babi([*quick, "--workdir", str(tmp_path / "w"), "--logdir",
                                                      str(afile / "logs")]))
    assert f"TensorBoard log folder {afile / 'logs'}: {afile} is a file, not a folder" in line
    assert not (tmp_path / "w").exists()  # checked before anything was written
    monkeypatch.setenv("KERAS_RELMEM_DATA", str(afile))
    line = _error_line(capsys, lambda: commands.babi([*quick, "--workdir", str(tmp_path / "w")]))
    assert f"{afile} (data_dir, or $KERAS_RELMEM_DATA) is neither a folder nor a bAbI .tar.gz archive" in line
    assert not (tmp_path / "w" / "config.json").exists()


def test_a_missing_warm_start_file_is_refused_before_training(tmp_path, capsys):
    argv = ["--task", "pai", "--warm-start", str(tmp_path / "nope.keras"), "--workdir", str(tmp_path / "w")]
    line = _error_line(capsys, lambda: commands.memo(argv))
    assert f"warm_start {tmp_path / 'nope.keras'}: no such file" in line
    assert not (tmp_path / "w" / "config.json").exists()


def test_an_export_folder_for_a_run_that_exports_nothing_is_refused(tmp_path, capsys):
    # relmem-train-lm offers --export-dir for its epoch recipes; a recipe in rounds exports nothing
    line = _error_line(capsys, lambda: commands.lm(["--recipe", "lm_ptb_rmc_budget", "--workdir", str(tmp_path / "w"),
                                                    "--export-dir", str(tmp_path / "e")]))
    assert f"export_dir {tmp_path / 'e'}: LMRoundsConfig exports nothing" in line
    assert not (tmp_path / "w").exists()


# --- 8: every command ends alike -------------------------------------------------------------------------------


def test_relmem_train_memo_ends_with_its_table_and_offers_no_export(tmp_path, capsys):
    commands.memo([*THREADS_RUNS["train_memo"], "--workdir", str(tmp_path), "--verbose", "0"])
    out = capsys.readouterr().out
    assert "EMN on shortest paths 10/2/2" in out and "first_node" in out and "whole path" in out
    assert f"Results written to {tmp_path / 'results.json'}" in out and "{" not in out.split("EMN on")[-1]
    with pytest.raises(SystemExit):
        commands.memo(["--help"])
    assert "--export-dir" not in capsys.readouterr().out


# --- 9: the backend --------------------------------------------------------------------------------------------


def test_training_on_another_backend_stops_at_once_naming_keras_backend(tmp_path):
    started = time.time()
    done = subprocess.run([sys.executable, "-c", "import sys; from keras_relmem import cli; sys.exit(cli.train_babi())",
                           "--workdir", str(tmp_path / "w")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KERAS_BACKEND": "jax"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "KERAS_BACKEND=jax: training, evaluation and export run on the tensorflow backend only" in done.stderr
    assert time.time() - started < 120 and not (tmp_path / "w").exists()


# --- 10: a setting of another model ----------------------------------------------------------------------------


def test_a_setting_of_another_model_is_refused_naming_it(capsys):
    with pytest.raises(SystemExit):
        commands.parse_babi(["--model", "entnet", "--max-hops", "3"])
    assert "max_hops is a MEMO setting; model is 'entnet'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        commands.parse_babi(["--model", "memo", "--task", "all", "--joint", "--first-tasks", "5", "--tasks", "1", "2"])
    assert "first_tasks [5]: none of them is trained (tasks [1, 2])" in capsys.readouterr().err


def test_runs_names_no_task_and_the_package_has_no_import_cycle():
    import ast

    text = (REPO / "keras_relmem" / "runs.py").read_text()
    assert "import keras_relmem.tasks" not in text and "from keras_relmem.tasks" not in text
    assert not [cls.__name__ for cls in configs.CONFIGS if cls.__name__ in text]
    package = REPO / "keras_relmem"
    modules = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
               for p in package.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("keras_relmem"):
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("keras_relmem")}
        # a package's own __init__ importing its submodules is how a package is made, not a cycle
        graph[name] = {d for d in deps if d in modules and d != name and not name.startswith(d + ".")}
    cycles, state = [], {}

    def visit(node, path):  # depth first; a dependency still on the path closes a cycle
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = "done"

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles, cycles[:3]


def test_the_joint_runs_memo_settings_carry_memos_argument_names_and_the_old_flags_name_the_new(capsys):
    import inspect

    from keras_relmem.layers import MEMO

    arguments = set(inspect.signature(MEMO).parameters)
    assert {"share_hop_weights", "attention_dropout", "answer_dropout"} <= arguments
    fields = {f.name for f in configs.BabiJointConfig.settings()}
    assert {"share_hop_weights", "time_encoding", "attention_dropout", "answer_dropout"} <= fields
    assert not {"per_hop_weights", "no_time", "dropout"} & fields
    for old, new in (("--per-hop-weights", "--no-share-hop-weights"), ("--no-time", "--no-time-encoding"),
                     ("--dropout", "--attention-dropout and --answer-dropout")):
        with pytest.raises(SystemExit):
            commands.parse_babi(["--model", "memo", "--task", "all", "--joint", old, *(["0.2"] * (old == "--dropout"))])
        assert f"{old} is now {new}" in capsys.readouterr().err
    # a workdir recorded by 1.1 still reads: its old fields become the new ones
    recorded = {**configs.BabiJointConfig().to_dict(), "per_hop_weights": True, "no_time": True, "dropout": 0.2}
    for name in ("share_hop_weights", "time_encoding", "attention_dropout", "answer_dropout"):
        recorded.pop(name)
    config = configs.BabiJointConfig.from_dict(recorded)
    assert (config.share_hop_weights, config.time_encoding, config.attention_dropout, config.answer_dropout) == \
        (False, False, 0.2, 0.2)


def test_a_run_that_fails_before_its_first_round_leaves_no_record(tmp_path, monkeypatch):
    """Bad data found while loading (after the checks) must not leave a record that refuses the next run."""
    def broken(config, run):
        raise ValueError("a data file turned out unreadable")

    task = runs.TASKS[configs.NthFarthestConfig]
    monkeypatch.setitem(runs.TASKS, configs.NthFarthestConfig, dataclasses.replace(task, train=broken))
    with pytest.raises(ValueError, match="unreadable"):
        kr.train(TINY, workdir=tmp_path / "w", **QUIET)
    assert not (tmp_path / "w").exists()
    monkeypatch.setitem(runs.TASKS, configs.NthFarthestConfig, task)
    assert kr.train(dataclasses.replace(TINY, learning_rate=0.01), workdir=tmp_path / "w", **QUIET)
