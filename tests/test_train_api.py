"""`kr.train(config, workdir=...)`: the Python API trains what the command trains, runs remember their config,
and the package's structure keeps the command layer on top."""

import ast
import dataclasses
import json
import os
import pathlib
import re

import pytest

import keras_relmem as kr
from keras_relmem import configs, recipes, runs
from keras_relmem.commands import train as commands

REPO = pathlib.Path(__file__).resolve().parents[1]
needs_data = pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")
# MEMO's joint recipe made tiny: one task of the 1k set, a small model, seconds of training
TINY_JOINT = dict(data="en", tasks=(1,), embedding_dim=8, num_heads=2, key_size=4, max_hops=2, batch_size=16,
                  steps_per_round=2, starts=1, budget_minutes=0.02, test_limit=20, halting_warmup_rounds=0)


@needs_data
def test_kr_train_gives_what_the_command_gives(tmp_path):
    """The issue's target: the Python API and `relmem-train-babi --recipe entnet_babi --task 1 --data en
    --epochs 2 --seed 0` give the same test error and the same per-epoch losses."""
    config = dataclasses.replace(kr.recipes.get("entnet_babi"), task=1, data="en", epochs=2, seed=0)
    ours = kr.train(config, workdir=tmp_path / "api", export=False, verbose=0)
    theirs = commands.babi(["--recipe", "entnet_babi", "--task", "1", "--data", "en", "--epochs", "2", "--seed", "0",
                            "--workdir", str(tmp_path / "command"), "--no-export", "--verbose", "0"])
    assert ours["tasks"]["1"]["error"] == theirs["tasks"]["1"]["error"]
    losses = [[(e["loss"], e["val_loss"]) for e in json.loads((tmp_path / w / "qa1" / "metrics.json").read_text())
               ["epochs"]] for w in ("api", "command")]
    assert losses[0] == losses[1] and len(losses[0]) == 2
    # the run remembers its config, and the results name the recipe it came from
    recorded = json.loads((tmp_path / "api" / "config.json").read_text())
    assert recorded["type"] == "BabiConfig" and recorded["recipe"] == "entnet_babi"
    assert configs.BabiConfig.from_dict(recorded["config"]) == config
    assert ours["args"]["recipe"] == "entnet_babi" and ours == json.loads((tmp_path / "api/results.json").read_text())


@needs_data
def test_a_workdir_remembers_its_config_and_a_resume_reads_it_back(tmp_path, capsys):
    config = dataclasses.replace(kr.recipes.get("quickstart"), epochs=1, embedding_dim=8, num_blocks=2,
                                 tied_keys=False)
    kr.train(config, workdir=tmp_path, export=False, verbose=0, max_steps=2)
    # more epochs: a field a continued run may change; with no config at all, the recorded one
    more = kr.train(dataclasses.replace(config, epochs=2), workdir=tmp_path, resume=True, export=False, verbose=0,
                    max_steps=2)
    epochs = json.loads((tmp_path / "qa1" / "metrics.json").read_text())
    assert [e["epoch"] for e in epochs["epochs"]] == [0, 1] and epochs["starts"] == [0, 1]
    assert more["args"]["epochs"] == 2
    again = kr.train(workdir=tmp_path, export=False, verbose=0, max_steps=2)  # nothing left: 2 epochs done
    # what it tests is the saved model, not fresh weights
    import keras

    from keras_relmem.data import load_babi
    from keras_relmem.tasks.babi import per_task_accuracy

    saved = keras.saving.load_model(tmp_path / "qa1" / "checkpoint.keras")
    expected = per_task_accuracy(saved, load_babi(1, "en", memory_size=config.memory_size, seed=config.seed))[1]
    assert again["tasks"]["1"]["accuracy"] == pytest.approx(expected[0]) and again["tasks"] == more["tasks"]
    # the command with --resume and no settings reads the recorded run too: finished, so its results again
    capsys.readouterr()
    commands.babi(["--resume", "--workdir", str(tmp_path), "--no-export", "--verbose", "0", "--max-steps", "2"])
    assert "holds this run, finished" in capsys.readouterr().out
    # a setting a continued run cannot change is refused, naming it
    with pytest.raises(runs.RunRefused, match=r"embedding_dim: 8 there, 16 here.*--overwrite"):
        kr.train(dataclasses.replace(config, embedding_dim=16), workdir=tmp_path, resume=True)
    with pytest.raises(runs.RunRefused, match="holds a BabiConfig run; this config is a LMConfig"):
        kr.train(recipes.get("lm_ptb_rmc"), workdir=tmp_path, resume=True)


def test_a_workdir_from_before_configs_is_refused_and_kept(tmp_path, capsys):
    old = tmp_path / "old"
    (old / "qa1").mkdir(parents=True)
    (old / "qa1" / "curve.json").write_text("[]")
    (old / "results.json").write_text("{}")
    with pytest.raises(runs.RunRefused, match=r"holds a run without config.json .*keras-relmem 1.0 .*--overwrite"):
        kr.train(recipes.get("quickstart"), workdir=old)
    with pytest.raises(SystemExit):
        commands.babi(["--workdir", str(old)])
    assert "holds a run without config.json" in capsys.readouterr().err
    # nothing written (but the lock file the refusal was made under)
    assert sorted(p.name for p in old.rglob("*")) == [".lock", "curve.json", "qa1", "results.json"]


def test_each_kind_of_run_has_its_own_default_workdir_and_a_run_in_a_subfolder_is_not_this_ones(tmp_path):
    # the quick start and the joint MEMO headline, both with their default folders, side by side
    assert commands.parse_babi([])[1]["workdir"] is None  # kr.train picks the config's own
    assert (runs.task_for(configs.BabiConfig).workdir, runs.task_for(configs.BabiJointConfig).workdir) == \
        ("runs/babi", "runs/babi/memo_joint")
    joint = tmp_path / "runs" / "babi" / "memo_joint"
    joint.mkdir(parents=True)
    runs.write_record(joint, recipes.get("memo_babi_joint"))
    (joint / "curve.json").write_text("[]")
    assert runs._run_files(tmp_path / "runs" / "babi") == []  # the joint run's files are not the quick start's


def test_kr_train_refuses_what_is_not_a_config():
    with pytest.raises(TypeError, match="takes a keras_relmem.configs config"):
        kr.train({"model": "entnet"}, workdir="runs/x")
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['epochs'\]"):
        kr.train(recipes.get("quickstart"), workdir="runs/x", epochs=3)
    with pytest.raises(ValueError, match="needs a config, or the workdir"):
        kr.train()


@needs_data
def test_memo_joint_recipe_trains_through_kr_train_and_resumes(tmp_path):
    config = dataclasses.replace(kr.recipes.get("memo_babi_joint"), **TINY_JOINT)
    first = kr.train(config, workdir=tmp_path, export=False)
    rounds = len(first["curve"])
    assert first["complete"] and rounds >= 1 and sorted(first["tasks"]) == ["1"]
    assert first["args"]["recipe"] == "memo_babi_joint" and first["args"]["first_tasks"] == [1, 16]
    # a larger budget (a field a continued run may change) goes on from the last round
    budget = first["minutes"] + 0.02
    longer = kr.train(dataclasses.replace(config, budget_minutes=budget), workdir=tmp_path, export=False)
    assert len(longer["curve"]) > rounds and longer["curve"][:rounds] == first["curve"]
    with pytest.raises(runs.RunRefused, match="key_size: 4 there, 8 here"):
        kr.train(dataclasses.replace(config, key_size=8), workdir=tmp_path)


@needs_data
def test_the_readme_snippet_trains_a_recipe_in_five_lines(tmp_path, monkeypatch):
    """The README's Python example, run as written but on a tiny version of the recipe it names."""
    readme = (REPO / "README.md").read_text()
    snippet = re.search(r"```python\n(import dataclasses, keras_relmem as kr\n.*?)```", readme, re.S).group(1)
    assert len(snippet.strip().splitlines()) <= 5 and "kr.train(" in snippet
    real_get = recipes.get
    monkeypatch.setattr(recipes, "get", lambda name: dataclasses.replace(real_get(name), **TINY_JOINT))
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(snippet, scope)  # noqa: S102 - the README's own lines
    assert scope["results"]["complete"] and scope["config"].seed == 3
    assert (tmp_path / "runs" / "memo_seed3" / "config.json").is_file()


def _imports(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_library_module_imports_the_command_layer_and_no_cycle_between_the_tasks():
    package = REPO / "keras_relmem"
    for path in package.rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        if module.startswith(("keras_relmem.commands", "keras_relmem.cli")):
            continue
        assert not any(name.startswith("keras_relmem.commands") for name in _imports(path)), module
    graph = {p.stem: {n.rsplit(".", 1)[-1] for n in _imports(p) if n.startswith("keras_relmem.tasks")}
             for p in (package / "tasks").glob("*.py")}
    for name, deps in graph.items():
        for dep in deps & set(graph):
            assert name not in graph[dep], f"keras_relmem.tasks.{name} and .{dep} import each other"
    # no trainer or builder takes an argparse Namespace, and no recipe is applied with setattr
    for path in list((package / "tasks").glob("*.py")) + [package / "tuning.py", package / "runs.py"]:
        text = path.read_text()
        assert "argparse" not in text and "setattr(args" not in text, path.name


def test_setup_py_is_a_shim_beside_pyproject():
    text = (REPO / "setup.py").read_text()
    assert "setup()" in text and (REPO / "pyproject.toml").is_file()


def test_relmem_train_memo_trains_shortest_paths_in_rounds_and_continues(tmp_path):
    argv = ["--task", "shortest_path", "--setting", "10/2/2", "--model", "emn", "--graphs", "64", "--test", "50",
            "--workdir", str(tmp_path), "--verbose", "0"]
    first = commands.memo([*argv, "--budget-minutes", "0.001"])
    assert first["complete"] and first["rounds"] == 1 and 0 <= first["first_node"] <= 100
    assert json.loads((tmp_path / "config.json").read_text())["type"] == "ShortestPathConfig"
    again = commands.memo([*argv, "--budget-minutes", str(first["minutes"] + 0.001)])  # a larger budget goes on
    assert again["rounds"] == 2 and again["curve"][0] == first["curve"][0]


def test_the_lm_and_nth_farthest_commands_train_their_budget_recipes_in_rounds():
    config, _ = commands.parse_command("relmem-train-lm", ["--recipe", "lm_ptb_lstm_zaremba_small", "--seed", "1"])
    assert type(config) is configs.LMRoundsConfig and (config.optimizer, config.seed) == ("sgd", 1)
    config, _ = commands.parse_command("relmem-train-lm", ["--budget-minutes", "30"])
    assert type(config) is configs.LMRoundsConfig and config.recipe == "lm_ptb_rmc_budget"
    assert type(commands.parse_command("relmem-train-lm", [])[0]) is configs.LMConfig
    config, _ = commands.parse_command("relmem-train-nth-farthest", ["--model", "lstm", "--curriculum", "80"])
    assert type(config) is configs.NthFarthestRoundsConfig and config.recipe == "nth_farthest_8_curriculum_lstm"
