"""Named training recipes: the settings behind each headline result and each paper's own set-up.

A recipe is data: the model, its configuration, the optimizer and schedule,
the training controls and the data options of one result, with where they
come from (the paper's section, or the results file whose run measured them).
The task scripts and the benches read their defaults from here, so a result
and the command that reproduces it cannot drift apart:

- `python tasks/train_babi.py --list-recipes` lists them;
- `--recipe NAME` trains one, and any explicit flag overrides a single part;
- each model's default recipe is its best measured one, and the paper's is
  one flag away (`--recipe entnet_babi_paper`).

Settings are keyed by the flag names of the recipe's `command` (underscores
for dashes), so `settings["learning_rate"]` is `--learning-rate`.

Example:

```python
>>> from keras_relmem import recipes
>>> recipe = recipes.get("entnet_babi")
>>> recipe.model, recipe.settings["schedule"], recipe.settings["tied_keys"]
('entnet', 'cyclic', True)
>>> recipes.default("babi", "entnet").name
'entnet_babi'
>>> "memo_babi_joint" in recipes.names("babi")
True

```
"""

import dataclasses
import types


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One named recipe.

    Args:
        name: registry key, e.g. `"entnet_babi"`.
        task: `"babi"`, `"pai"`, ...: which task script or bench runs it.
        model: `"entnet"`, `"memo"`, `"rmc"`, `"lstm"`.
        summary: one line for `--list-recipes`.
        source: where the settings come from (paper section or results file).
        command: the command that trains it (`settings` are its flags).
        settings: `{flag name with underscores: value}`.
        default: whether it is its model's default for the task.
        joint: whether it trains one model on several tasks together
            (`--joint`); a model has a default of each kind.
    """

    name: str
    task: str
    model: str
    summary: str
    source: str
    command: str
    settings: types.MappingProxyType
    default: bool = False
    joint: bool = False

    def flags(self):
        """The recipe as command-line flags (`--name value`; lists spread, True as a bare flag)."""
        tokens = []
        for key, value in self.settings.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                tokens.append(flag)
            elif value is False or value is None:
                continue
            elif isinstance(value, (list, tuple)):
                if value:
                    tokens += [flag, *map(str, value)]
            else:
                tokens += [flag, str(value)]
        return tokens


_REGISTRY = {}


def register(name, task, model, summary, source, command, settings, default=False, joint=False):
    """Add a recipe to the registry (a name is registered once) and return it."""
    if name in _REGISTRY:
        raise ValueError(f"recipe {name!r} is already registered")
    if default and any(r.default for r in _REGISTRY.values() if (r.task, r.model, r.joint) == (task, model, joint)):
        raise ValueError(f"{task}/{model} already has a default{' joint' * joint} recipe")
    recipe = Recipe(name, task, model, summary, source, command, types.MappingProxyType(dict(settings)), default,
                    joint)
    _REGISTRY[name] = recipe
    return recipe


def get(name):
    """The recipe called `name`; a KeyError lists the known names."""
    if name not in _REGISTRY:
        raise KeyError(f"no recipe {name!r}; known recipes: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def names(task=None, model=None):
    """Registered names, optionally for one task and model, in registration order."""
    return [n for n, r in _REGISTRY.items() if task in (None, r.task) and model in (None, r.model)]


def default(task, model, joint=False):
    """The default recipe of `model` on `task` (its best measured one), one model per task or (`joint`)
    one on all of them; None if it has none."""
    return next((r for r in _REGISTRY.values()
                 if (r.task, r.model, r.joint) == (task, model, joint) and r.default), None)


def listing(task=None, others=False):
    """The recipes as text: name, model, summary, source and command, one block each.

    `task` keeps that task's recipes; `others=True` adds every other task's
    after them, under a heading (each block's `run:` line names its command).
    """
    lines = _blocks(names(task))
    if task is not None and others:
        rest = [name for name in names() if _REGISTRY[name].task != task]
        if rest:
            lines += [f"Recipes of the other commands (not {task}; each runs with its own command):", ""]
            lines += _blocks(rest)
    return "\n".join(lines).rstrip()


def _blocks(chosen):
    lines = []
    for name in chosen:
        recipe = _REGISTRY[name]
        mark = (" (default with --joint)" if recipe.joint else " (default)") if recipe.default else ""
        lines += [f"{name}{mark}  [{recipe.task}, {recipe.model}]", f"    {recipe.summary}",
                  f"    from: {recipe.source}", f"    run:  {recipe.command}", ""]
    return lines


# --- bAbI, one model per task (tasks/train_babi.py) -------------------------------------------------------

# The EntNet paper's optimisation (Henaff et al. 2017, §5.2): Adam 0.01, batch 32, gradient-norm clip 40,
# 200 epochs, the rate halved every 25 epochs.
_ENTNET_PAPER = {"learning_rate": 0.01, "batch_size": 32, "clipnorm": 40.0, "epochs": 200, "halve_every": 25,
                 "schedule": "step", "weight_decay": 0.0, "decay_scope": "all", "tied_keys": False,
                 "embedding_stddev": 0.1}
_STEP = {"learning_rate": 1e-3, "batch_size": 32, "clipnorm": 40.0, "epochs": 100, "halve_every": 25,
         "schedule": "step", "weight_decay": 0.0, "decay_scope": "all", "tied_keys": False}

register(
    "entnet_babi", "babi", "entnet",
    "EntNet with tied keys, the TF port's cyclic rate, AdamW decay 0.02 on embeddings and kernels, N(0, 0.3) "
    "embeddings: the recipe that solved the most bAbI tasks on most seeds",
    "bench/results/babi_entnet_seeds.json (5 seeds, run by bench.babi_entnet with a budget of 10 training "
    "minutes a task instead of 200 epochs)",
    "python tasks/train_babi.py --task N --data en-10k",
    {**_ENTNET_PAPER, "schedule": "cyclic", "weight_decay": 0.02, "decay_scope": "matrices", "tied_keys": True,
     "embedding_stddev": 0.3},
    default=True,
)
register(
    "entnet_babi_paper", "babi", "entnet",
    "EntNet as the paper trains it: Adam 0.01 halved every 25 epochs, untied keys, no decay, N(0, 0.1)",
    "Henaff et al. 2017, §5.2 and appendix",
    "python tasks/train_babi.py --task N --data en-10k --recipe entnet_babi_paper",
    _ENTNET_PAPER,
)
register(
    "rmc_babi", "babi", "rmc", "RMC over the story's sentences: Adam 1e-3 halved every 25 epochs, 100 epochs",
    "our choice (the RMC paper has no bAbI experiment)",
    "python tasks/train_babi.py --model rmc --task N", _STEP, default=True,
)
register(
    "lstm_babi", "babi", "lstm", "LSTM baseline: Adam 1e-3 halved every 25 epochs, 100 epochs",
    "our choice (the EntNet paper's LSTM baseline, Henaff et al. 2017, Table 2)",
    "python tasks/train_babi.py --model lstm --task N", _STEP, default=True,
)
register(
    "memo_babi", "babi", "memo",
    "MEMO on one task at a time: Adam 1e-3 halved every 25 epochs, 100 epochs, gradient-norm clip 10",
    "our choice; the joint recipe below is MEMO's measured one",
    "python tasks/train_babi.py --model memo --task N", {**_STEP, "clipnorm": 10.0}, default=True,
)

# --- MEMO, joint bAbI (tasks/train_babi.py --joint: keras_relmem.tasks.babi_joint) ------------------------------

MEMO_BABI_JOINT = {
    "task_repeats": ["14=2", "17=4", "19=4"], "first_tasks": [1, 16], "first_tasks_rounds": 2,
    "first_tasks_learning_rate": 3e-4, "learning_rate": 3e-4, "learning_rate_from": ["65=1e-4"],
    "budget_minutes": 240.0, "starts": 3, "start_rounds": 2, "steps_per_round": 2000, "memory_size": 320,
    "batch_size": 32, "clipnorm": 10.0, "bag_init": True, "coverage_penalty": 5.0, "embedding_stddev": 1.0,
    "dropout": 0.1, "embedding_dim": 64, "num_heads": 4, "key_size": 32, "max_hops": 5,
    "halting_warmup_rounds": 12, "answer_loss": "all", "gamma": 1.0, "beta": 0.01,
    "halting_inputs": "distance+entropy", "warmup_answer_loss": "last", "answer_warmup_rounds": 2,
}
register(
    "memo_babi_joint", "babi", "memo",
    "MEMO, one model on all 20 tasks of en-10k, the joint bAbI headline (4 training hours, best of 3 starts, "
    "tasks 1 and 16 first, tasks 14, 17, 19 repeated, answer-loss and halting warm-ups, bag-of-words start, "
    "coverage penalty 5)",
    "bench/results/memo_babi.json (seed 0) and memo_babi_seed1.json (seed 1)",
    "python tasks/train_babi.py --model memo --task all --joint --data en-10k", MEMO_BABI_JOINT,
    default=True, joint=True,
)
register(
    "memo_babi_joint_paper", "babi", "memo",
    "MEMO, joint bAbI, as the paper describes it: Adam on MEMO, RMSProp 1e-4 on the halting network, the "
    "distance alone as the halting input, answers trained on the visited hops, gamma 0.9; one start, no "
    "curriculum (on our runs this collapses the halting policy to one hop)",
    "Banino et al. 2020, §2.3 and appendix D (gamma from its D.3 search); docs/results.md (joint bAbI)",
    "python tasks/train_babi.py --model memo --task all --joint --data en-10k --recipe memo_babi_joint_paper",
    {**MEMO_BABI_JOINT, "task_repeats": [], "first_tasks": [], "first_tasks_rounds": None,
     "first_tasks_learning_rate": None, "learning_rate": 1e-3, "learning_rate_from": [], "starts": 1,
     "bag_init": False, "coverage_penalty": 0.0, "embedding_stddev": None, "answer_loss": "visited",
     "gamma": 0.9, "halting_inputs": "distance", "warmup_answer_loss": None, "answer_warmup_rounds": None,
     "halting_warmup_rounds": 0},
    joint=True,
)

# --- MEMO, paired associative inference (bench.memo_pai) -----------------------------------------------

_PAI = {"budget_minutes": 60.0, "episodes": 20000, "curriculum": "4:30,8:10,16:1", "batch_size": 64,
        "embedding_size": 64, "learning_rate": 1e-3, "final_learning_rate": 1e-4, "halting_warmup": 40,
        "answer_loss": "all", "gamma": 1.0}
register(
    "memo_pai_length4", "pai", "memo",
    "MEMO on PAI length 4 (A-B-C-D): Adam 1e-3 on a cosine to 1e-4, halting network waits 40 rounds, reads "
    "distance and answer entropy",
    "bench/results/memo_pai_length4_entropy_cosine.json",
    "python -m bench.memo_pai --recipe memo_pai_length4",
    {**_PAI, "length": 4, "max_hops": 7, "beta": 0.01, "halting_inputs": "distance+entropy"},
)
register(
    "memo_pai_length5", "pai", "memo",
    "MEMO on PAI length 5 (A-...-E): as length 4 with no hop cost (beta 0) and the distance alone",
    "bench/results/memo_pai_length5_beta0_cosine.json and its seed 1",
    "python -m bench.memo_pai --recipe memo_pai_length5",
    {**_PAI, "length": 5, "max_hops": 9, "beta": 0.0, "halting_inputs": "distance"},
)
register(
    "memo_pai_paper", "pai", "memo",
    "MEMO on PAI as the paper describes it: answers trained on the visited hops, gamma 0.9, hop cost 0.01, "
    "constant Adam 1e-3, no halting warm-up (with the visited hops and gamma 0.9 our length-4 run's policy "
    "collapsed to one hop: memo_pai_length4_visited.json)",
    "Banino et al. 2020, §3.1 and appendix D",
    "python -m bench.memo_pai --recipe memo_pai_paper",
    {**_PAI, "length": 4, "max_hops": 7, "final_learning_rate": None, "halting_warmup": 0,
     "answer_loss": "visited", "gamma": 0.9, "beta": 0.01, "halting_inputs": "distance"},
)

# --- MEMO, shortest paths (bench.memo_shortest_path) ---------------------------------------------------

_PATHS = {"budget_minutes": 60.0, "graphs": 10000, "test": 2000, "embedding_dim": 64, "num_heads": 4,
          "key_size": 32, "max_hops": 7, "batch_size": 64, "learning_rate": 1e-3, "halting_warmup": 10,
          "answer_loss": "all", "gamma": 1.0, "halting_inputs": "distance"}
register(
    "memo_shortest_path", "shortest_path", "memo",
    "MEMO on shortest paths, 20 nodes, out-degree 3, paths of 3 (Table 2): Adam 1e-3, the halting network "
    "waits 10 rounds and reads the attention distance, 60 minutes",
    "bench/results/memo_shortest_path.json, its 20/3/3 run (the hop cost was MEMOClassifier's 0.01, the "
    "default still, before the bench had a --beta flag)",
    "python -m bench.memo_shortest_path --recipe memo_shortest_path",
    {"setting": "20/3/3", **_PATHS}, default=True,
)
register(
    "memo_shortest_path_20_5_3", "shortest_path", "memo",
    "MEMO on shortest paths, 20 nodes, out-degree 5, paths of 3 (Table 2): as 20/3/3",
    "bench/results/memo_shortest_path.json, its 20/5/3 run",
    "python -m bench.memo_shortest_path --recipe memo_shortest_path_20_5_3",
    {"setting": "20/5/3", **_PATHS, "beta": 0.01},
)
register(
    "memo_shortest_path_10_2_2", "shortest_path", "memo",
    "MEMO on shortest paths, 10 nodes, out-degree 2, paths of 2 (Table 2): as 20/3/3 with 5 hops, 5 minutes",
    "bench/results/memo_shortest_path.json, its 10/2/2 run",
    "python -m bench.memo_shortest_path --recipe memo_shortest_path_10_2_2",
    {"setting": "10/2/2", **_PATHS, "budget_minutes": 5.0, "max_hops": 5, "beta": 0.01},
)

# --- Language modelling (tasks/train_lm.py) ------------------------------------------------------------

_LM = {"batch_size": 64, "bptt": 100, "learning_rate": 1e-3, "clipnorm": 0.25, "epochs": 10}
register(
    "lm_ptb_rmc", "lm", "rmc",
    "RMC language model on PTB: Adam 1e-3, batch 64, BPTT 100, gradient-norm clip 0.25, 10 epochs",
    "bench/results/ptb_lm_fair.json (the 'rmc' runs, seeds 0-2, trained for 120 minutes instead of epochs)",
    "python tasks/train_lm.py --model rmc --corpus ptb", _LM, default=True,
)
register(
    "lm_ptb_lstm", "lm", "lstm",
    "LSTM language model on PTB with the RMC's optimisation (Adam 1e-3, batch 64, BPTT 100, clip 0.25)",
    "our choice, for a comparison at equal optimisation; Zaremba et al.'s SGD recipes, which the bench's "
    "lstm_zaremba_* runs of bench/results/ptb_lm_fair.json measure, are bench runs (python -m bench.ptb_lm)",
    "python tasks/train_lm.py --model lstm --corpus ptb", _LM, default=True,
)

# --- Nth Farthest (tasks/train_nth_farthest.py) ------------------------------------------------------------

_NTH = {"batch_size": 64, "learning_rate": 1e-3, "epochs": 20, "train_examples": 50_000, "num_objects": 8,
        "num_features": 16}
register(
    "nth_farthest_rmc", "nth_farthest", "rmc",
    "RMC on Nth Farthest (8 objects of 16 features): 4 memories, 4 heads of 64, 1 block, Adam 1e-3, "
    "batch 64, 50,000 training examples for 20 epochs",
    "Santoro et al. 2018, §4.1 and Sonnet's relational_memory example (memories, heads, head size, blocks); "
    "the examples and epochs are ours for a CPU",
    "python tasks/train_nth_farthest.py --model rmc",
    {**_NTH, "mem_slots": 4, "head_size": 64, "num_heads": 4, "num_blocks": 1}, default=True,
)
register(
    "nth_farthest_lstm", "nth_farthest", "lstm",
    "LSTM baseline on Nth Farthest: 512 units, Adam 1e-3, batch 64",
    "Santoro et al. 2018, §4.1 (the LSTM baseline); sizes ours",
    "python tasks/train_nth_farthest.py --model lstm", {**_NTH, "units": 512}, default=True,
)

# --- PTB at equal wall clock (bench.ptb_lm: the RMC against Zaremba et al.'s LSTMs, each with its own recipe) --

_PTB_ADAM = {"model": "rmc", "budget_minutes": 120.0, "batches_per_round": 20, "batch_size": 64, "bptt": 100,
             "learning_rate": 1e-3, "clipnorm": 0.25, "global_clipnorm": 0.0, "optimizer": "adam", "lr_decay": 1.0,
             "decay_after": 0, "keep_best": False, "units": None, "num_layers": None, "dropout": None,
             "init_scale": None, "untied": False}
# Zaremba et al. 2014 sum the loss over the BPTT steps; ours is the mean per token, so their SGD rate 1 and
# global clip 5 are rate `bptt` and clip 5 / bptt here (the same SGD updates).
_ZAREMBA = {**_PTB_ADAM, "model": "lstm", "batch_size": 20, "clipnorm": 0.0, "optimizer": "sgd", "lr_decay": 0.5,
            "num_layers": 2, "untied": True}
register(
    "lm_ptb_rmc_budget", "lm_budget", "rmc",
    "RMC on PTB for 120 training minutes: the task script's model and Adam recipe (1e-3, batch 64, BPTT 100, "
    "clip 0.25), validation after every 20 batches",
    "bench/results/ptb_lm_fair.json, its rmc, rmc_seed1 and rmc_seed2 runs",
    "python -m bench.ptb_lm --recipe lm_ptb_rmc_budget", _PTB_ADAM, default=True,
)
register(
    "lm_ptb_rmc_early_stop", "lm_budget", "rmc",
    "RMC on PTB stopped early: as lm_ptb_rmc_budget for 98 minutes, testing the round with the best validation "
    "perplexity (the RMC over-fits PTB after about an hour on one core)",
    "bench/results/ptb_lm_fair.json, its rmc_keep_best runs (seeds 0-2)",
    "python -m bench.ptb_lm --recipe lm_ptb_rmc_early_stop",
    {**_PTB_ADAM, "budget_minutes": 98.0, "keep_best": True},
)
register(
    "lm_ptb_lstm_zaremba_small", "lm_budget", "lstm",
    "Zaremba et al.'s small LSTM (2 x 200, no dropout, untied softmax, uniform init 0.1): SGD rate 1 (20 per "
    "token) halved every epoch after 4, global clip 5, batch 20, BPTT 20, 120 training minutes",
    "Zaremba et al. 2014, §4.1 (their small model); bench/results/ptb_lm_fair.json, its lstm_zaremba_small runs",
    "python -m bench.ptb_lm --recipe lm_ptb_lstm_zaremba_small",
    {**_ZAREMBA, "batches_per_round": 2323, "bptt": 20, "learning_rate": 20.0, "global_clipnorm": 0.25,
     "decay_after": 4, "units": 200, "init_scale": 0.1},
    default=True,
)
register(
    "lm_ptb_lstm_zaremba_medium", "lm_budget", "lstm",
    "Zaremba et al.'s medium LSTM (2 x 650, dropout 0.5, untied softmax, uniform init 0.05): SGD rate 1 (35 per "
    "token) halved every epoch after 3, global clip 5, batch 20, BPTT 35, 120 training minutes",
    "Zaremba et al. 2014, §4.1 (their medium model); bench/results/ptb_lm_fair.json, its lstm_zaremba_medium runs",
    "python -m bench.ptb_lm --recipe lm_ptb_lstm_zaremba_medium",
    {**_ZAREMBA, "batches_per_round": 332, "bptt": 35, "learning_rate": 35.0, "global_clipnorm": 0.142857,
     "decay_after": 3, "units": 650, "dropout": 0.5, "init_scale": 0.05},
)

# --- Nth Farthest at equal wall clock (bench.nth_farthest) -------------------------------------------------

_NTH_BUDGET = {"budget_minutes": 84.0, "steps_per_round": 500, "batch_size": 64, "test_examples": 3000,
               "num_features": 4, "questions": [0], "curriculum": None, "mlp_layers": 4}
_NTH_RMC = {"model": "rmc", "learning_rate": 1e-3, "mem_slots": 4, "head_size": 64, "num_heads": 4, "num_blocks": 1}
_NTH_LSTM = {"model": "lstm", "learning_rate": 3e-3, "units": 256}
register(
    "nth_farthest_8_curriculum_rmc", "nth_farthest_budget", "rmc",
    "RMC on the paper's 8 objects of 16 features, 240 training minutes, with a curriculum (the farthest first, "
    "the next n once a round reaches 80% training accuracy); head size 32",
    "bench/results/nth_farthest_8objects_curriculum.json, its rmc_h32_curriculum run",
    "python -m bench.nth_farthest --recipe nth_farthest_8_curriculum_rmc",
    {**_NTH_BUDGET, **_NTH_RMC, "budget_minutes": 240.0, "num_objects": 8, "num_features": 16, "questions": None,
     "curriculum": 80.0, "head_size": 32},
    default=True,
)
register(
    "nth_farthest_8_curriculum_lstm", "nth_farthest_budget", "lstm",
    "LSTM (256 units, Adam 3e-3) on 8 objects of 16 features with the RMC's curriculum, 240 training minutes",
    "bench/results/nth_farthest_8objects_curriculum.json, its lstm_curriculum run",
    "python -m bench.nth_farthest --recipe nth_farthest_8_curriculum_lstm",
    {**_NTH_BUDGET, **_NTH_LSTM, "budget_minutes": 240.0, "num_objects": 8, "num_features": 16, "questions": None,
     "curriculum": 80.0},
    default=True,
)
register(
    "nth_farthest_6_rmc", "nth_farthest_budget", "rmc",
    "RMC on 6 objects of 4 features, the farthest only, 240 training minutes",
    "bench/results/nth_farthest_6objects.json, its rmc_farthest_seed1 and rmc_farthest_seed2 runs",
    "python -m bench.nth_farthest --recipe nth_farthest_6_rmc",
    {**_NTH_BUDGET, **_NTH_RMC, "budget_minutes": 240.0, "num_objects": 6},
)
register(
    "nth_farthest_6_lstm", "nth_farthest_budget", "lstm",
    "LSTM (256 units, Adam 3e-3, the best of our small grid on 4 objects) on 6 objects of 4 features, the "
    "farthest only, 84 training minutes",
    "bench/results/nth_farthest_6objects.json, its lstm_u256 runs (seeds 0-2)",
    "python -m bench.nth_farthest --recipe nth_farthest_6_lstm",
    {**_NTH_BUDGET, **_NTH_LSTM, "num_objects": 6},
)
register(
    "nth_farthest_4_rmc", "nth_farthest_budget", "rmc",
    "RMC on 4 objects of 4 features (Sonnet's example task), the farthest only, 84 training minutes",
    "bench/results/nth_farthest_4objects.json, its rmc_farthest_seed1 and rmc_farthest_seed2 runs",
    "python -m bench.nth_farthest --recipe nth_farthest_4_rmc",
    {**_NTH_BUDGET, **_NTH_RMC, "num_objects": 4},
)
register(
    "nth_farthest_4_lstm", "nth_farthest_budget", "lstm",
    "LSTM (256 units, Adam 3e-3) on 4 objects of 4 features, the farthest only, 84 training minutes",
    "bench/results/nth_farthest_4objects.json, its lstm_u256 runs (seeds 0-2)",
    "python -m bench.nth_farthest --recipe nth_farthest_4_lstm",
    {**_NTH_BUDGET, **_NTH_LSTM, "num_objects": 4},
)
