"""The training commands: `relmem-train-babi`, `relmem-train-lm`, `relmem-train-nth-farthest`, `relmem-train-lte`
and `relmem-train-memo`.

Each maps its flags onto one config (`keras_relmem.commands.parse`) and calls
`kr.train`; see each command's `--help` and `--list-recipes`.
"""

from keras_relmem import configs, recipes
from keras_relmem.commands import parse, run

# The flags that choose what relmem-train-babi trains: without any of them it runs the quick start.
BABI_CHOOSING = {"model", "task", "joint", "data", "epochs"}


def babi_recipe(given):
    """The recipe bAbI flags start from when no --recipe is named: MEMO with --joint, the joint headline; no
    choosing flag, the quick start; otherwise the model's default recipe."""
    model = given.get("model", "entnet")
    if given.get("joint") and recipes.default(configs.BabiJointConfig, model):  # a model with a joint run in rounds
        return recipes.default(configs.BabiJointConfig, model)
    if not set(given) & BABI_CHOOSING:
        return recipes.get("quickstart")
    return recipes.default(configs.BabiConfig, model)


def _by_model(config_class, default_model):
    return lambda given: recipes.default(config_class, given.get("model", default_model))


def _epochs_or_rounds(epochs, rounds, default_model):
    """Choose between a task's config trained for epochs and its config trained in rounds under a budget:
    `--budget-minutes` (or another field only the rounds config has) picks the latter."""
    only_rounds = {f.name for f in rounds.settings()} - {f.name for f in epochs.settings()}

    def choose(given):
        kind = rounds if set(given) & only_rounds else epochs
        model = given.get("model", default_model)
        return recipes.default(kind, model) or kind(model=model)

    return choose


def memo_recipe(given):
    """`--task pai` (the default) or `--task shortest_path`: that task's default recipe for the model, else its
    config class's defaults."""
    kind = configs.ShortestPathConfig if given.get("task") == "shortest_path" else configs.PAIConfig
    model = given.get("model", "memo")
    return recipes.default(kind, model) or kind(model=model)


# Each command: its config classes, how it picks the recipe the flags apply to, its default workdir, its
# --help text, the recipes whose values --help shows, and whether it takes --plot.
COMMANDS = {
    "relmem-train-babi": dict(
        classes=[configs.BabiConfig, configs.BabiJointConfig], choose=babi_recipe, workdir=None,
        description="Train a memory model on bAbI question answering. With no flags: the quick start (EntNet on "
                    "task 1 of the 1k set, about a minute on 2 CPU cores); --model picks that model's recipe; "
                    "--model memo --task all --joint the joint MEMO headline, trained in rounds (see "
                    "--list-recipes).",
        shown=["quickstart", "memo_babi_joint"], plot=True),
    "relmem-train-lm": dict(
        classes=[configs.LMConfig, configs.LMRoundsConfig],
        choose=_epochs_or_rounds(configs.LMConfig, configs.LMRoundsConfig, "rmc"), workdir=None,
        description="Train a next-word language model (RMC or LSTM) with truncated BPTT: for --epochs, or for "
                    "--budget-minutes of training time in rounds (the equal-wall-clock recipes, see "
                    "--list-recipes).",
        shown=["lm_ptb_rmc", "lm_ptb_rmc_budget"]),
    "relmem-train-nth-farthest": dict(
        classes=[configs.NthFarthestConfig, configs.NthFarthestRoundsConfig],
        choose=_epochs_or_rounds(configs.NthFarthestConfig, configs.NthFarthestRoundsConfig, "rmc"),
        workdir=None,
        description="Train an RMC or an LSTM on the RMC paper's Nth Farthest task: for --epochs on a fixed "
                    "training set, or for --budget-minutes in rounds of fresh examples (with a --curriculum; see "
                    "--list-recipes).",
        shown=["nth_farthest_rmc", "nth_farthest_8_curriculum_rmc"], plot=True),
    "relmem-train-lte": dict(
        classes=[configs.LTEConfig], choose=_by_model(configs.LTEConfig, "rmc"), workdir=None,
        description="Train an RMC, an EntNet cell or an LSTM to execute programs (Learning to Execute).",
        shown=["lte_rmc"]),
    "relmem-train-memo": dict(
        classes=[configs.PAIConfig, configs.ShortestPathConfig], choose=memo_recipe, workdir=None,
        description="Train MEMO (or --model emn, the one-hop baseline) on paired associative inference (--task "
                    "pai) or shortest paths (--task shortest_path), in rounds of fresh examples for "
                    "--budget-minutes of training time (Banino et al. 2020, Tables 1-2); a rerun continues (see "
                    "--list-recipes).",
        shown=[None, "memo_shortest_path"]),
}


def _settings(name):
    spec = dict(COMMANDS[name])
    spec["shown"] = [recipes.get(r) if r else spec["classes"][0]() for r in spec["shown"]]
    return spec


def parse_command(name, argv):
    """Command `name`'s arguments as `(config, kr.train options)`."""
    config, options, _ = parse(argv, prog=name, **_settings(name))
    return config, options


def parse_babi(argv):
    """`relmem-train-babi`'s arguments as `(config, kr.train options)`."""
    return parse_command("relmem-train-babi", argv)


def _announce_quickstart(config):
    if config.recipe == "quickstart":
        print("Running the quick start (recipe quickstart: EntNet on task 1 of bAbI en, 20 epochs; "
              "relmem-train-babi --list-recipes lists the others).", flush=True)


def babi(argv=None):
    """`relmem-train-babi`: bAbI question answering (EntNet, RMC, LSTM or MEMO)."""
    return run(argv, announce=_announce_quickstart, **_settings("relmem-train-babi"))


def lm(argv=None):
    """`relmem-train-lm`: next-word language modelling on PTB or WikiText, for epochs or (`--budget-minutes`, or
    a recipe such as `lm_ptb_lstm_zaremba_small`) in rounds under a wall-clock budget."""
    return run(argv, **_settings("relmem-train-lm"))


def nth_farthest(argv=None):
    """`relmem-train-nth-farthest`: the RMC paper's Nth Farthest task, for epochs on a fixed training set or (with
    `--budget-minutes`, or a recipe such as `nth_farthest_8_curriculum_rmc`) in rounds of fresh examples."""
    return run(argv, **_settings("relmem-train-nth-farthest"))


def lte(argv=None):
    """`relmem-train-lte`: Learning to Execute (programs and memorization), the RMC paper's Table 1."""
    return run(argv, **_settings("relmem-train-lte"))


def memo(argv=None):
    """`relmem-train-memo`: MEMO (or its one-hop baseline) on paired associative inference or shortest paths."""
    return run(argv, **_settings("relmem-train-memo"))
