"""keras_relmem.recipes: the registry, the recipes' agreement with the runs that measured them, and
`--recipe` / `--list-recipes` in tasks/train_babi.py and the benches."""

import json
import pathlib

import pytest

from bench import memo_babi, memo_pai, memo_shortest_path, nth_farthest, ptb_lm
from keras_relmem import recipes
from keras_relmem.tasks import babi as babi_task

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "bench" / "results"


def test_every_babi_model_has_one_default_recipe():
    for model in ("entnet", "rmc", "lstm", "memo"):
        assert recipes.default("babi", model).model == model
    assert recipes.default("babi", "entnet").name == "entnet_babi"
    with pytest.raises(ValueError, match="already registered"):
        recipes.register("entnet_babi", "babi", "entnet", "", "", "", {})
    with pytest.raises(KeyError, match="known recipes: .*entnet_babi"):
        recipes.get("entnet_babbi")


def test_listing_names_the_papers_and_the_headlines():
    text = recipes.listing("babi")
    for name in ("entnet_babi", "entnet_babi_paper", "memo_babi_joint", "memo_babi_joint_paper"):
        assert name in text
    assert "entnet_babi (default)" in text
    assert "memo_pai_length4" in recipes.listing()


@pytest.mark.parametrize("name, results, key", [
    ("memo_babi_joint", "memo_babi.json", None),
    ("memo_babi_joint", "memo_babi_seed1.json", None),
    ("memo_pai_length4", "memo_pai_length4_entropy_cosine.json", "4"),
    ("memo_pai_length5", "memo_pai_length5_beta0_cosine.json", "5"),
    ("memo_shortest_path", "memo_shortest_path.json", "20/3/3"),
    ("memo_shortest_path_20_5_3", "memo_shortest_path.json", "20/5/3"),
    ("memo_shortest_path_10_2_2", "memo_shortest_path.json", "10/2/2"),
    ("lm_ptb_rmc_budget", "ptb_lm_fair.json", "rmc_seed1"),
    ("lm_ptb_rmc_budget", "ptb_lm_fair.json", "rmc_seed2"),
    ("lm_ptb_rmc_early_stop", "ptb_lm_fair.json", "rmc_keep_best_seed1"),
    ("lm_ptb_lstm_zaremba_small", "ptb_lm_fair.json", "lstm_zaremba_small_seed1"),
    ("lm_ptb_lstm_zaremba_medium", "ptb_lm_fair.json", "lstm_zaremba_medium"),
    ("nth_farthest_8_curriculum_rmc", "nth_farthest_8objects_curriculum.json", "rmc_h32_curriculum"),
    ("nth_farthest_8_curriculum_lstm", "nth_farthest_8objects_curriculum.json", "lstm_curriculum"),
    ("nth_farthest_6_rmc", "nth_farthest_6objects.json", "rmc_farthest_seed1"),
    ("nth_farthest_6_rmc", "nth_farthest_6objects.json", "rmc_farthest_seed2"),
    ("nth_farthest_6_lstm", "nth_farthest_6objects.json", "lstm_u256"),
    ("nth_farthest_4_rmc", "nth_farthest_4objects.json", "rmc_farthest_seed1"),
    ("nth_farthest_4_lstm", "nth_farthest_4objects.json", "lstm_u256"),
])
def test_a_headline_recipe_is_the_run_that_measured_it(name, results, key):
    # every setting of the recipe is what the results file recorded for its run, so the recipe
    # reproduces the headline and cannot drift from it
    recorded = json.loads((RESULTS / results).read_text())["args"]
    recorded = recorded[key] if key else recorded
    settings = recipes.get(name).settings
    assert {k: recorded.get(k) for k in settings} == dict(settings)


@pytest.mark.parametrize("bench, name", [(memo_babi, n) for n in ("memo_babi_joint", "memo_babi_joint_paper")]
                         + [(memo_pai, n) for n in recipes.names("pai")]
                         + [(memo_shortest_path, n) for n in recipes.names("shortest_path")]
                         + [(ptb_lm, n) for n in recipes.names("lm_budget")]
                         + [(nth_farthest, n) for n in recipes.names("nth_farthest_budget")])
def test_a_bench_recipe_sets_its_flags_and_a_flag_overrides_one_part(bench, name):
    args = vars(bench.parse_args(["--recipe", name]))
    settings = recipes.get(name).settings
    derived = {"first_tasks_rounds", "answer_warmup_rounds", "first_tasks_learning_rate"}  # filled in by parse_args
    assert {k: args[k] for k in settings if k not in derived} == {k: v for k, v in settings.items() if k not in derived}
    overridden = vars(bench.parse_args(["--recipe", name, "--learning-rate", "0.005"]))
    assert overridden["learning_rate"] == 0.005
    assert overridden["batch_size"] == settings["batch_size"]


def test_every_bench_recipe_parses_back_from_its_own_command():
    """A bench recipe's command (`python -m bench.NAME --recipe R`) is what `bench.NAME` parses to the recipe's
    settings, so the command a recipe prints trains it."""
    import importlib
    import shlex

    checked = set()
    for name in recipes.names():
        recipe = recipes.get(name)
        words = shlex.split(recipe.command)
        if words[:3] != ["python", "-m", words[2]] or not words[2].startswith("bench."):
            continue
        args = vars(importlib.import_module(words[2]).parse_args(words[3:]))
        derived = {"first_tasks_rounds", "answer_warmup_rounds", "first_tasks_learning_rate"}
        assert args["recipe"] == name
        assert {k: args[k] for k in recipe.settings if k not in derived} == \
            {k: v for k, v in recipe.settings.items() if k not in derived}, name
        checked.add(recipe.task)
    assert {"pai", "shortest_path", "lm_budget", "nth_farthest_budget"} <= checked


def test_the_budget_benches_without_a_recipe_keep_their_plain_defaults():
    # their results files recorded before the recipes name none: their arguments read against these defaults
    plain = nth_farthest.parse_args([])
    assert (plain.recipe, plain.budget_minutes, plain.steps_per_round, plain.questions, plain.curriculum) == \
        (None, 60.0, 200, None, None)
    plain = ptb_lm.parse_args([])
    assert (plain.recipe, plain.model, plain.budget_minutes, plain.optimizer, plain.keep_best) == \
        (None, "rmc", 60.0, "adam", False)
    with pytest.raises(SystemExit):  # a recipe of another bench is refused
        ptb_lm.parse_args(["--recipe", "nth_farthest_6_rmc"])


def test_the_memo_bench_without_a_recipe_keeps_its_plain_defaults():
    # results recorded before recipes existed name no recipe: their commands read against these defaults
    args = memo_babi.parse_args([])
    plain = (args.recipe, args.starts, args.task_repeats, args.bag_init, args.learning_rate)
    assert plain == (None, 1, [], False, 1e-3)
    paper = memo_babi.parse_args(["--recipe", "memo_babi_joint_paper"])
    assert (paper.first_tasks, paper.first_tasks_rounds, paper.gamma, paper.answer_loss) == ([], 0, 0.9, "visited")
    # a part of the joint recipe taken back: no curriculum, the default embedding initialiser
    args = memo_babi.parse_args(["--recipe", "memo_babi_joint", "--first-tasks", "--embedding-stddev", "none"])
    assert (args.first_tasks, args.first_tasks_rounds, args.first_tasks_learning_rate, args.embedding_stddev) == \
        ([], 0, None, None)


def test_train_babi_takes_its_recipe():
    args = babi_task.resolve_args(["--task", "1"])
    assert (args.recipe, args.schedule, args.tied_keys, args.weight_decay) == ("entnet_babi", "cyclic", True, 0.02)
    paper = babi_task.resolve_args(["--task", "1", "--recipe", "entnet_babi_paper", "--learning-rate", "0.005"])
    assert (paper.schedule, paper.tied_keys, paper.embedding_stddev, paper.learning_rate) == ("step", False, 0.1, 0.005)
    assert babi_task.resolve_args(["--task", "1", "--paper-recipe"]).recipe == "entnet_babi_paper"
    rmc = babi_task.resolve_args(["--recipe", "rmc_babi"])  # the recipe names its model
    assert (rmc.model, rmc.schedule, rmc.embedding_stddev, rmc.quick_default) == ("rmc", "step", None, False)


def test_train_babi_memo_joint_trains_the_joint_recipe(capsys):
    from keras_relmem.tasks import babi_joint

    user = ["--model", "memo", "--task", "all", "--joint", "--data", "en-10k"]
    assert babi_task.joint_recipe(user) == "memo_babi_joint"  # the command the users are sent to
    assert babi_task.joint_recipe([*user, "--recipe", "memo_babi_joint_paper"]) == "memo_babi_joint_paper"
    assert babi_task.joint_recipe(["--recipe", "memo_babi_joint"]) == "memo_babi_joint"  # names its model
    assert babi_task.joint_recipe(["--model", "memo", "--task", "3"]) is None  # one task: the epoch-based run
    assert babi_task.joint_recipe(["--model", "entnet", "--task", "all", "--joint"]) is None
    args = babi_joint.parse_args(user, recipe="memo_babi_joint")
    recipe = recipes.get("memo_babi_joint")
    assert {key: getattr(args, key) for key in recipe.settings} == {
        **recipe.settings, "first_tasks_rounds": 2, "answer_warmup_rounds": 2}
    assert recipe.command == "python tasks/train_babi.py " + " ".join(user)
    assert recipes.default("babi", "memo", joint=True) is recipe and recipes.default("babi", "memo").name == "memo_babi"


def test_train_babi_refuses_a_recipe_of_another_model(capsys):
    with pytest.raises(SystemExit):
        babi_task.resolve_args(["--model", "rmc", "--recipe", "entnet_babi"])
    assert "for --model entnet; got --model rmc" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        babi_task.resolve_args(["--recipe", "nonesuch"])
    assert "no recipe 'nonesuch'" in capsys.readouterr().err


def test_list_recipes(capsys):
    with pytest.raises(SystemExit) as stop:
        babi_task.resolve_args(["--list-recipes"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "entnet_babi_paper" in out and "memo_babi_joint" in out and "run:  python" in out
    # the other commands' recipes follow the bAbI ones: MEMO's PAI and its paper's set-up among them
    babi, others = out.split("Recipes of the other commands")
    assert "memo_pai_length4" not in babi
    assert "memo_pai_length4  [pai, memo]" in others and "memo_pai_paper" in others
    assert "python -m bench.memo_pai --recipe memo_pai_length4" in others


def test_memo_defaults_are_the_measured_ones_and_a_saved_model_keeps_its_own(tmp_path):
    import keras
    import numpy as np

    from keras_relmem.models import MEMOClassifier, babi_qa

    model = MEMOClassifier(3, vocab_size=20, embedding_dim=8, key_size=4, max_hops=2, halting="reinforce")
    assert (model.answer_loss, model.gamma) == ("all", 1.0)  # bench/results/memo_babi.json's run
    memo = babi_qa.model_defaults("memo")
    assert (memo["answer_loss"], memo["gamma"]) == ("all", 1.0)
    # a model saved with the defaults before 1.0 comes back with them, not with today's
    old = MEMOClassifier(3, vocab_size=20, embedding_dim=8, key_size=4, max_hops=2, halting="reinforce",
                         answer_loss="visited", gamma=0.9)
    old.compile(keras.optimizers.Adam(1e-3))
    old({"facts": np.ones((2, 3, 4), "int32"), "query": np.ones((2, 3), "int32")})
    old.save(tmp_path / "old.keras")
    loaded = keras.saving.load_model(tmp_path / "old.keras")
    assert (loaded.answer_loss, loaded.gamma) == ("visited", 0.9)


def test_every_task_script_recipe_parses_back_from_its_own_command():
    """Each recipe a task script trains: its command, parsed by that script, gives the recipe's settings (so
    no setting names a flag the script lacks, and the command is the recipe's)."""
    import shlex

    from keras_relmem.tasks import babi_joint, common, lm, nth_farthest

    parsers = {"tasks/train_lm.py": ("lm", lm.build_parser), "tasks/train_nth_farthest.py":
               ("nth_farthest", nth_farthest.build_parser)}
    checked = set()
    for name in recipes.names():
        recipe = recipes.get(name)
        words = shlex.split(recipe.command.replace(" N ", " 1 ").replace("--task N", "--task 1"))
        if words[:2] != ["python", words[1]] or not words[1].startswith("tasks/"):
            continue
        argv = words[2:]
        if words[1] == "tasks/train_babi.py":
            joint = babi_task.joint_recipe(argv)
            args = babi_joint.parse_args(argv, recipe=joint) if joint else babi_task.resolve_args(argv)
        else:
            task, build = parsers[words[1]]
            args = common.parse_with_recipes(build(), argv, task)
        assert args.recipe == name, name
        derived = {"first_tasks_rounds", "answer_warmup_rounds"}  # set from others when None
        assert {k: getattr(args, k) for k in recipe.settings if k not in derived} == \
            {k: v for k, v in recipe.settings.items() if k not in derived}, name
        checked.add(name)
    assert {"entnet_babi", "memo_babi_joint", "lm_ptb_rmc", "nth_farthest_rmc"} <= checked


def test_lm_and_nth_farthest_scripts_refuse_a_recipe_of_another_task_or_model(capsys):
    from keras_relmem.tasks import common, lm

    for argv, message in ((["--recipe", "entnet_babi"], "is a babi recipe; this command trains lm"),
                          (["--model", "lstm", "--recipe", "lm_ptb_rmc"], "is for --model rmc; got --model lstm")):
        with pytest.raises(SystemExit):
            common.parse_with_recipes(lm.build_parser(), argv, "lm")
        assert message in capsys.readouterr().err
