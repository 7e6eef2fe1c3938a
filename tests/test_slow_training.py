"""Long training runs: `python -m pytest -m slow` (skipped by the default command)."""

import os

import pytest

from keras_relmem.commands import train as commands

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA"),
]


def test_quick_default_reaches_95_percent_on_task_1(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = commands.babi([])  # exactly `relmem-train-babi`
    assert summary["tasks"]["1"]["accuracy"] >= 0.95
    assert sum(summary["train_seconds"].values()) < 300
