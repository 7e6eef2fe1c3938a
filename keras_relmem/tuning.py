"""KerasTuner HyperModels for the memory models and the search behind `tuning/search.py`.

Search spaces follow the papers' sweeps, trimmed to a CPU budget: EntNet's
learning-rate grid {0.1, 0.01, 0.001} and block counts; the RMC's memory
slots, heads, head size, blocks and gate style; MEMO's appendix D.3 (max hops,
gamma, alpha, beta, bias_init, heads, both learning rates); the LSTM's size and
learning rate. Distributed tuning is KerasTuner's own: set
`KERASTUNER_TUNER_ID` (`chief` for the oracle), `KERASTUNER_ORACLE_IP` and
`KERASTUNER_ORACLE_PORT` on every process.
"""

import dataclasses

import keras
import keras_tuner as kt

from keras_relmem.models import build_babi_model, language_model

TUNERS = ("random", "bayesian", "hyperband")


def _entnet_space(hp):
    return ({"num_blocks": hp.Choice("num_blocks", [10, 20], default=20),
             "embedding_dim": hp.Choice("embedding_dim", [50, 100], default=100)},
            hp.Choice("learning_rate", [0.1, 0.01, 0.001], default=0.01))


def _rmc_space(hp):
    return ({"mem_slots": hp.Choice("mem_slots", [1, 2, 4], default=4),
             "num_heads": hp.Choice("num_heads", [1, 2, 4], default=2),
             "head_size": hp.Choice("head_size", [16, 32, 64], default=32),
             "num_blocks": hp.Choice("num_blocks", [1, 2], default=1),
             "gate_style": hp.Choice("gate_style", ["unit", "memory"], default="unit")},
            hp.Choice("learning_rate", [1e-3, 3e-4], default=1e-3))


def _memo_space(hp):
    from keras_relmem.layers import HaltingPolicy

    policy = HaltingPolicy(gamma=hp.Choice("gamma", [0.9, 0.99, 1.0], default=1.0),
                           alpha=hp.Choice("alpha", [0.01, 0.1, 1.0], default=0.1),
                           beta=hp.Choice("beta", [0.0, 0.01, 0.1], default=0.01),
                           bias_init=hp.Choice("bias_init", [-3.0, -1.0, 0.0], default=-3.0))
    return ({"max_hops": hp.Choice("max_hops", [3, 5, 10], default=5),
             "num_heads": hp.Choice("num_heads", [1, 2, 4], default=4),
             "halting": policy,
             "halting_learning_rate": hp.Choice("halting_learning_rate", [1e-4, 1e-3], default=1e-4)},
            hp.Choice("learning_rate", [1e-3, 3e-4], default=1e-3))


def _lstm_space(hp):
    return ({"embedding_dim": hp.Choice("embedding_dim", [32, 64], default=64)},
            hp.Choice("learning_rate", [1e-3, 3e-3], default=1e-3))


# Each bAbI model's search space: its published set-up first (the defaults a search starts from).
BABI_SPACES = {"entnet": _entnet_space, "rmc": _rmc_space, "memo": _memo_space, "lstm": _lstm_space}
# The language models': their sizes.
LM_SPACES = {"rmc": lambda hp: {"head_size": hp.Choice("head_size", [64, 128, 192]),
                                "num_heads": hp.Choice("num_heads", [2, 4]),
                                "mem_slots": hp.Choice("mem_slots", [1, 2])},
             "lstm": lambda hp: {"units": hp.Choice("units", [256, 512, 1000])}}


def babi_search_space(hp, model):
    """The hyper-parameters of one bAbI model: `(model kwargs, learning rate)`."""
    if model not in BABI_SPACES:
        raise ValueError(f"No search space for model {model!r}.")
    return BABI_SPACES[model](hp)


# What a search centred on a recipe varies, and by which factors of the recipe's value.
CENTRED = {"learning_rate": (1 / 3, 1.0, 3.0), "weight_decay": (0.5, 1.0, 2.0), "embedding_stddev": (0.5, 1.0, 2.0)}


def recipe_search_space(hp, recipe):
    """A search centred on a recipe (a `keras_relmem.configs.BabiConfig`, e.g. `recipes.get("entnet_babi")`):
    each of its `CENTRED` fields that is a positive number becomes a choice of that value times the factors,
    starting at the recipe's own value; every other field stays the recipe's. Returns the recipe's config
    with the trial's values (a searched rate below the cyclic schedule's floor lowers the floor with it)."""
    searched = {}
    for name, factors in CENTRED.items():
        value = getattr(recipe, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            searched[name] = hp.Choice(name, [float(f"{value * f:.3g}") for f in factors], default=float(value))
    if "learning_rate" in searched:
        searched["min_learning_rate"] = min(recipe.min_learning_rate, searched["learning_rate"])
    return dataclasses.replace(recipe, **searched)


class BabiHyperModel(kt.HyperModel):
    """A bAbI QA model (`entnet`, `rmc`, `lstm` or `memo`) for KerasTuner.

    Args:
        model: the model name.
        data: the `BabiData` to train and validate on.
        batch_size: int (default 32).
        max_steps: optional cap of steps per epoch (smoke tests).
        recipe: optional `keras_relmem.configs.BabiConfig` of this model (a
            recipe, `keras_relmem.recipes.get(name)`): trials build and train
            as `kr.train` does with that config, its `CENTRED` fields
            searched around its values (`recipe_search_space`); None: the
            papers' sweep (`babi_search_space`).

    Example:

    ```python
    tuner = kt.RandomSearch(BabiHyperModel("entnet", data), objective="val_accuracy",
                            max_trials=10)
    tuner.search(epochs=20)
    ```
    """

    def __init__(self, model, data, batch_size=32, max_steps=None, recipe=None):
        super().__init__(name=f"babi_{model}")
        self.model_name = model
        self.data = data
        self.batch_size = batch_size
        self.max_steps = max_steps
        from keras_relmem.configs import BabiConfig

        if recipe is not None and (type(recipe), recipe.model) != (BabiConfig, model):
            raise ValueError(f"recipe {recipe.recipe!r} is not a one-model-per-task bAbI config of {model!r}")
        self.recipe = recipe
        self._schedule = []

    def build(self, hp):
        from keras_relmem.tasks import babi

        if self.recipe is not None:
            config = recipe_search_space(hp, self.recipe)
            steps = max(1, len(self.data.story_lengths("train")) // self.batch_size)
            optimizer, self._schedule = babi.optimizer_and_schedule(config, steps)
            return babi.compile_model(babi.build_model(config, self.data), optimizer)
        kwargs, learning_rate = babi_search_space(hp, self.model_name)
        model = build_babi_model(
            self.model_name, len(self.data.vocab), len(self.data.answer_vocab),
            self.data.story_length, self.data.sentence_length, self.data.query_length, **kwargs,
        )
        return babi.compile_model(model, keras.optimizers.Adam(learning_rate, clipnorm=40.0))

    def fit(self, hp, model, *args, **kwargs):
        train = self.data.dataset("train", self.batch_size)
        validation = self.data.dataset("validation", 256)
        if self.max_steps:
            train, validation = train.take(self.max_steps), validation.take(self.max_steps)
        kwargs.setdefault("verbose", 0)
        kwargs["callbacks"] = list(kwargs.get("callbacks", [])) + list(self._schedule)
        return model.fit(train, validation_data=validation, shuffle=False, **kwargs)


class LMHyperModel(kt.HyperModel):
    """A language model (`rmc` or `lstm`) on an `LMCorpus`, windowed (not stateful) batches."""

    def __init__(self, model, corpus, batch_size=32, window=35, max_steps=None):
        super().__init__(name=f"lm_{model}")
        self.model_name = model
        self.corpus = corpus
        self.batch_size = batch_size
        self.window = window
        self.max_steps = max_steps

    def build(self, hp):
        kwargs = LM_SPACES[self.model_name](hp)
        model = language_model.build_language_model(self.model_name, len(self.corpus.vocab), **kwargs)
        model.compile(
            keras.optimizers.Adam(hp.Choice("learning_rate", [1e-3, 3e-4]), clipnorm=0.25),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model

    def fit(self, hp, model, *args, **kwargs):
        train = self.corpus.window_dataset("train", self.batch_size, self.window)
        valid = self.corpus.window_dataset("valid", self.batch_size, self.window, shuffle=False)
        if self.max_steps:
            train, valid = train.take(self.max_steps), valid.take(self.max_steps)
        kwargs.setdefault("verbose", 0)
        return model.fit(train, validation_data=valid, shuffle=False, **kwargs)


def make_tuner(kind, hypermodel, objective, max_trials, directory, project_name, overwrite=False, seed=0):
    """A KerasTuner tuner; with `overwrite=False` an existing search continues."""
    common = dict(
        hypermodel=hypermodel, objective=objective, directory=str(directory),
        project_name=project_name, overwrite=overwrite, seed=seed,
    )
    if kind == "random":
        return kt.RandomSearch(max_trials=max_trials, **common)
    if kind == "bayesian":
        return kt.BayesianOptimization(max_trials=max_trials, **common)
    if kind == "hyperband":
        # Hyperband sets its own trial count from the epoch budget.
        return kt.Hyperband(max_epochs=max(2, max_trials), factor=3, **common)
    raise ValueError(f"tuner must be one of {TUNERS}; received {kind!r}.")
