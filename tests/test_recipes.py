"""keras_relmem.recipes (named configs): the registry, the recipes' agreement with the runs that measured them,
and `--recipe` / `--list-recipes` on the commands and the benches that train them."""

import dataclasses
import shlex

import pytest

from bench import lm as ptb_lm
from bench import memo_babi, memo_pai, memo_shortest_path, nth_farthest
from bench.report import catalogue
from keras_relmem import configs, recipes
from keras_relmem.commands import train as commands


def test_every_babi_model_has_one_default_recipe():
    for model in ("entnet", "rmc", "lstm", "memo"):
        assert recipes.default(configs.BabiConfig, model).model == model
    assert recipes.default(configs.BabiConfig, "entnet").recipe == "entnet_babi"
    assert recipes.default(configs.BabiJointConfig, "memo").recipe == "memo_babi_joint"
    with pytest.raises(ValueError, match="already registered"):
        recipes.register("entnet_babi", configs.BabiConfig, "", "")
    with pytest.raises(KeyError, match="known recipes: .*entnet_babi"):
        recipes.get("entnet_babbi")


def test_a_recipe_is_a_config_with_its_summary_and_source():
    recipe = recipes.get("memo_babi_joint")
    assert isinstance(recipe, configs.BabiJointConfig)
    assert "joint bAbI headline" in recipe.summary and "memo_babi.json" in recipe.source
    derived = dataclasses.replace(recipe, seed=3)
    assert derived.seed == 3 and derived.recipe == "memo_babi_joint" and derived != recipe
    assert dataclasses.replace(derived, seed=0) == recipe  # the name, summary and source are not compared
    with pytest.raises(ValueError, match="BabiJointConfig.steps_per_round: expected an integer >= 1; got 0"):
        dataclasses.replace(recipe, steps_per_round=0)
    assert recipes.settings("quickstart") == {
        "epochs": 20, "learning_rate": 0.01, "schedule": "cyclic", "weight_decay": 0.02, "decay_scope": "matrices",
        "embedding_stddev": 0.3, "tied_keys": True}


def test_listing_names_the_papers_the_headlines_and_a_command_for_each():
    text = recipes.listing("relmem-train-babi")
    for name in ("quickstart", "entnet_babi", "entnet_babi_paper", "memo_babi_joint", "memo_babi_joint_paper"):
        assert f"\n{name}  [" in "\n" + text
    runs = [line.split("run:", 1)[1].strip() for line in text.splitlines() if "run:" in line]
    assert len(runs) == len(recipes.names()) and all(run.startswith("relmem-") for run in runs)
    assert "relmem-train-lte --recipe lte_rmc" in text


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
    recorded = catalogue.load(results)["args"]
    recorded = recorded[key] if key else recorded
    # a config: the fields it sets away from its class's defaults
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in recipes.settings(name).items()}
    assert {k: recorded.get(k) for k in settings} == dict(settings)


@pytest.mark.parametrize("bench, name", [(memo_pai, n) for n in recipes.names(configs.PAIConfig)]
                         + [(memo_shortest_path, n) for n in recipes.names(configs.ShortestPathConfig)]
                         + [(ptb_lm, n) for n in recipes.names(configs.LMRoundsConfig)]
                         + [(nth_farthest, n) for n in recipes.names(configs.NthFarthestRoundsConfig)])
def test_a_bench_trains_the_librarys_recipe_and_a_flag_overrides_one_part(bench, name):
    args = bench.parse_args(["--recipe", name])
    assert args.config == recipes.get(name) and args.recipe == name
    overridden = bench.parse_args(["--recipe", name, "--learning-rate", "0.005"]).config
    assert overridden == dataclasses.replace(recipes.get(name), learning_rate=0.005)


def test_the_budget_benches_without_a_recipe_keep_their_plain_defaults():
    # their results files recorded before the recipes name none: their arguments read against these defaults
    plain = nth_farthest.parse_args([])
    assert (plain.recipe, plain.budget_minutes, plain.steps_per_round, plain.questions, plain.curriculum) == \
        (None, 60.0, 200, None, None)
    plain = ptb_lm.parse_args([])
    assert (plain.recipe, plain.model, plain.budget_minutes, plain.optimizer, plain.keep_best) == \
        (None, "rmc", 60.0, "adam", False)
    with pytest.raises(SystemExit):  # a recipe of another command is refused
        ptb_lm.parse_args(["--recipe", "nth_farthest_6_rmc"])


def test_the_memo_bench_without_a_recipe_keeps_its_plain_defaults():
    # results recorded before recipes existed name no recipe: their commands read against these defaults
    config = memo_babi.parse_args([]).config
    plain = (config.recipe, config.starts, config.task_repeats, config.bag_init, config.learning_rate)
    assert plain == (None, 1, (), False, 1e-3)
    paper = memo_babi.parse_args(["--recipe", "memo_babi_joint_paper"]).config
    assert (paper.first_tasks, paper.gamma, paper.answer_loss) == ((), 0.9, "visited")


def test_memo_defaults_are_the_measured_ones_and_a_saved_model_keeps_its_own(tmp_path):
    import keras
    import numpy as np

    from keras_relmem.layers import HaltingPolicy
    from keras_relmem.models import MEMOClassifier, babi_qa

    model = MEMOClassifier(3, vocab_size=20, embedding_dim=8, key_size=4, max_hops=2, halting="reinforce")
    assert (model.answer_loss, model.memo.policy.gamma) == ("all", 1.0)  # bench/memo_babi/results/memo_babi.json
    assert babi_qa.model_defaults("memo")["answer_loss"] == "all"
    # a model saved with the defaults before 1.0 comes back with them, not with today's
    old = MEMOClassifier(3, vocab_size=20, embedding_dim=8, key_size=4, max_hops=2,
                         halting=HaltingPolicy(gamma=0.9), answer_loss="visited")
    old.compile(keras.optimizers.Adam(1e-3))
    old({"facts": np.ones((2, 3, 4), "int32"), "query": np.ones((2, 3), "int32")})
    old.save(tmp_path / "old.keras")
    loaded = keras.saving.load_model(tmp_path / "old.keras")
    assert (loaded.answer_loss, loaded.memo.policy.gamma) == ("visited", 0.9)


@pytest.mark.parametrize("name", recipes.names())
def test_every_recipe_parses_back_from_the_command_listed_for_it(name):
    """The command `--list-recipes` prints for a recipe, run through that command's parser, gives the recipe's
    config (task N as task 1), so the listed command trains it."""
    words = shlex.split(recipes.command(name).replace(" N", " 1"))
    config, _ = commands.parse_command(words[0], words[1:])
    recipe = recipes.get(name)
    if isinstance(recipe, configs.BabiConfig):
        recipe = dataclasses.replace(recipe, task=1)
    assert config == recipe and config.recipe == name


def test_lm_and_nth_farthest_commands_refuse_a_recipe_of_another_command_or_model(capsys):
    for argv, message in ((["--recipe", "entnet_babi"], "is a recipe of relmem-train-babi, not of relmem-train-lm"),
                          (["--model", "lstm", "--recipe", "lm_ptb_rmc"], "is for --model rmc; got --model lstm")):
        with pytest.raises(SystemExit):
            commands.lm(argv)
        assert message in capsys.readouterr().err


def test_config_fields_are_documented_in_help_and_bad_values_refused(capsys):
    import pydoc

    from keras_relmem import configs

    text = pydoc.render_doc(configs.BabiConfig, renderer=pydoc.plaintext)
    assert "learning_rate (a number; default 0.001): Adam's learning rate" in text
    assert "max_hops (an integer or None; default None): MEMO's hard stop N" in text
    for cls, field, value, message in (
            (configs.BabiConfig, "learning_rate", float("inf"), "expected a number > 0 and finite; got inf"),
            (configs.LMConfig, "data_dir", "", "a folder's path, not empty"),
            (configs.NthFarthestConfig, "num_objects", 1, "expected an integer >= 2; got 1")):
        with pytest.raises(ValueError, match=message):
            cls(**{field: value})
    with pytest.raises(KeyError, match="no recipe 'memo_babi_joynt' \\(did you mean 'memo_babi_joint'\\?\\)"):
        recipes.get("memo_babi_joynt")


def test_help_shows_the_default_of_the_recipe_each_flag_runs(capsys):
    with pytest.raises(SystemExit):
        commands.nth_farthest(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--epochs N training epochs (default: 20)" in text  # the command's own recipe, nth_farthest_rmc
    # a rounds-only flag makes the command run the rounds recipe: its value, said to be that recipe's
    assert ("--budget-minutes X training minutes (default: 240.0 in recipe nth_farthest_8_curriculum_rmc, which this "
            "flag makes the command run)") in text
