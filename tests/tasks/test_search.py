"""tuning/search.py: tiny searches, resuming, and KerasTuner's distributed mode."""

import inspect
import json
import os
import pathlib
import socket
import subprocess
import sys

import keras_tuner as kt
import pytest

from keras_relmem import recipes, tuning
from keras_relmem.commands import search
from keras_relmem.configs import BabiConfig
from keras_relmem.layers import HaltingPolicy
from keras_relmem.models import babi_qa

REPO = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")
TINY = ["--epochs", "1", "--max-steps", "2", "--batch-size", "16"]


def test_search_reports_best_and_exports(tmp_path, capsys):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = search.run(["--max-trials", "2", "--directory", str(tmp_path)] + TINY)
    # the best model's reload for its export says nothing of an optimizer state it does not need
    assert not [w for w in caught if "Skipping variable loading for optimizer" in str(w.message)]
    out = capsys.readouterr().out
    assert "Results summary" in out and "Best hyper-parameters" in out
    assert summary["completed_trials"] == 2
    assert set(summary["best_hyperparameters"]) == {"num_blocks", "embedding_dim", "learning_rate"}
    assert (pathlib.Path(summary["export"]) / "saved_model.pb").is_file()
    assert json.loads((tmp_path / "entnet_1" / "best.json").read_text())["completed_trials"] == 2


@pytest.mark.slow  # three searches; the flag plumbing is KerasTuner's own overwrite=False
def test_search_continues_without_overwrite(tmp_path):
    search.run(["--max-trials", "1", "--directory", str(tmp_path), "--no-export"] + TINY)
    again = search.run(["--max-trials", "2", "--directory", str(tmp_path), "--no-export"] + TINY)
    assert again["completed_trials"] == 2  # one reused, one new
    fresh = search.run(["--max-trials", "1", "--directory", str(tmp_path), "--no-export", "--overwrite"] + TINY)
    assert fresh["completed_trials"] == 1


@pytest.mark.parametrize(
    "model,expected",
    [
        ("entnet", {"num_blocks", "embedding_dim", "learning_rate"}),
        ("rmc", {"mem_slots", "num_heads", "head_size", "num_blocks", "gate_style", "learning_rate"}),
        (
            "memo",
            {"max_hops", "num_heads", "gamma", "alpha", "beta", "bias_init", "halting_learning_rate", "learning_rate"},
        ),
        ("lstm", {"embedding_dim", "learning_rate"}),
    ],
)
def test_search_spaces_start_at_the_papers_settings(model, expected):
    """Each space holds the model's published set-up, and starts there.

    The defaults a search starts from (and keeps for a hyper-parameter it does
    not tune) are the models' own defaults (their builders' signatures: EntNet
    20 blocks of d = 100, Henaff et al. §4.2; MEMO's appendix D, the halting
    policy's in its own signature) and the task recipe's learning rate
    (EntNet 0.01, Henaff et al. §4.2).
    """
    hp = kt.HyperParameters()
    kwargs, learning_rate = tuning.babi_search_space(hp, model)
    space = {p.name: p for p in hp.space}
    assert set(space) == expected
    defaults = babi_qa.model_defaults(model)
    if "halting" in kwargs:  # the policy searched through its own arguments, from its own defaults
        policy = kwargs.pop("halting").get_config()
        for name, parameter in inspect.signature(HaltingPolicy).parameters.items():
            if name in space and name != "max_hops":  # MEMO's, which MEMO gives its policy
                assert policy[name] == parameter.default, name
                assert parameter.default in space[name].values, name
    for name, value in kwargs.items():
        assert value == defaults[name], name
        assert defaults[name] in space[name].values, name
    assert learning_rate == recipes.default(BabiConfig, model).learning_rate
    assert learning_rate in space["learning_rate"].values


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        search.run(["--task", "lm", "--model", "memo", "--directory", str(tmp_path)])
    assert "--task lm takes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        search.run(["--tuner", "grid"])


@pytest.mark.slow  # three processes; tests/tasks/test_distribute.py covers multi-worker training by default
def test_distributed_chief_and_two_workers(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    command = [sys.executable, str(REPO / "tuning" / "search.py"), "--max-trials", "3",
               "--directory", str(tmp_path)] + TINY
    procs = {}
    for tuner_id in ("chief", "tuner0", "tuner1"):
        env = dict(os.environ, KERASTUNER_TUNER_ID=tuner_id, KERASTUNER_ORACLE_IP="127.0.0.1",
                   KERASTUNER_ORACLE_PORT=str(port))
        procs[tuner_id] = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    outputs = {k: p.communicate(timeout=600)[0] for k, p in procs.items()}
    for tuner_id, proc in procs.items():
        assert proc.returncode == 0, outputs[tuner_id][-3000:]
    trial_dirs = sorted(p for p in (tmp_path / "entnet_1").glob("trial_*"))
    statuses = [json.loads((d / "trial.json").read_text())["status"] for d in trial_dirs]
    assert statuses == ["COMPLETED"] * 3, statuses  # each trial ran once
    ids = [json.loads((d / "trial.json").read_text())["trial_id"] for d in trial_dirs]
    assert len(set(ids)) == 3
    assert "Best hyper-parameters" in outputs["chief"]
    # The workers ran the trials (each saved its tuner state); the chief only served the oracle.
    assert {p.name for p in (tmp_path / "entnet_1").glob("tuner*.json")} >= {"tuner0.json", "tuner1.json"}


def test_a_search_centred_on_a_recipe_starts_at_it_and_builds_as_the_task_script():
    """`relmem-search --recipe entnet_babi`: the learning rate, weight decay and embedding scale are searched
    around the recipe's (x1/3..x3 and x1/2..x2), starting at them; a trial at the defaults builds the task
    library's model for that recipe (tied keys: one block per entity word) with its optimizer and schedule."""
    from keras_relmem.data import babi as babi_data
    from keras_relmem.data import load_babi
    from keras_relmem.optimizers import TriangularCyclicRate

    recipe = recipes.get("entnet_babi")
    hp = kt.HyperParameters()
    settings = tuning.recipe_search_space(hp, recipe)
    space = {p.name: p for p in hp.space}
    assert {name: list(p.values) for name, p in space.items()} == {"learning_rate": [0.00333, 0.01, 0.03],
                                                                   "weight_decay": [0.01, 0.02, 0.04],
                                                                   "embedding_stddev": [0.15, 0.3, 0.6]}
    assert {k: getattr(settings, k) for k in space} == {k: getattr(recipe, k) for k in space}  # the recipe's
    assert settings.schedule == "cyclic" and settings.tied_keys  # the rest stays the recipe's
    data = load_babi(1, "en")
    model = tuning.BabiHyperModel("entnet", data, recipe=recipe).build(kt.HyperParameters())
    assert model.get_layer("memory").cell.num_blocks == len(babi_data.entity_ids(data.vocab))
    rate = model.optimizer._learning_rate  # the schedule itself (`learning_rate` is its value now)
    assert model.optimizer.weight_decay == 0.02 and isinstance(rate, TriangularCyclicRate)
    assert (rate.minimum, rate.maximum) == (2e-4, 0.01)
    with pytest.raises(ValueError, match="not a one-model-per-task bAbI config"):
        tuning.BabiHyperModel("rmc", data, recipe=recipe)


def test_a_search_on_a_recipe_runs(tmp_path, capsys):
    summary = search.run(["--max-trials", "1", "--directory", str(tmp_path), "--no-export", "--recipe", "entnet_babi",
                          *TINY])
    assert summary["completed_trials"] == 1
    assert set(summary["best_hyperparameters"]) == {"learning_rate", "weight_decay", "embedding_stddev"}
    with pytest.raises(SystemExit):
        search.run(["--model", "rmc", "--recipe", "entnet_babi", "--directory", str(tmp_path)])
    assert "not a one-model-per-task bAbI recipe of --model rmc" in capsys.readouterr().err
