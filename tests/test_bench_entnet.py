"""bench/babi_entnet.py's plumbing (it trains through tf.data, so TensorFlow only)."""

import json
import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))


def test_babi_entnet_writes_each_task_at_once_and_a_rerun_skips_it(tmp_path, capsys):
    import babi_entnet

    argv = ["--tasks", "1", "--budget-minutes", "0.02", "--epochs", "1", "--no-jit-compile",
            "--results", str(tmp_path / "entnet.json"), "--workdir", str(tmp_path / "runs")]
    babi_entnet.main(argv)
    row = json.loads((tmp_path / "entnet.json").read_text())["tasks"]["1"]
    assert row["seed"] == 0 and row["epochs"] == 1 and 0 <= row["error"] <= 100 and "0" in row["runs"]
    babi_entnet.main(argv)
    assert "task  1 seed 0: done, skipped" in capsys.readouterr().out


def _results(path, runs, **recipe):
    """A results file as the bench writes it: task 13 with `runs` ({seed: (validation %, test %)})."""
    rows = {str(seed): {"error": test, "validation_error": val, "epochs": 5, "minutes": 10.0, "seed": seed}
            for seed, (val, test) in runs.items()}
    best = min(rows.values(), key=lambda r: r["validation_error"])
    arguments = {"budget_minutes": 10.0, "epochs": 200, "schedule": "step", "patience": 3,
                 "learning_rate": 0.01, "tied_keys": False, "seeds": sorted(runs), **recipe}
    path.write_text(json.dumps({"tasks": {"13": {**best, "runs": rows}}, "args": {"tasks/13": arguments}}))
    return str(path)


def test_babi_entnet_merge_keeps_the_best_seed_by_validation_and_refuses_another_recipe(tmp_path, capsys):
    import babi_entnet
    import pytest

    table = _results(tmp_path / "table.json", {0: (4.8, 5.6)})
    other = _results(tmp_path / "other.json", {0: (0.1, 0.1), 1: (0.8, 0.9)})
    babi_entnet.main(["--results", table, "--merge", other])
    merged = json.loads(pathlib.Path(table).read_text())
    row = merged["tasks"]["13"]
    # seed 0 was already there: kept (5.6%), not replaced by the other sitting's seed 0
    assert row["runs"]["0"]["error"] == 5.6 and set(row["runs"]) == {"0", "1"}
    assert (row["seed"], row["error"], row["validation_error"]) == (1, 0.9, 0.8)  # best by validation
    assert merged["args"]["tasks/13"]["seeds"] == [0, 1] and merged["args"]["tasks/13"]["merged_from"] == [other]
    assert "seed 0: already in" in capsys.readouterr().out
    tied = _results(tmp_path / "tied.json", {2: (0.0, 0.0)}, tied_keys=True)
    with pytest.raises(SystemExit, match="tied_keys=True, here False"):
        babi_entnet.main(["--results", table, "--merge", tied])
    assert json.loads(pathlib.Path(table).read_text()) == merged  # the table is untouched
