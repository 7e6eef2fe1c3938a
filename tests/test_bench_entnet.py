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
