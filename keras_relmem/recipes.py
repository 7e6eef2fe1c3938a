"""Named recipes: the configuration behind each headline result, each paper's own set-up and the quick start.

A recipe is a config (`keras_relmem.configs`) with a name, a one-line summary
and its source (the paper's section, or the results file whose run measured
it). Derive your own with `dataclasses.replace`, train it with `kr.train`:

```python
import dataclasses, keras_relmem as kr
config = dataclasses.replace(kr.recipes.get("memo_babi_joint"), seed=3)
results = kr.train(config, workdir="runs/memo_seed3")
```

Each console script's `--recipe NAME` starts from one, and `--list-recipes`
prints them with the command that trains each. A model's default recipe
(what `--model NAME` trains) is its best measured one; the paper's is one
`--recipe` away.

Example:

```python
>>> from keras_relmem import recipes
>>> config = recipes.get("entnet_babi")
>>> config.model, config.schedule, config.tied_keys, config.recipe
('entnet', 'cyclic', True, 'entnet_babi')
>>> recipes.default(type(config), "entnet") == config
True
>>> "memo_babi_joint" in recipes.names()
True

```
"""

import dataclasses

from keras_relmem import configs

_REGISTRY = {}  # name -> config
_DEFAULTS = {}  # (config class, model) -> name


def register(name, config_class, summary, source, default=False, **settings):
    """Add the recipe `name`: `config_class(**settings)` with its summary and source. `default=True` makes it
    the recipe of its model that a command trains when only `--model` is given. Returns the config."""
    if name in _REGISTRY:
        raise ValueError(f"recipe {name!r} is already registered")
    config = config_class(recipe=name, summary=summary, source=source, **settings)
    if default:
        key = (config_class, config.model)
        if key in _DEFAULTS:
            raise ValueError(f"{config_class.__name__} of model {config.model!r} already has a default recipe")
        _DEFAULTS[key] = name
    _REGISTRY[name] = config
    return config


def get(name):
    """The config of recipe `name`; a KeyError lists the known names."""
    if name not in _REGISTRY:
        import difflib

        close = difflib.get_close_matches(str(name), _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"no recipe {name!r}{hint}; known recipes: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def names(config_class=None, model=None):
    """Registered names, optionally of one config class (or command, e.g. "relmem-train-babi") and model."""
    def chosen(config):
        kind = config_class in (None, type(config)) or config_class == config.command
        return kind and model in (None, config.model)

    return [name for name, config in _REGISTRY.items() if chosen(config)]


def default(config_class, model):
    """The default recipe of `model` for `config_class` (its best measured one), or None."""
    name = _DEFAULTS.get((config_class, model))
    return None if name is None else _REGISTRY[name]


def settings(name):
    """The fields recipe `name` sets away from its class's defaults: `{field: value}`."""
    config = get(name)
    plain = type(config)()
    return {k: v for k, (v, _) in config.differences(plain).items()}


def command(name):
    """The console command that trains recipe `name` (works from an installed wheel)."""
    config = get(name)
    if name == "quickstart":
        return config.command
    words = [config.command, "--recipe", name]
    if isinstance(config, configs.BabiConfig) and config.task != "all":
        words += ["--task", "N"]
    return " ".join(words)


def listing(command_name=None):
    """The recipes as text: name, model, summary, source and command, one block each; `command_name` (e.g.
    "relmem-train-babi") first, then every other command's under a heading."""
    def blocks(chosen):
        lines = []
        for name in chosen:
            config = get(name)
            marks = [m for m, on in (("quick start: the bare command", name == "quickstart"),
                                     (f"default of --model {config.model}", name in _DEFAULTS.values())) if on]
            lines += [f"{name}  [{config.model}{''.join(f'; {m}' for m in marks)}]", f"    {config.summary}",
                      f"    from: {config.source}", f"    run:  {command(name)}", ""]
        return lines

    mine = [n for n in _REGISTRY if command_name in (None, _REGISTRY[n].command)]
    lines = blocks(mine)
    rest = [n for n in _REGISTRY if n not in mine]
    if rest:
        lines += [f"Recipes of the other commands (not {command_name}):", ""] + blocks(rest)
    return "\n".join(lines).rstrip()


def replace(name, **changes):
    """`dataclasses.replace(get(name), **changes)` (a shorthand)."""
    return dataclasses.replace(get(name), **changes)


# --- bAbI, one model per task (relmem-train-babi) --------------------------------------------------------------

# The EntNet paper's optimisation (Henaff et al. 2017, §5.2): Adam 0.01, batch 32, gradient-norm clip 40,
# 200 epochs, the rate halved every 25 epochs.
_ENTNET_PAPER = {"model": "entnet", "learning_rate": 0.01, "batch_size": 32, "clipnorm": 40.0, "epochs": 200,
                 "halve_every": 25, "schedule": "step", "weight_decay": 0.0, "decay_scope": "all", "tied_keys": False,
                 "embedding_stddev": 0.1}
_ENTNET = {**_ENTNET_PAPER, "schedule": "cyclic", "weight_decay": 0.02, "decay_scope": "matrices", "tied_keys": True,
           "embedding_stddev": 0.3}
_STEP = {"learning_rate": 1e-3, "batch_size": 32, "clipnorm": 40.0, "epochs": 100, "halve_every": 25,
         "schedule": "step", "weight_decay": 0.0, "decay_scope": "all", "tied_keys": False}

register(
    "quickstart", configs.BabiConfig,
    "the quick start: the entnet_babi recipe on task 1 of the 1k set for 20 epochs (about a minute on 2 CPU "
    "cores); what relmem-train-babi runs with no flags",
    "entnet_babi, shortened", **{**_ENTNET, "task": 1, "data": "en", "epochs": 20},
)
register(
    "entnet_babi", configs.BabiConfig,
    "EntNet with tied keys, the TF port's cyclic rate, AdamW decay 0.02 on embeddings and kernels, N(0, 0.3) "
    "embeddings: the recipe that solved the most bAbI tasks on most seeds (200 epochs on en-10k)",
    "bench/entnet_babi/results/babi_entnet_seeds.json (5 seeds, run by bench.entnet_babi with a budget of 10 training "
    "minutes a task instead of 200 epochs)",
    default=True, **_ENTNET, data="en-10k",
)
register(
    "entnet_babi_paper", configs.BabiConfig,
    "EntNet as the paper trains it: Adam 0.01 halved every 25 epochs, untied keys, no decay, N(0, 0.1)",
    "Henaff et al. 2017, §5.2 and appendix", **_ENTNET_PAPER, data="en-10k",
)
register("rmc_babi", configs.BabiConfig,
         "RMC over the story's sentences: Adam 1e-3 halved every 25 epochs, 100 epochs",
         "our choice (the RMC paper has no bAbI experiment)", default=True, model="rmc", **_STEP)
register("lstm_babi", configs.BabiConfig, "LSTM baseline: Adam 1e-3 halved every 25 epochs, 100 epochs",
         "our choice (the EntNet paper's LSTM baseline, Henaff et al. 2017, Table 2)", default=True, model="lstm",
         **_STEP)
register("memo_babi", configs.BabiConfig,
         "MEMO on one task at a time: Adam 1e-3 halved every 25 epochs, 100 epochs, gradient-norm clip 10",
         "our choice; the joint recipe below is MEMO's measured one", default=True, model="memo",
         **{**_STEP, "clipnorm": 10.0})

# --- MEMO, joint bAbI (relmem-train-babi --model memo --task all --joint) ----------------------------------------

_MEMO_BABI_JOINT = {
    "data": "en-10k", "task_repeats": ("14=2", "17=4", "19=4"), "first_tasks": (1, 16), "first_tasks_rounds": 2,
    "first_tasks_learning_rate": 3e-4, "learning_rate": 3e-4, "learning_rate_from": ("65=1e-4",),
    "budget_minutes": 240.0, "starts": 3, "start_rounds": 2, "steps_per_round": 2000, "memory_size": 320,
    "batch_size": 32, "clipnorm": 10.0, "bag_init": True, "coverage_penalty": 5.0, "embedding_stddev": 1.0,
    "attention_dropout": 0.1, "answer_dropout": 0.1, "embedding_dim": 64, "num_heads": 4, "key_size": 32,
    "max_hops": 5, "halting_warmup_rounds": 12, "answer_loss": "all", "gamma": 1.0, "beta": 0.01,
    "halting_inputs": "distance+entropy", "warmup_answer_loss": "last", "answer_warmup_rounds": 2,
}
register(
    "memo_babi_joint", configs.BabiJointConfig,
    "MEMO, one model on all 20 tasks of en-10k, the joint bAbI headline (4 training hours, best of 3 starts, "
    "tasks 1 and 16 first, tasks 14, 17, 19 repeated, answer-loss and halting warm-ups, bag-of-words start, "
    "coverage penalty 5)",
    "bench/memo_babi/results/memo_babi.json (seed 0) and memo_babi_seed1.json (seed 1)",
    default=True, **_MEMO_BABI_JOINT,
)
register(
    "memo_babi_joint_paper", configs.BabiJointConfig,
    "MEMO, joint bAbI, as the paper describes it: Adam on MEMO, the distance alone as the halting input, answers "
    "trained on the visited hops, gamma 0.9; one start, no curriculum (on our runs this collapses the halting "
    "policy to one hop)",
    "Banino et al. 2020, §2.3 and appendix D (gamma from its D.3 search); docs/results.md (joint bAbI)",
    **{**_MEMO_BABI_JOINT, "task_repeats": (), "first_tasks": (), "first_tasks_rounds": None,
       "first_tasks_learning_rate": None, "learning_rate": 1e-3, "learning_rate_from": (), "starts": 1,
       "bag_init": False, "coverage_penalty": 0.0, "embedding_stddev": None, "answer_loss": "visited",
       "gamma": 0.9, "halting_inputs": "distance", "warmup_answer_loss": None, "answer_warmup_rounds": None,
       "halting_warmup_rounds": 0},
)

# --- Language modelling (relmem-train-lm) -----------------------------------------------------------------------

_LM = {"batch_size": 64, "bptt": 100, "learning_rate": 1e-3, "clipnorm": 0.25, "epochs": 10}
register("lm_ptb_rmc", configs.LMConfig,
         "RMC language model on PTB: Adam 1e-3, batch 64, BPTT 100, gradient-norm clip 0.25, 10 epochs",
         "bench/lm/results/ptb_lm_fair.json (the 'rmc' runs, seeds 0-2, trained for 120 minutes instead of epochs)",
         default=True, model="rmc", corpus="ptb", **_LM)
register("lm_ptb_lstm", configs.LMConfig,
         "LSTM language model on PTB with the RMC's optimisation (Adam 1e-3, batch 64, BPTT 100, clip 0.25)",
         "our choice, for a comparison at equal optimisation (Zaremba et al.'s SGD recipes are bench.lm's)",
         default=True, model="lstm", corpus="ptb", **_LM)

# --- Nth Farthest (relmem-train-nth-farthest) ------------------------------------------------------------------

_NTH = {"batch_size": 64, "learning_rate": 1e-3, "epochs": 20, "train_examples": 50_000, "num_objects": 8,
        "num_features": 16}
register("nth_farthest_rmc", configs.NthFarthestConfig,
         "RMC on Nth Farthest (8 objects of 16 features): 4 memories, 4 heads of 64, 1 block, Adam 1e-3, "
         "batch 64, 50,000 training examples for 20 epochs",
         "Santoro et al. 2018, §4.1 and Sonnet's relational_memory example (memories, heads, head size, blocks); "
         "the examples and epochs are ours for a CPU",
         default=True, model="rmc", mem_slots=4, head_size=64, num_heads=4, num_blocks=1, **_NTH)
register("nth_farthest_lstm", configs.NthFarthestConfig, "LSTM baseline on Nth Farthest: 512 units, Adam 1e-3, "
         "batch 64", "Santoro et al. 2018, §4.1 (the LSTM baseline); sizes ours",
         default=True, model="lstm", units=512, **_NTH)

# --- Learning to Execute (relmem-train-lte) --------------------------------------------------------------------

# Adam 3e-3 for the RMC and the LSTM: the rate the lte study's tuning chose for both (bench/lte/README.md); it
# lifted both on Program and Add more than any RMC size did. The EntNet cell was not tuned: Adam 1e-3.
register("lte_rmc", configs.LTEConfig,
         "RMC on Learning to Execute: Sonnet's rmc_learn_to_execute.py scaled to a CPU core (4 memories, 4 heads "
         "of 32, 1 block, a 2 x 256 head, batch 64, Adam 3e-3), the combine curriculum",
         "Santoro et al. 2018, Table 1; Sonnet's rmc_learn_to_execute.py (sizes scaled down, ours); the rate "
         "tuned (the lte study)", default=True, model="rmc", learning_rate=3e-3)
register("lte_lstm", configs.LTEConfig, "LSTM (256 units) on Learning to Execute, batch 64, Adam 3e-3",
         "Zaremba & Sutskever 2014 (the LSTM baseline); size ours, the rate tuned (the lte study)", default=True,
         model="lstm", learning_rate=3e-3)
register("lte_entnet", configs.LTEConfig, "The EntNet cell (20 blocks) on Learning to Execute, batch 64, Adam "
         "1e-3 (not tuned)", "ours (the EntNet paper has no Learning-to-Execute experiment)", default=True,
         model="entnet")
# --- MEMO, paired associative inference (relmem-train-memo --task pai) -------------------------------------

_PAI = {"budget_minutes": 60.0, "episodes": 20000, "curriculum": "4:30,8:10,16:1", "batch_size": 64,
        "embedding_size": 64, "learning_rate": 1e-3, "final_learning_rate": 1e-4, "halting_warmup": 40,
        "answer_loss": "all", "gamma": 1.0}
register(
    "memo_pai_length4", configs.PAIConfig,
    "MEMO on PAI length 4 (A-B-C-D): Adam 1e-3 on a cosine to 1e-4, halting network waits 40 rounds, reads "
    "distance and answer entropy",
    "bench/memo_pai/results/memo_pai_length4_entropy_cosine.json",
    **{**_PAI, "length": 4, "max_hops": 7, "beta": 0.01, "halting_inputs": "distance+entropy"},
)
register(
    "memo_pai_length5", configs.PAIConfig,
    "MEMO on PAI length 5 (A-...-E): as length 4 with no hop cost (beta 0) and the distance alone",
    "bench/memo_pai/results/memo_pai_length5_beta0_cosine.json and its seed 1",
    **{**_PAI, "length": 5, "max_hops": 9, "beta": 0.0, "halting_inputs": "distance"},
)
register(
    "memo_pai_paper", configs.PAIConfig,
    "MEMO on PAI as the paper describes it: answers trained on the visited hops, gamma 0.9, hop cost 0.01, "
    "constant Adam 1e-3, no halting warm-up (with the visited hops and gamma 0.9 our length-4 run's policy "
    "collapsed to one hop: memo_pai_length4_visited.json)",
    "Banino et al. 2020, §3.1 and appendix D",
    **{**_PAI, "length": 4, "max_hops": 7, "final_learning_rate": None, "halting_warmup": 0,
     "answer_loss": "visited", "gamma": 0.9, "beta": 0.01, "halting_inputs": "distance"},
)

# --- MEMO, shortest paths (relmem-train-memo --task shortest_path) -----------------------------------------

_PATHS = {"budget_minutes": 60.0, "graphs": 10000, "test": 2000, "embedding_dim": 64, "num_heads": 4,
          "key_size": 32, "max_hops": 7, "batch_size": 64, "learning_rate": 1e-3, "halting_warmup": 10,
          "answer_loss": "all", "gamma": 1.0, "halting_inputs": "distance"}
register(
    "memo_shortest_path", configs.ShortestPathConfig,
    "MEMO on shortest paths, 20 nodes, out-degree 3, paths of 3 (Table 2): Adam 1e-3, the halting network "
    "waits 10 rounds and reads the attention distance, 60 minutes",
    "bench/memo_shortest_path/results/memo_shortest_path.json, its 20/3/3 run (the hop cost was "
    "MEMOClassifier's 0.01, the default still, before the bench had a --beta flag)",
    **{"setting": "20/3/3", **_PATHS}, default=True,
)
register(
    "memo_shortest_path_20_5_3", configs.ShortestPathConfig,
    "MEMO on shortest paths, 20 nodes, out-degree 5, paths of 3 (Table 2): as 20/3/3",
    "bench/memo_shortest_path/results/memo_shortest_path.json, its 20/5/3 run",
    **{"setting": "20/5/3", **_PATHS, "beta": 0.01},
)
register(
    "memo_shortest_path_10_2_2", configs.ShortestPathConfig,
    "MEMO on shortest paths, 10 nodes, out-degree 2, paths of 2 (Table 2): as 20/3/3 with 5 hops, 5 minutes",
    "bench/memo_shortest_path/results/memo_shortest_path.json, its 10/2/2 run",
    **{"setting": "10/2/2", **_PATHS, "budget_minutes": 5.0, "max_hops": 5, "beta": 0.01},
)

# --- PTB at equal wall clock (relmem-train-lm --recipe ...: the RMC against Zaremba et al.'s LSTMs) --------

_PTB_ADAM = {"model": "rmc", "budget_minutes": 120.0, "batches_per_round": 20, "batch_size": 64, "bptt": 100,
             "learning_rate": 1e-3, "clipnorm": 0.25, "global_clipnorm": 0.0, "optimizer": "adam", "lr_decay": 1.0,
             "decay_after": 0, "keep_best": False, "units": None, "num_layers": None, "dropout": None,
             "init_scale": None, "untied": False}
# Zaremba et al. 2014 sum the loss over the BPTT steps; ours is the mean per token, so their SGD rate 1 and
# global clip 5 are rate `bptt` and clip 5 / bptt here (the same SGD updates).
_ZAREMBA = {**_PTB_ADAM, "model": "lstm", "batch_size": 20, "clipnorm": 0.0, "optimizer": "sgd", "lr_decay": 0.5,
            "num_layers": 2, "untied": True}
register(
    "lm_ptb_rmc_budget", configs.LMRoundsConfig,
    "RMC on PTB for 120 training minutes: lm_ptb_rmc's model and Adam recipe (1e-3, batch 64, BPTT 100, "
    "clip 0.25), validation after every 20 batches",
    "bench/lm/results/ptb_lm_fair.json, its rmc, rmc_seed1 and rmc_seed2 runs", **_PTB_ADAM, default=True,
)
register(
    "lm_ptb_rmc_early_stop", configs.LMRoundsConfig,
    "RMC on PTB stopped early: as lm_ptb_rmc_budget for 98 minutes, testing the round with the best validation "
    "perplexity (the RMC over-fits PTB after about an hour on one core)",
    "bench/lm/results/ptb_lm_fair.json, its rmc_keep_best runs (seeds 0-2)",
    **{**_PTB_ADAM, "budget_minutes": 98.0, "keep_best": True},
)
register(
    "lm_ptb_lstm_zaremba_small", configs.LMRoundsConfig,
    "Zaremba et al.'s small LSTM (2 x 200, no dropout, untied softmax, uniform init 0.1): SGD rate 1 (20 per "
    "token) halved every epoch after 4, global clip 5, batch 20, BPTT 20, 120 training minutes",
    "Zaremba et al. 2014, §4.1 (their small model); bench/lm/results/ptb_lm_fair.json, its lstm_zaremba_small runs",
    **{**_ZAREMBA, "batches_per_round": 2323, "bptt": 20, "learning_rate": 20.0, "global_clipnorm": 0.25,
     "decay_after": 4, "units": 200, "init_scale": 0.1},
    default=True,
)
register(
    "lm_ptb_lstm_zaremba_medium", configs.LMRoundsConfig,
    "Zaremba et al.'s medium LSTM (2 x 650, dropout 0.5, untied softmax, uniform init 0.05): SGD rate 1 (35 per "
    "token) halved every epoch after 3, global clip 5, batch 20, BPTT 35, 120 training minutes",
    "Zaremba et al. 2014, §4.1 (their medium model); bench/lm/results/ptb_lm_fair.json, its lstm_zaremba_medium runs",
    **{**_ZAREMBA, "batches_per_round": 332, "bptt": 35, "learning_rate": 35.0, "global_clipnorm": 0.142857,
     "decay_after": 3, "units": 650, "dropout": 0.5, "init_scale": 0.05},
)

# --- Nth Farthest at equal wall clock (relmem-train-nth-farthest --recipe ...) ------------------------------

_NTH_BUDGET = {"budget_minutes": 84.0, "steps_per_round": 500, "batch_size": 64, "test_examples": 3000,
               "num_features": 4, "questions": [0], "curriculum": None, "mlp_layers": 4}
_NTH_RMC = {"model": "rmc", "learning_rate": 1e-3, "mem_slots": 4, "head_size": 64, "num_heads": 4, "num_blocks": 1}
_NTH_LSTM = {"model": "lstm", "learning_rate": 3e-3, "units": 256}
register(
    "nth_farthest_8_curriculum_rmc", configs.NthFarthestRoundsConfig,
    "RMC on the paper's 8 objects of 16 features, 240 training minutes, with a curriculum (the farthest first, "
    "the next n once a round reaches 80% training accuracy); head size 32",
    "bench/nth_farthest/results/nth_farthest_8objects_curriculum.json, its rmc_h32_curriculum run",
    **{**_NTH_BUDGET, **_NTH_RMC, "budget_minutes": 240.0, "num_objects": 8, "num_features": 16, "questions": None,
     "curriculum": 80.0, "head_size": 32},
    default=True,
)
register(
    "nth_farthest_8_curriculum_lstm", configs.NthFarthestRoundsConfig,
    "LSTM (256 units, Adam 3e-3) on 8 objects of 16 features with the RMC's curriculum, 240 training minutes",
    "bench/nth_farthest/results/nth_farthest_8objects_curriculum.json, its lstm_curriculum run",
    **{**_NTH_BUDGET, **_NTH_LSTM, "budget_minutes": 240.0, "num_objects": 8, "num_features": 16, "questions": None,
     "curriculum": 80.0},
    default=True,
)
register(
    "nth_farthest_6_rmc", configs.NthFarthestRoundsConfig,
    "RMC on 6 objects of 4 features, the farthest only, 240 training minutes",
    "bench/nth_farthest/results/nth_farthest_6objects.json, its rmc_farthest_seed1 and rmc_farthest_seed2 runs",
    **{**_NTH_BUDGET, **_NTH_RMC, "budget_minutes": 240.0, "num_objects": 6},
)
register(
    "nth_farthest_6_lstm", configs.NthFarthestRoundsConfig,
    "LSTM (256 units, Adam 3e-3, the best of our small grid on 4 objects) on 6 objects of 4 features, the "
    "farthest only, 84 training minutes",
    "bench/nth_farthest/results/nth_farthest_6objects.json, its lstm_u256 runs (seeds 0-2)",
    **{**_NTH_BUDGET, **_NTH_LSTM, "num_objects": 6},
)
register(
    "nth_farthest_4_rmc", configs.NthFarthestRoundsConfig,
    "RMC on 4 objects of 4 features (Sonnet's example task), the farthest only, 84 training minutes",
    "bench/nth_farthest/results/nth_farthest_4objects.json, its rmc_farthest_seed1 and rmc_farthest_seed2 runs",
    **{**_NTH_BUDGET, **_NTH_RMC, "num_objects": 4},
)
register(
    "nth_farthest_4_lstm", configs.NthFarthestRoundsConfig,
    "LSTM (256 units, Adam 3e-3) on 4 objects of 4 features, the farthest only, 84 training minutes",
    "bench/nth_farthest/results/nth_farthest_4objects.json, its lstm_u256 runs (seeds 0-2)",
    **{**_NTH_BUDGET, **_NTH_LSTM, "num_objects": 4},
)
