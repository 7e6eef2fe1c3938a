"""Task configurations: one frozen dataclass per task family, every field typed, documented and checked.

A configuration says *what* to train: the model and its size, the data, the
optimisation and the budget. `kr.train(config, workdir=...)` trains it (the
workdir and the run's controls, such as progress output or export, are the
call's arguments, not the config's). The named recipes
(`keras_relmem.recipes`) are instances of these classes, and each console
script builds its flags from one of them: a field `learning_rate` is the flag
`--learning-rate`, with the field's type, default and help.

Construction checks every field (its type, and the values it accepts) and the
fields' combinations; an unknown field or a bad value is a `ValueError` that
names the field and what it accepts. Configs are frozen: derive one with
`dataclasses.replace` (checked again) or `Config.from_dict`.

Example:

```python
>>> import dataclasses
>>> from keras_relmem import configs
>>> config = configs.BabiConfig(model="rmc", task=2, epochs=5)
>>> dataclasses.replace(config, seed=3).seed
3
>>> configs.BabiConfig(model="rmc", epochs=0)
Traceback (most recent call last):
...
ValueError: BabiConfig.epochs: expected an integer >= 1; got 0
>>> configs.BabiConfig.from_dict({"model": "rmc", "epoch": 5})
Traceback (most recent call last):
...
ValueError: BabiConfig has no field 'epoch' (did you mean 'epochs'?); its fields: ...

```
"""

import dataclasses
import difflib
import types
import typing
from typing import ClassVar, Literal

from keras_relmem.data.babi import DATASETS as BABI_DATASETS
from keras_relmem.data.babi import TASK_NAMES as BABI_TASKS
from keras_relmem.data.lm import CORPORA
from keras_relmem.data.lte import CURRICULA as LTE_CURRICULA
from keras_relmem.data.lte import STYLES as LTE_STYLES
from keras_relmem.data.lte import TASKS as LTE_TASKS
from keras_relmem.data.renaming import INTERCHANGEABLE_WORDS

# (test, what it accepts) pairs for `setting(check=...)`; a None value skips the test.
POSITIVE = (lambda v: 0 < v < float("inf"), "> 0 and finite")
AT_LEAST_ONE = (lambda v: v >= 1, ">= 1")
NON_NEGATIVE = (lambda v: v >= 0, ">= 0")
FRACTION = (lambda v: 0 <= v < 1, "in [0, 1)")
UNIT = (lambda v: 0 < v <= 1, "in (0, 1]")


def setting(default, help, check=None, resume=False, model=False):
    """A config field: its default, its help (shown by the command's `--help`), an optional `check` pair
    (`POSITIVE`, ...) applied to the value (to each item of a tuple), whether a resumed run may change it
    (`resume=True`, e.g. a budget; any other change to a run's recorded config is refused), and whether it is a
    setting of the model, passed to the model's builder under the field's own name (`model=True`;
    `Config.model_settings`)."""
    return dataclasses.field(default=default, metadata={"help": help, "check": check, "resume": resume,
                                                        "model": model})


_setting = setting  # for a class with a field called `setting` (ShortestPathConfig)


def _describe(kind):
    """What a type annotation accepts, in words."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else _describe(a) for a in args)
    if origin is tuple:
        return "a list of " + {int: "integers", float: "numbers", str: "strings"}.get(args[0], _describe(args[0]))
    return {int: "an integer", float: "a number", bool: "True or False", str: "a string"}[kind]


def _coerce(kind, value):
    """`value` as `kind` (an int for a float, a list for a tuple), or raise TypeError."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Literal:
        if value in args and not (isinstance(value, bool) and bool not in map(type, args)):
            return value
        raise TypeError
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in args:
            if option is type(None):
                continue
            try:
                return _coerce(option, value)
            except TypeError:
                pass
        raise TypeError
    if origin is tuple:
        if isinstance(value, (list, tuple)):
            return tuple(_coerce(args[0], item) for item in value)
        raise TypeError
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, bool):
        raise TypeError
    if isinstance(value, kind):
        return value
    raise TypeError


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """What every configuration has: its recipe's name, summary and source (set by `keras_relmem.recipes`;
    not compared, so a recipe and the same settings typed out are equal), and the checks.

    Subclasses name their console script (`command`) and add `check()` for the fields' combinations.
    """

    command: ClassVar[str] = ""
    RENAMED: ClassVar[dict] = {}  # a field's earlier name -> (values of the new fields from the old value, new flags)
    recipe: str | None = dataclasses.field(default=None, compare=False, metadata={"cli": False})
    summary: str = dataclasses.field(default="", compare=False, repr=False, metadata={"cli": False})
    source: str = dataclasses.field(default="", compare=False, repr=False, metadata={"cli": False})

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            kind = hints[field.name]
            try:
                coerced = _coerce(kind, value)
            except TypeError:
                raise ValueError(f"{type(self).__name__}.{field.name}: expected {_describe(kind)}; "
                                 f"got {value!r}") from None
            object.__setattr__(self, field.name, coerced)
            check = field.metadata.get("check")
            items = coerced if isinstance(coerced, tuple) else (coerced,)
            if check and any(item is not None and not check[0](item) for item in items):
                bound = check[1].startswith((">", "<", "in "))  # a bound on the type's values, else the whole
                if isinstance(coerced, tuple):
                    what = f"{_describe(kind)} (each item {check[1]})"
                else:
                    what = f"{_describe(kind).replace(' or None', '')} {check[1]}" if bound else check[1]
                raise ValueError(f"{type(self).__name__}.{field.name}: expected {what}; got {value!r}")
        self.check()

    def check(self):
        """Refuse impossible combinations of fields (a `ValueError` naming them)."""

    def fail(self, message):
        raise ValueError(f"{type(self).__name__}: {message}")

    @classmethod
    def settings(cls):
        """The fields a user sets (every field but the recipe's name, summary and source)."""
        return [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]

    @classmethod
    def from_dict(cls, values):
        """A config from `{field: value}` (e.g. a workdir's `config.json`); an unknown field is a ValueError
        that names it and lists the fields."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = dict(values)
        for old, (convert, _) in cls.RENAMED.items():
            if old in values:
                values.update(convert(values.pop(old)))
        for name in values:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"{cls.__name__} has no field {name!r}{hint}; its fields: "
                                 f"{', '.join(f.name for f in cls.settings())}")
        return cls(**values)

    def to_dict(self):
        """`{field: value}` of every setting (lists for tuples), as JSON writes it."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in self.settings()}

    def model_settings(self):
        """`{name: value}` of the fields that are the model's settings (`setting(model=True)`), under the
        argument names of the model builder that takes them; None leaves a setting at the model's default."""
        return {f.name: getattr(self, f.name) for f in self.settings() if f.metadata.get("model")}

    def differences(self, other):
        """`{field: (self's, other's)}` of the settings that differ."""
        return {f.name: (getattr(self, f.name), getattr(other, f.name)) for f in self.settings()
                if getattr(self, f.name) != getattr(other, f.name)}


# --- shared field definitions --------------------------------------------------------------------------------

def _seed():
    return setting(0, "random seed: initial weights and data order")


def _data_dir():
    return setting(None, "local data folder (None: $KERAS_RELMEM_DATA; downloads only when neither is set)",
                   (lambda v: v.strip() != "", "a folder's path, not empty (leave it out for $KERAS_RELMEM_DATA)"))


def _budget(default=None, help="stop training after this many training minutes, whatever the epochs say"):
    return setting(default, help, POSITIVE, resume=True)


def _babi_task(value):
    return value == "all" or value in BABI_TASKS


# --- bAbI, one model per task -------------------------------------------------------------------------------

BabiModel = Literal["entnet", "lstm", "memo", "rmc"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class BabiConfig(Config):
    """bAbI question answering, one model per task (or, with `joint`, one on all of them), trained for epochs.

    The class defaults are neutral (Adam 1e-3 halved every 25 epochs, valid for every model); the measured
    settings of each model are its recipe (`keras_relmem.recipes.get("entnet_babi")`).

    Example:

    ```python
    >>> from keras_relmem.configs import BabiConfig
    >>> BabiConfig(model="entnet", task=3, data="en").task
    3
    >>> BabiConfig(model="entnet", max_hops=3)
    Traceback (most recent call last):
    ...
    ValueError: BabiConfig: max_hops is a MEMO setting; model is 'entnet'

    ```
    """

    command: ClassVar[str] = "relmem-train-babi"
    model: BabiModel = setting("entnet", "the model: entnet, lstm, memo or rmc")
    task: int | Literal["all"] = setting(1, "bAbI task 1..20, or 'all'", (_babi_task, "1..20 or 'all'"))
    joint: bool = setting(False, "one model on all the given tasks (MEMO: see the memo_babi_joint recipe)")
    data: Literal[BABI_DATASETS] = setting("en", "en: 1k questions per task; en-10k: 10k")
    data_dir: str | None = _data_dir()
    memory_size: int | None = setting(None, "most recent sentences kept per story (None: 70; 130 with task 3)",
                                      AT_LEAST_ONE)
    validation_split: float = setting(0.1, "share of the training questions held out for validation", FRACTION)
    epochs: int = setting(100, "training epochs", AT_LEAST_ONE, resume=True)
    budget_minutes: float | None = _budget(help="stop each model's training after this many minutes, whatever "
                                                "the epochs say (the EntNet table's runs had 10)")
    batch_size: int = setting(32, "global batch size", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's learning rate (the peak with schedule 'cyclic')", POSITIVE)
    schedule: Literal["step", "plateau", "cyclic"] = setting(
        "step", "step: halve every halve_every epochs (the papers'); plateau: halve after patience epochs without "
                "a better validation loss; cyclic: triangular cycles from min_learning_rate up to learning_rate "
                "and back (the EntNet TF port's)")
    halve_every: int = setting(25, "step: halve the learning rate every this many epochs", AT_LEAST_ONE)
    patience: int = setting(3, "plateau: epochs to wait", AT_LEAST_ONE)
    min_learning_rate: float = setting(2e-4, "cyclic: the rate between peaks", POSITIVE)
    half_cycle_epochs: float = setting(10.0, "cyclic: epochs from trough to peak", POSITIVE)
    clipnorm: float | None = setting(40.0, "gradient-norm clip of each variable", POSITIVE)
    weight_decay: float = setting(0.0, "decoupled weight decay, as AdamW: each step every weight shrinks by the "
                                       "learning rate times this of itself (0 in the papers)", NON_NEGATIVE)
    decay_scope: Literal["all", "matrices"] = setting(
        "all", "which weights weight_decay shrinks: all, or only embeddings and kernels (not positional masks, "
               "PReLU slopes or biases)")
    embedding_stddev: float | None = setting(None, "EntNet: the word embeddings' (and tied keys') initial "
                                                   "N(0, stddev) (None: Keras' default)", POSITIVE)
    embedding_dim: int | None = setting(None, "word embedding size (None: the model's default, EntNet 100)",
                                        AT_LEAST_ONE, model=True)
    num_blocks: int | None = setting(None, "EntNet memory blocks / RMC attention blocks", AT_LEAST_ONE, model=True)
    tied_keys: bool = setting(False, "EntNet: one memory block per entity word of the task, its key and initial "
                                     "memory that word's embedding (the authors' -tied 1); overrides num_blocks")
    mem_slots: int | None = setting(None, "RMC memory slots", AT_LEAST_ONE, model=True)
    num_heads: int | None = setting(None, "RMC or MEMO attention heads", AT_LEAST_ONE, model=True)
    head_size: int | None = setting(None, "RMC head size", AT_LEAST_ONE, model=True)
    max_hops: int | None = setting(None, "MEMO's hard stop N (default 5)", AT_LEAST_ONE, model=True)
    restore_best: bool = setting(False, "test the weights of the epoch with the lowest validation loss, not the "
                                        "last epoch's")
    buckets: bool = setting(True, "EntNet and MEMO on one replica: batch stories of similar length, padded to "
                                  "their bucket, rather than padding every batch to the memory window")
    seed: int = _seed()

    def check(self):
        _core_fields(self, {"entnet": ("tied_keys", "embedding_stddev"), "entnet|rmc": ("num_blocks",),
                            "rmc": ("mem_slots", "head_size"), "rmc|memo": ("num_heads",), "memo": ("max_hops",)})
        if self.restore_best and self.validation_split == 0:
            self.fail("restore_best picks the epoch by its validation loss; validation_split is 0")
        if self.schedule == "plateau" and self.validation_split == 0:
            self.fail("schedule 'plateau' watches the validation loss; validation_split is 0")
        if self.schedule == "cyclic" and self.min_learning_rate > self.learning_rate:
            self.fail(f"schedule 'cyclic' runs from min_learning_rate {self.min_learning_rate} up to "
                      f"learning_rate {self.learning_rate}: need min <= max")

    @property
    def tasks(self):
        """The task numbers `task` names."""
        return list(BABI_TASKS) if self.task == "all" else [self.task]


# --- bAbI, MEMO's joint run in rounds ------------------------------------------------------------------------

def _keyed(form, allowed, needs):
    """A check of one KEY=VALUE item (`form` e.g. 'TASK=K'), the key an int."""
    def test(item):
        key, sep, value = item.partition("=")
        try:
            return bool(sep) and allowed(int(key), float(value))
        except ValueError:
            return False
    return test, f"of the form {form} with {needs}"


ANSWER_LOSSES = ("all", "visited", "last", "halted", "halted+last")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Halting:
    """MEMO's REINFORCE settings (Banino et al. 2020, §2.3), MEMOClassifier's defaults: the ones that kept the
    halting policy from collapsing to one hop on joint bAbI and PAI (docs/results.md)."""

    answer_loss: Literal[ANSWER_LOSSES] = setting(
        "all", "hops whose answers the cross-entropy trains: 'visited' let the policy collapse to one hop; "
               "'last' trains hop N's alone, 'halted' the sampled halting hop's", resume=True)
    gamma: float = setting(1.0, "REINFORCE discount", UNIT, resume=True)
    beta: float = setting(0.01, "weight of the expected-hops loss (a cost per hop)", NON_NEGATIVE, resume=True)
    halting_inputs: Literal["distance", "distance+entropy"] = setting(
        "distance+entropy", "what the halting network reads each hop with the hop index: the attention distance "
                            "and the entropy of the hop's answer, or the paper's distance alone")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BabiJointConfig(_Halting, Config):
    """MEMO on bAbI in the paper's joint set-up (Banino et al. 2020, Table 3): one model on the tasks together,
    trained in rounds of `steps_per_round` batches under a wall-clock budget; after every round the per-task
    test error and mean hops are measured and everything is saved, so a rerun continues.

    Class defaults are the plain trainer's; `keras_relmem.recipes.get("memo_babi_joint")` is the headline.

    Example:

    ```python
    >>> from keras_relmem.configs import BabiJointConfig
    >>> BabiJointConfig(tasks=(1, 16), first_tasks=(16,)).first_tasks
    (16,)
    >>> BabiJointConfig(task_repeats=("17=0",))
    Traceback (most recent call last):
    ...
    ValueError: BabiJointConfig.task_repeats: expected a list of strings (each item of the form TASK=K with K >= 1); \
got ('17=0',)

    ```
    """

    command: ClassVar[str] = "relmem-train-babi"
    # 1.1's names of fields that now carry MEMO's argument names: old name -> (its value as the new fields, the
    # flags that replace the old flag)
    RENAMED: ClassVar[dict] = {
        "per_hop_weights": (lambda v: {"share_hop_weights": not v}, "--no-share-hop-weights"),
        "no_time": (lambda v: {"time_encoding": not v}, "--no-time-encoding"),
        "dropout": (lambda v: {"attention_dropout": v, "answer_dropout": v},
                    "--attention-dropout and --answer-dropout"),
    }
    model: Literal["memo"] = setting("memo", "the model (MEMO only)")
    task: int | Literal["all"] = setting("all", "'all', or one task 1..20 (see tasks)",
                                         (_babi_task, "1..20 or 'all'"))
    joint: Literal[True] = setting(True, "one model on all the given tasks (always, here)")
    data: Literal[BABI_DATASETS] = setting("en-10k", "10k questions per task (task 3: its 1k files) or 1k")
    data_dir: str | None = _data_dir()
    tasks: tuple[int, ...] = setting((), "train and test on these tasks only (empty: all 20, the paper's set-up)",
                                     (lambda t: t in BABI_TASKS, "1..20"))
    task_repeats: tuple[str, ...] = setting(
        (), "put these tasks' training questions K times in every pass (TASK=K items, e.g. 17=4): the tasks a "
            "joint run learns slowest get more steps", _keyed("TASK=K", lambda t, k: k >= 1 and k == int(k),
                                                              "K >= 1"))
    first_tasks: tuple[int, ...] = setting(
        (), "a curriculum: train on these tasks alone for the first first_tasks_rounds rounds, then on every "
            "task (evaluation always covers every task); kept to the trained tasks",
        (lambda t: t in BABI_TASKS, "1..20"))
    first_tasks_rounds: int | None = setting(
        None, "rounds trained on first_tasks alone (None: 1 with first_tasks; ignored without them)", NON_NEGATIVE)
    first_tasks_learning_rate: float | None = setting(
        None, "Adam's rate in the first_tasks rounds (None: learning_rate; ignored without first_tasks)", POSITIVE,
        resume=True)
    learning_rate_from: tuple[str, ...] = setting(
        (), "Adam's rate from these rounds on (ROUND=RATE items, e.g. 65=1e-4; learning_rate before the first)",
        _keyed("ROUND=RATE", lambda r, rate: r >= 0 and rate > 0, "ROUND >= 0 and RATE > 0"), resume=True)
    rename_words: tuple[int, ...] = setting(
        (), "rename these tasks' interchangeable words (people, objects, places) consistently within each "
            "training question, so stories cannot be learnt by their names", (
                lambda t: t in INTERCHANGEABLE_WORDS, f"one of {sorted(INTERCHANGEABLE_WORDS)}"))
    budget_minutes: float = _budget(120.0, "training minutes of the whole run, every start's included")
    starts: int = setting(1, "train this many starts (initial weights and data order; the first is seed's own) "
                             "for start_rounds rounds each, then go on with the one of lowest training error",
                          AT_LEAST_ONE)
    start_rounds: int = setting(2, "rounds each of the starts trains before the choice", AT_LEAST_ONE)
    steps_per_round: int = setting(400, "training batches between evaluations", AT_LEAST_ONE)
    memory_size: int = setting(320, "most recent sentences kept per story (320 keeps every story whole)",
                               AT_LEAST_ONE)
    batch_size: int = setting(32, "batch size", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's rate for MEMO (a resumed run goes on at this rate)", POSITIVE,
                                   resume=True)
    clipnorm: float = setting(10.0, "gradient-norm clip of each variable", POSITIVE)
    weight_decay: float = setting(0.0, "AdamW's decoupled weight decay on MEMO's weights (0: plain Adam)",
                                  NON_NEGATIVE)
    decay_scope: Literal["all", "matrices"] = setting("matrices", "with weight_decay: every weight, or embeddings "
                                                                  "and kernels only")
    time_noise: float = setting(0.0, "age the training facts as if an empty sentence followed each with this "
                                     "probability (end-to-end memory networks' random noise)", FRACTION)
    linear_start_rounds: int = setting(0, "train the first rounds with the softmax taken out of the attention "
                                          "(end-to-end memory networks' linear start)", NON_NEGATIVE)
    bag_init: bool = setting(False, "MEMO(kernel_initializer='bags'): keys, values and query start as one "
                                    "projection of their summed words")
    share_hop_weights: bool = setting(True, "every hop shares MEMO's W_q and W_h (False: each hop its own)")
    logit_scale: float | None = setting(None, "MEMO(logit_scale=S): cosine attention logits times a learned scale "
                                              "per head starting at S", POSITIVE)
    coverage_penalty: float = setting(0.0, "MEMO(coverage_penalty=C): each hop's logits lose C times the attention "
                                           "its head put on each fact before (0: off, the paper's)", NON_NEGATIVE)
    sum_fact_items: bool = setting(False, "each sentence's words summed into one item (a bag of words)")
    attention_supervision: float = setting(
        0.0, "a diagnostic, not the paper's training: weight of a loss that shows hop t the t-th supporting fact "
             "(0: none)", NON_NEGATIVE, resume=True)
    supervised_hops: int = setting(1, "how many of the first hops attention_supervision shows their fact",
                                   AT_LEAST_ONE, resume=True)
    time_encoding: bool = setting(True, "each fact carries a learned encoding of its age (False: facts are their "
                                        "words alone)")
    attention_dropout: float = setting(0.1, "MEMO's dropout on the attention weights", FRACTION)
    answer_dropout: float = setting(0.1, "MEMO's dropout before the answer layer", FRACTION)
    embedding_dim: int = setting(64, "word embedding size", AT_LEAST_ONE)
    embedding_stddev: float | None = setting(None, "draw the word and time embeddings from N(0, this) (None: "
                                                   "Keras' uniform in +-0.05)", POSITIVE)
    num_heads: int = setting(4, "MEMO's attention heads", AT_LEAST_ONE)
    key_size: int = setting(32, "MEMO's key size per head", AT_LEAST_ONE)
    max_hops: int = setting(5, "MEMO's hard stop N", AT_LEAST_ONE)
    halting_warmup_rounds: int = setting(10, "rounds before the halting network starts learning", NON_NEGATIVE)
    warmup_answer_loss: Literal[ANSWER_LOSSES] | None = setting(
        None, "the answer loss of the warm-up rounds (None: answer_loss throughout)")
    answer_warmup_rounds: int | None = setting(None, "rounds trained with warmup_answer_loss (None: "
                                                     "halting_warmup_rounds; ignored without "
                                                     "warmup_answer_loss)", NON_NEGATIVE)
    reset_halting: bool = setting(False, "re-initialise the halting network of a resumed MEMO before this "
                                         "sitting trains", resume=True)
    buckets: bool = setting(True, "batch stories of similar length (False: pad every batch to the longest)")
    test_limit: int = setting(0, "evaluate on this many test questions per task (0: all)", NON_NEGATIVE,
                              resume=True)
    seed: int = _seed()

    def check(self):
        if self.task != "all" and self.tasks and self.tasks != (self.task,):
            self.fail(f"task {self.task} and tasks {list(self.tasks)} disagree; give one of them")
        for name, items in (("task_repeats", self.task_repeats), ("learning_rate_from", self.learning_rate_from)):
            keys = [item.partition("=")[0] for item in items]
            if len(set(keys)) < len(keys):
                self.fail(f"{name} names a key twice: {list(items)}")
        if self.first_tasks and not set(self.first_tasks) & set(self.trained_tasks):
            self.fail(f"first_tasks {list(self.first_tasks)}: none of them is trained (tasks "
                      f"{self.trained_tasks}); name first tasks among the trained ones, or none")
        if self.first_tasks and self.first_tasks_rounds == 0:
            self.fail("first_tasks_rounds must be >= 1 with first_tasks (the rounds they train alone); got 0")
        if self.supervised_hops > self.max_hops:
            self.fail(f"supervised_hops must be at most max_hops {self.max_hops}; got {self.supervised_hops}")
        if not self.time_encoding and self.time_noise:
            self.fail("time_noise needs the time encoding; it cannot go with time_encoding False")

    @property
    def trained_tasks(self):
        """The tasks the run trains and tests."""
        if self.task != "all":
            return [self.task]
        return sorted(self.tasks) if self.tasks else list(BABI_TASKS)


# --- language modelling -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class LMConfig(Config):
    """Next-word language modelling with truncated back-propagation through time (stateful batches).

    Example:

    ```python
    >>> from keras_relmem.configs import LMConfig
    >>> LMConfig(model="lstm", units=256).units
    256
    >>> LMConfig(model="lstm", mem_slots=2)
    Traceback (most recent call last):
    ...
    ValueError: LMConfig: mem_slots is an RMC setting; model is 'lstm'

    ```
    """

    command: ClassVar[str] = "relmem-train-lm"
    model: Literal["rmc", "lstm"] = setting("rmc", "the recurrent core")
    corpus: Literal[CORPORA] = setting("ptb", "the corpus")
    data_dir: str | None = _data_dir()
    epochs: int = setting(10, "training epochs", AT_LEAST_ONE, resume=True)
    batch_size: int = setting(64, "batch size (rows read in parallel)", AT_LEAST_ONE)
    bptt: int = setting(100, "truncation length of back-propagation through time", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's learning rate", POSITIVE)
    clipnorm: float | None = setting(0.25, "gradient-norm clip of each variable", POSITIVE)
    embedding_dim: int | None = setting(None, "word embedding size (None: 192)", AT_LEAST_ONE, model=True)
    untied: bool = setting(False, "a separate softmax matrix instead of the embedding's transpose")
    mem_slots: int | None = setting(None, "RMC memory slots (None: 1)", AT_LEAST_ONE, model=True)
    head_size: int | None = setting(None, "RMC head size (None: 192)", AT_LEAST_ONE, model=True)
    num_heads: int | None = setting(None, "RMC attention heads (None: 4)", AT_LEAST_ONE, model=True)
    key_size: int | None = setting(None, "RMC key size (None: 64)", AT_LEAST_ONE, model=True)
    units: int | None = setting(None, "LSTM units (None: 1000)", AT_LEAST_ONE, model=True)
    seed: int = _seed()

    def check(self):
        _core_fields(self, {"rmc": ("mem_slots", "head_size", "num_heads", "key_size"), "lstm": ("units",)})


MODEL_NAMES = {"entnet": "EntNet", "rmc": "RMC", "lstm": "LSTM", "memo": "MEMO"}


def _core_fields(config, by_model):
    """Refuse a setting of another model (it would be silently ignored): `by_model` maps "model" or
    "model|model" to the fields only those models take."""
    for models, names in by_model.items():
        for name in names:
            if config.model not in models.split("|") and getattr(config, name) not in (None, False):
                owners = " or ".join(MODEL_NAMES[m] for m in models.split("|"))
                article = "a" if owners.startswith("MEMO") else "an"
                config.fail(f"{name} is {article} {owners} setting; model is {config.model!r}")


# --- Nth Farthest -------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class NthFarthestConfig(Config):
    """The RMC paper's Nth Farthest task (Santoro et al. 2018, §4.1): which of `num_objects` vectors is the
    n-th farthest from vector m; a core reads the sequence and an MLP answers.

    Example:

    ```python
    >>> from keras_relmem.configs import NthFarthestConfig
    >>> NthFarthestConfig(model="lstm", units=256, mem_slots=None, head_size=None, num_heads=None,
    ...                   num_blocks=None).units
    256

    ```
    """

    command: ClassVar[str] = "relmem-train-nth-farthest"
    model: Literal["rmc", "lstm", "mlp"] = setting("rmc", "the core (mlp: none, the MLP reads the flattened "
                                                          "sequence, a reference)")
    train_examples: int = setting(50_000, "training examples (drawn once)", AT_LEAST_ONE)
    test_examples: int = setting(5_000, "test examples", AT_LEAST_ONE)
    num_objects: int = setting(8, "objects per sequence (at least 2: one to measure from, one to find)",
                               (lambda v: v >= 2, ">= 2"))
    num_features: int = setting(16, "features per object", AT_LEAST_ONE)
    epochs: int = setting(20, "training epochs", AT_LEAST_ONE, resume=True)
    batch_size: int = setting(64, "batch size", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's learning rate", POSITIVE)
    mem_slots: int | None = setting(4, "RMC memory slots", AT_LEAST_ONE)
    head_size: int | None = setting(64, "RMC head size", AT_LEAST_ONE)
    num_heads: int | None = setting(4, "RMC attention heads", AT_LEAST_ONE)
    num_blocks: int | None = setting(1, "RMC attention blocks", AT_LEAST_ONE)
    units: int | None = setting(None, "LSTM units (None: 512)", AT_LEAST_ONE)
    mlp_layers: int = setting(2, "ReLU layers of 256 units between the core and the answer (Sonnet's example: 4)",
                              NON_NEGATIVE)
    seed: int = _seed()

    def check(self):
        _core_fields(self, {"lstm": ("units",)})


# --- Learning to Execute ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class LTEConfig(Config):
    """Learning to Execute (Zaremba & Sutskever 2014; the RMC paper's Table 1): a core reads a program one
    character at a time and writes what it prints, under a curriculum.

    The class defaults are Sonnet's `rmc_learn_to_execute.py` scaled to one CPU core: 4 memories and 4 heads,
    head size 32 (not 2,048), 2 MLP layers of 256 (not 4), batch 64 (not 1,600), Adam 1e-3 (not 1e-4).

    Example:

    ```python
    >>> from keras_relmem.configs import LTEConfig
    >>> LTEConfig(task="add", length=3, nesting=1).task
    'add'

    ```
    """

    command: ClassVar[str] = "relmem-train-lte"
    task: Literal[LTE_TASKS] = setting("program", "which Learning-to-Execute task")
    model: Literal["rmc", "lstm", "entnet"] = setting("rmc", "the core")
    length: int = setting(5, "literal length (the paper's: 5)", AT_LEAST_ONE)
    nesting: int = setting(2, "nesting (the paper's: 2)", AT_LEAST_ONE)
    data: Literal[LTE_STYLES] = setting("paper", "the programs: paper (exactly-length-digit literals, values "
                                                 "modulo 10**(length+1), no end mark; Sonnet's) or v1 (1.0's)")
    curriculum: Literal[LTE_CURRICULA] = setting("combine", "the curriculum (Zaremba & Sutskever's)")
    advance_at: float = setting(0.9, "per-character accuracy at the curriculum's level that moves it on", UNIT)
    advance_every: int = setting(0, "move the curriculum on after every this many training examples, whatever "
                                    "the model (one schedule for every model); 0: when a probe passes "
                                    "--advance-at", NON_NEGATIVE)
    epochs: int = setting(20, "training epochs", AT_LEAST_ONE, resume=True)
    steps_per_epoch: int = setting(200, "batches per epoch (examples are drawn afresh)", AT_LEAST_ONE)
    batch_size: int = setting(64, "batch size", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's learning rate", POSITIVE)
    test_examples: int = setting(1000, "test programs", AT_LEAST_ONE)
    embedding_dim: int = setting(64, "character embedding size", AT_LEAST_ONE)
    mlp_units: tuple[int, ...] = setting((256, 256), "the answer MLP's layer sizes", AT_LEAST_ONE)
    mem_slots: int = setting(4, "RMC memory slots", AT_LEAST_ONE)
    head_size: int = setting(32, "RMC head size", AT_LEAST_ONE)
    num_heads: int = setting(4, "RMC attention heads", AT_LEAST_ONE)
    num_blocks: int = setting(1, "RMC attention blocks", AT_LEAST_ONE)
    units: int = setting(256, "LSTM units", AT_LEAST_ONE)
    entnet_blocks: int = setting(20, "EntNet memory blocks", AT_LEAST_ONE)
    seed: int = _seed()


# --- training in rounds under a wall-clock budget (the papers' other tables, measured at equal minutes) --------

def _curriculum(text):
    try:
        stages = [tuple(int(n) for n in part.split(":")) for part in text.split(",")]
    except ValueError:
        return False
    return all(len(stage) == 2 and min(stage) >= 1 for stage in stages)


def _graph_setting(text):
    try:
        nodes, degree, length = (int(n) for n in text.split("/"))
    except ValueError:
        return False
    return length >= 2 and 1 <= degree < nodes


@dataclasses.dataclass(frozen=True, kw_only=True)
class PAIConfig(_Halting, Config):
    """MEMO on paired associative inference (Banino et al. 2020, §4, Tables 1, 5, 6), or the end-to-end memory
    network style baseline (`model="emn"`), trained in rounds of fresh episodes until the budget is spent.

    Example:

    ```python
    >>> from keras_relmem.configs import PAIConfig
    >>> PAIConfig(length=4).hops
    7
    >>> PAIConfig(curriculum="4:30,8")
    Traceback (most recent call last):
    ...
    ValueError: PAIConfig.curriculum: expected SEQUENCES:ROUNDS,... such as 4:30,8:10,16:1; got '4:30,8'

    ```
    """

    command: ClassVar[str] = "relmem-train-memo"
    task: Literal["pai"] = setting("pai", "paired associative inference")
    model: Literal["memo", "emn"] = setting("memo", "MEMO (adaptive hops), or emn: one hop over facts whose items "
                                                    "are summed (the paper's baseline)")
    length: Literal[3, 4, 5] = setting(3, "items per sequence")
    budget_minutes: float = _budget(60.0, "training minutes")
    episodes: int = setting(20000, "fresh training episodes per round", AT_LEAST_ONE)
    test: int = setting(3000, "test episodes per memory size", AT_LEAST_ONE)
    curriculum: str = setting("4:30,8:10,16:1", "SEQUENCES:ROUNDS,... sequences per memory and the rounds each; "
                                                "the last stage lasts until the budget is spent",
                              (_curriculum, "SEQUENCES:ROUNDS,... such as 4:30,8:10,16:1"))
    num_items: int = setting(1000, "size of the item pool", AT_LEAST_ONE)
    answer: Literal["identity", "choice"] = setting(
        "identity", "identity: the match's identity (a softmax over the items); choice: the 2-way answer (it "
                    "stayed at chance in our runs)")
    embedding_size: int = setting(64, "item vector size", AT_LEAST_ONE)
    max_hops: int | None = setting(None, "MEMO's N (None: 2 * (length - 1) + 1, i.e. 5, 7, 9)", AT_LEAST_ONE)
    batch_size: int = setting(64, "batch size", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's rate", POSITIVE)
    final_learning_rate: float | None = setting(
        None, "anneal the rate on a cosine over the budget's minutes to this (None: constant)", POSITIVE)
    halting_warmup: int = setting(20, "rounds before the halting network starts learning", NON_NEGATIVE)
    warm_start: str | None = setting(None, "a new run starts from this saved MEMO's weights (.keras) with a fresh "
                                           "halting network")
    seed: int = _seed()

    @property
    def hops(self):
        return self.max_hops or 2 * (self.length - 1) + 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShortestPathConfig(_Halting, Config):
    """MEMO on shortest paths in random graphs (Banino et al. 2020, Table 2), or the baseline, in rounds of fresh
    graphs until the budget is spent.

    Example:

    ```python
    >>> from keras_relmem.configs import ShortestPathConfig
    >>> ShortestPathConfig(setting="20/5/3").graph
    (20, 5, 3)

    ```
    """

    command: ClassVar[str] = "relmem-train-memo"
    task: Literal["shortest_path"] = _setting("shortest_path", "shortest paths")
    setting: str = _setting("20/3/3", "NODES/OUT-DEGREE/PATH-LENGTH; the paper's: 10/2/2, 20/3/3, 20/5/3",
                           (_graph_setting, "NODES/OUT-DEGREE/PATH-LENGTH with path length >= 2 and "
                                            "1 <= out-degree < nodes"))
    model: Literal["memo", "emn"] = _setting("memo", "MEMO, or emn: one hop over facts whose items are summed")
    budget_minutes: float = _budget(60.0, "training minutes")
    graphs: int = _setting(10000, "fresh training graphs per round", AT_LEAST_ONE)
    test: int = _setting(2000, "test graphs", AT_LEAST_ONE)
    embedding_dim: int = _setting(64, "node embedding size", AT_LEAST_ONE)
    num_heads: int = _setting(4, "MEMO's attention heads", AT_LEAST_ONE)
    key_size: int = _setting(32, "MEMO's key size per head", AT_LEAST_ONE)
    max_hops: int | None = _setting(None, "MEMO's N (None: 2 * path length + 1)", AT_LEAST_ONE)
    batch_size: int = _setting(64, "batch size", AT_LEAST_ONE)
    learning_rate: float = _setting(1e-3, "Adam's rate", POSITIVE)
    halting_warmup: int = _setting(10, "rounds before the halting network starts learning", NON_NEGATIVE)
    seed: int = _seed()

    @property
    def graph(self):
        """(nodes, out-degree, path length)."""
        return tuple(int(n) for n in self.setting.split("/"))

    @property
    def hops(self):
        return self.max_hops or 2 * self.graph[2] + 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class NthFarthestRoundsConfig(Config):
    """Nth Farthest at equal wall clock (Santoro et al. 2018, §4.1): fresh examples every round, as Sonnet's
    `rmc_nth_farthest.py`, a fixed test set, rounds until the budget is spent; optionally a curriculum over
    the questions.

    Example:

    ```python
    >>> from keras_relmem.configs import NthFarthestRoundsConfig
    >>> NthFarthestRoundsConfig(curriculum=80.0, questions=(0,))
    Traceback (most recent call last):
    ...
    ValueError: NthFarthestRoundsConfig: curriculum chooses the questions asked in training; questions must be None

    ```
    """

    command: ClassVar[str] = "relmem-train-nth-farthest"
    model: Literal["rmc", "lstm", "mlp"] = setting("rmc", "the core (mlp: the MLP alone on the flattened "
                                                          "sequence, a reference)")
    budget_minutes: float = _budget(60.0, "training minutes")
    steps_per_round: int = setting(200, "batches of fresh examples between evaluations", AT_LEAST_ONE)
    batch_size: int = setting(64, "batch size", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "Adam's rate", POSITIVE)
    test_examples: int = setting(3000, "test examples", AT_LEAST_ONE)
    num_objects: int = setting(8, "objects per sequence (at least 2: one to measure from, one to find)",
                               (lambda v: v >= 2, ">= 2"))
    num_features: int = setting(16, "features per object", AT_LEAST_ONE)
    questions: tuple[int, ...] | None = setting(None, "ask only these n in training and test (None: every n)",
                                                NON_NEGATIVE)
    curriculum: float | None = setting(None, "train on the farthest (n = 0) first and add the next n after each "
                                             "round whose training accuracy reaches this %; the test asks every "
                                             "n", NON_NEGATIVE)
    mem_slots: int = setting(4, "RMC memory slots", AT_LEAST_ONE)
    head_size: int = setting(64, "RMC head size", AT_LEAST_ONE)
    num_heads: int = setting(4, "RMC attention heads", AT_LEAST_ONE)
    num_blocks: int = setting(1, "RMC attention blocks", AT_LEAST_ONE)
    units: int = setting(512, "LSTM units", AT_LEAST_ONE)
    mlp_layers: int = setting(4, "ReLU layers of 256 units between the core and the answer", NON_NEGATIVE)
    seed: int = _seed()

    def check(self):
        if self.curriculum is not None and self.questions is not None:
            self.fail("curriculum chooses the questions asked in training; questions must be None")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LMRoundsConfig(Config):
    """A language model on PTB at equal wall clock: rounds of `batches_per_round` stateful TBPTT batches until the
    budget is spent, with Zaremba et al.'s SGD schedule available for their LSTMs.

    Zaremba et al. sum the loss over the BPTT steps; ours is the mean per token, so their SGD rate 1 and global
    clip 5 are rate `bptt` and clip 5 / `bptt` here (the same updates).

    Example:

    ```python
    >>> from keras_relmem.configs import LMRoundsConfig
    >>> LMRoundsConfig(model="rmc", units=200)
    Traceback (most recent call last):
    ...
    ValueError: LMRoundsConfig: units is an LSTM setting; model is 'rmc'

    ```
    """

    command: ClassVar[str] = "relmem-train-lm"
    model: Literal["rmc", "lstm"] = setting("rmc", "the recurrent core")
    data_dir: str | None = _data_dir()
    budget_minutes: float = _budget(60.0, "training minutes")
    batches_per_round: int = setting(20, "training batches between validations", AT_LEAST_ONE)
    batch_size: int = setting(64, "batch size", AT_LEAST_ONE)
    bptt: int = setting(100, "truncation length", AT_LEAST_ONE)
    learning_rate: float = setting(1e-3, "the optimizer's rate", POSITIVE)
    clipnorm: float = setting(0.25, "clip each gradient's norm (0: do not)", NON_NEGATIVE)
    global_clipnorm: float = setting(0.0, "clip the norm of all gradients together, as Zaremba et al. (0: do not)",
                                     NON_NEGATIVE)
    optimizer: Literal["adam", "sgd"] = setting("adam", "the optimizer")
    lr_decay: float = setting(1.0, "multiply the rate by this at the start of every epoch after decay_after",
                              POSITIVE)
    decay_after: int = setting(0, "epochs at the full rate", NON_NEGATIVE)
    keep_best: bool = setting(False, "keep the weights of the round with the best validation perplexity and report "
                                     "their test perplexity too (early stopping), beside the last round's")
    units: int | None = setting(None, "LSTM units (None: build_language_model's)", AT_LEAST_ONE, model=True)
    num_layers: int | None = setting(None, "LSTM layers", AT_LEAST_ONE, model=True)
    dropout: float | None = setting(None, "LSTM dropout", FRACTION, model=True)
    init_scale: float | None = setting(None, "LSTM uniform initialisation scale", POSITIVE, model=True)
    untied: bool = setting(False, "LSTM: a softmax of its own, not the embedding")
    seed: int = _seed()

    def check(self):
        _core_fields(self, {"lstm": ("units", "num_layers", "dropout", "init_scale")})
        if self.untied and self.model != "lstm":
            self.fail(f"untied is an LSTM setting; model is {self.model!r}")


CONFIGS = (BabiConfig, BabiJointConfig, LMConfig, NthFarthestConfig, LTEConfig, PAIConfig, ShortestPathConfig,
           NthFarthestRoundsConfig, LMRoundsConfig)


def _document_fields(cls):
    """Append every field with its type, default and help to `cls`'s docstring (what `help()` and the API
    reference show), from the fields themselves, so they are written once."""
    hints = typing.get_type_hints(cls)
    lines = [f"        {f.name} ({_describe(hints[f.name])}; default {f.default!r}): {f.metadata['help']}"
             for f in cls.settings()]
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n\n    Fields:\n" + "\n".join(lines) + "\n"


for _cls in CONFIGS:
    _document_fields(_cls)


def by_name(name):
    """The config class called `name` (as a workdir's `config.json` records it)."""
    for cls in CONFIGS:
        if cls.__name__ == name:
            return cls
    raise ValueError(f"no config class {name!r}; known: {', '.join(c.__name__ for c in CONFIGS)}")
