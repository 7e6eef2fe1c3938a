"""The one training loop: rounds of training, each saved atomically, resumable and budgeted.

A run trains in rounds (an epoch of `fit`, or whatever one call of a
round function trains). After every round `RoundLog` records it: the whole
model goes to a `.keras` file and the round's metrics, with the cumulative
training minutes, to `curve.json`, as one all-or-nothing commit (the curve
names the round, the model file is moved into place after it), so a run
killed at any moment resumes from its last complete round. A rerun with the
same workdir continues where that round ended, until the epochs, the rounds
or the wall-clock budget (counted over every sitting) are spent.

Two drivers share it:

- `run_fit`: epoch-shaped training, one `model.fit` per sitting (the Keras
  callbacks and the data stream run on across epochs, as in plain `fit`);
  each epoch is a round. The task scripts train this way.
- `train_in_rounds`: a `fit` per round, for recipes whose data, rates or
  starts change between rounds (MEMO's joint bAbI recipe, the curricula of
  the benches); `best_of_starts` begins it from the best of several starts.

Also here: a metrics JSON that survives restarts, TensorBoard logs, a
learning-rate schedule by epoch, and atomic file writes.
"""

import contextlib
import json
import os
import pathlib
import shutil
import time

import keras

from keras_relmem import distribute

# The optimizers and the cyclic rate live in keras_relmem.optimizers, imported by `import keras_relmem`
# so that a checkpoint that uses them loads with nothing else imported; kept importable from here.
from keras_relmem.optimizers import (  # noqa: F401
    DECAY_EXCLUDED,
    NoisyAdam,
    ScopedAdam,
    TriangularCyclicRate,
    adam,
    step_decay,
)


class MetricsJSON(keras.callbacks.Callback):
    """Writes `{"epochs": [{epoch, metrics...}], "starts": [...]}` after every epoch.

    Entries are keyed by epoch, so an epoch re-run after a crash replaces its
    entry; `starts` lists the epoch each (re)start began at.
    """

    def __init__(self, path, resume=False):
        super().__init__()
        self.path = pathlib.Path(path)
        self.record = {"epochs": [], "starts": []}
        if resume and self.path.is_file():
            self.record = json.loads(self.path.read_text())
        self._started = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._started:
            self._started = True
            self.record["starts"].append(epoch)
            self.record["epochs"] = [e for e in self.record["epochs"] if e["epoch"] < epoch]

    def on_epoch_end(self, epoch, logs=None):
        entry = {"epoch": epoch}
        entry.update({k: float(v) for k, v in (logs or {}).items()})
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and "learning_rate" not in entry:
            entry["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        self.record["epochs"] = [e for e in self.record["epochs"] if e["epoch"] != epoch]
        self.record["epochs"].append(entry)
        write_json(self.path, self.record)


class AtomicModelCheckpoint(keras.callbacks.Callback):
    """Saves the whole model to a `.keras` file after every epoch, never leaving a half-written file.

    The model is written to a temporary name next to `filepath`, which is
    then renamed over it, so a kill mid-save leaves the previous epoch's file.

    Args:
        filepath: the `.keras` file to keep up to date.

    Example:

    ```python
    >>> import keras, numpy as np, pathlib, tempfile
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "checkpoint.keras"
    >>> _ = model.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=2, verbose=0,
    ...               callbacks=[AtomicModelCheckpoint(path)])
    >>> sorted(p.name for p in path.parent.iterdir())  # no partial file left
    ['checkpoint.keras']

    ```
    """

    def __init__(self, filepath):
        super().__init__()
        self.path = pathlib.Path(filepath)

    def on_epoch_end(self, epoch, logs=None):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_save(self.model.save, self.path)


def _atomic_save(save, path):
    """`save(path)` through a temporary file (its name keeps the extension, which Keras checks), so a kill
    mid-write leaves the last complete file."""
    tmp = path.with_name("tmp_" + path.name)
    save(tmp)
    os.replace(tmp, path)


def write_text_atomic(path, text):
    """Write a text file atomically (temp file + rename): a kill never leaves half a file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path, obj):
    """Write JSON atomically (temp file + rename): a kill never leaves half a file."""
    write_text_atomic(path, json.dumps(obj, indent=2))


SCHEDULES = ("step", "plateau", "cyclic")


def limit_threads(threads):
    """Run TensorFlow on `threads` cores (inter- and intra-op pools; 0 or None: all), e.g. one core per
    run so that two runs can go side by side. Other backends are left alone."""
    if threads and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(threads)
        tf.config.threading.set_intra_op_parallelism_threads(threads)


def learning_rate_schedule(kind, learning_rate, steps_per_epoch=None, halve_every=25, patience=3,
                           minimum=2e-4, half_cycle_epochs=10):
    """The optimizer's rate and the callbacks for a named schedule.

    - `"step"`: `learning_rate` halved every `halve_every` epochs (the EntNet
      paper's, `step_decay`);
    - `"plateau"`: halved when the validation loss has not improved for
      `patience` epochs (`keras.callbacks.ReduceLROnPlateau`);
    - `"cyclic"`: `TriangularCyclicRate(minimum, learning_rate,
      half_cycle_epochs * steps_per_epoch)`, set per step.

    Args:
        kind: one of `SCHEDULES`.
        learning_rate: the starting (step, plateau) or peak (cyclic) rate.
        steps_per_epoch: optimizer steps per epoch (needed by "cyclic").
        halve_every, patience, minimum, half_cycle_epochs: as above.

    Returns:
        `(rate, callbacks)`: pass `rate` to the optimizer and `callbacks` to `fit`.

    Example:

    ```python
    >>> rate, callbacks = learning_rate_schedule("cyclic", 0.01, steps_per_epoch=281)
    >>> type(rate).__name__, rate.step_size, callbacks
    ('TriangularCyclicRate', 2810.0, [])

    ```
    """
    if kind == "step":
        return learning_rate, [keras.callbacks.LearningRateScheduler(step_decay(learning_rate, 0.5, halve_every))]
    if kind == "plateau":
        return learning_rate, [keras.callbacks.ReduceLROnPlateau("val_loss", factor=0.5, patience=patience)]
    if kind == "cyclic":
        if not steps_per_epoch:
            raise ValueError("the cyclic schedule needs steps_per_epoch (optimizer steps in one epoch).")
        return TriangularCyclicRate(minimum, learning_rate, half_cycle_epochs * steps_per_epoch), []
    raise ValueError(f"schedule must be one of {SCHEDULES}; received {kind!r}.")


def run_fit(
    model,
    train,
    validation,
    workdir,
    epochs,
    resume=False,
    logdir=None,
    schedule=None,
    callbacks=(),
    verbose="auto",
    steps_per_epoch=None,
    budget_minutes=None,
):
    """`model.fit` with checkpoints, resumption, logs and a metrics file: the one loop with an epoch a round.

    After every epoch the whole model is saved to `workdir/checkpoint.keras`
    and the epoch to `workdir/curve.json` (a `RoundLog`), and its metrics to
    `workdir/metrics.json`. With `resume=True` a rerun restores the weights and
    the optimizer's state into `model` from the checkpoint and continues at
    the next epoch; the callbacks and the data stream start again with the
    sitting, as in any new `fit`.

    Args:
        model: a compiled model.
        train, validation: `tf.data.Dataset`s (validation may be None).
        workdir: folder for `checkpoint.keras` (the latest epoch's model),
            `curve.json` and `metrics.json`. On a multi-worker cluster, workers
            other than the chief write under `workdir/worker_N`.
        epochs: total epochs of the run (a resumed run ends at the same one).
        resume: continue from `workdir`'s last saved epoch if there is one (a
            curve without its checkpoint is an error); otherwise training starts
            at epoch 0 (and overwrites the files). `kr.train` decides it.
        logdir: TensorBoard log folder, or None.
        schedule: optional `epoch -> learning rate` function.
        callbacks: more Keras callbacks.
        verbose: Keras' progress bar setting.
        steps_per_epoch: batches per epoch of an endless `train` dataset.
        budget_minutes: optional training minutes (over every sitting, each
            epoch's validation included) after which no new epoch starts.

    Returns:
        The `MetricsJSON` record (`{"epochs": [...], "starts": [...]}`).

    Example:

    ```python
    >>> import keras, numpy as np, tempfile, tensorflow as tf
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> train = tf.data.Dataset.from_tensor_slices(
    ...     (np.ones((8, 3)), np.ones((8, 1)))).batch(4)
    >>> workdir = tempfile.mkdtemp()
    >>> record = run_fit(model, train, None, workdir, epochs=2, verbose=0)
    >>> [entry["epoch"] for entry in record["epochs"]], record["starts"]
    ([0, 1], [0])
    >>> record = run_fit(model, train, None, workdir, epochs=3, resume=True,
    ...                  verbose=0)  # continues at epoch 2
    resumed ... after epoch 2 (... training minutes)
    >>> [entry["epoch"] for entry in record["epochs"]], record["starts"]
    ([0, 1, 2], [0, 2])

    ```
    """
    workdir = pathlib.Path(workdir)
    if not distribute.is_chief():
        index = json.loads(os.environ["TF_CONFIG"])["task"].get("index", 0)
        workdir = workdir / f"worker_{index}"
    log = RoundLog(workdir, model_file="checkpoint.keras", fresh=not resume)
    metrics = MetricsJSON(workdir / "metrics.json", resume=resume)
    # The caller's callbacks first, so what they add to the logs is recorded.
    all_callbacks = list(callbacks) + [metrics]
    if schedule is not None:
        all_callbacks.append(keras.callbacks.LearningRateScheduler(schedule))
    # Last, so an epoch counts as done only once everything above is written.
    all_callbacks.append(_EpochRounds(log, epochs, budget_minutes))
    if logdir:
        all_callbacks.append(keras.callbacks.TensorBoard(str(logdir)))
    if log.curve:
        print(f"resumed {workdir} after epoch {log.next_round} ({log.minutes:.1f} training minutes)", flush=True)
    if not log.done(budget_minutes, epochs):
        model.fit(
            train,
            validation_data=validation,
            initial_epoch=log.next_round,
            epochs=epochs,
            callbacks=all_callbacks,
            verbose=verbose,
            steps_per_epoch=steps_per_epoch,
            shuffle=False,  # the datasets shuffle themselves
        )
    elif log.model_path.exists():
        # Nothing left to train: the run's model is the saved one, so what the caller evaluates and exports
        # next is that model, not the fresh weights it built.
        if not model.built:
            model(next(iter(train))[0])
        restore_into(model, log.model_path)
    return metrics.record


class _EpochRounds(keras.callbacks.Callback):
    """`run_fit`'s link to its `RoundLog`: restores the saved state when `fit` begins, records every epoch as a
    round, and stops `fit` once the budget is spent."""

    def __init__(self, log, epochs, budget_minutes):
        super().__init__()
        self.log, self.epochs, self.budget_minutes = log, epochs, budget_minutes

    def on_train_begin(self, logs=None):
        if self.log.curve:
            restore_into(self.model, self.log.model_path)

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        entry = {name: float(keras.ops.convert_to_numpy(value)) for name, value in (logs or {}).items()}
        self.log.record(self.model, entry, time.perf_counter() - self.start)
        if self.log.done(self.budget_minutes, self.epochs):
            self.model.stop_training = True


def restore_into(model, path):
    """Load the weights and the optimizer's state of the `.keras` file `path` into `model` (the same architecture).

    The optimizer is built first (Keras builds it lazily, on the first step),
    so that its moments and step count are restored rather than skipped.
    """
    strategy = getattr(model, "distribute_strategy", None)  # the TensorFlow backend's
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            optimizer.build(model.trainable_variables)
        model.load_weights(path)


# --- The round log: what both drivers save after every round --------------------------------------------


BEST_WEIGHTS = "best.weights.h5"


class RoundLog:
    """A run's rounds on disk: the whole model after the last round and the curve of every round.

    `record` saves the model to a file named after the round, then writes the
    curve with the new round (the commit), then moves the model file into
    place, so a kill at any moment leaves a curve and a model of the same
    round: a model saved for a round the curve does not hold is dropped, and
    one whose round the curve holds but that was not yet moved is moved on
    opening. Training minutes add up over every sitting; evaluation and
    saving are not counted.

    Args:
        workdir: the run's folder.
        model_file: the model's file name in it (`.keras`).
        fresh: forget a saved run in `workdir` (its curve, model and kept best weights) and start at round 0.

    Example:

    ```python
    >>> import keras, tempfile
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> log = RoundLog(tempfile.mkdtemp())
    >>> entry = log.record(model, {"loss": 0.5}, seconds=30.0)
    >>> entry, log.next_round, log.done(budget_minutes=0.5, max_rounds=None)
    ({'round': 0, 'minutes': 0.5, 'loss': 0.5}, 1, True)

    ```
    """

    def __init__(self, workdir, model_file="model.keras", fresh=False):
        self.workdir = pathlib.Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.model_path = self.workdir / model_file
        self.curve_path = self.workdir / "curve.json"
        if fresh:  # the kept best too: a new run must not inherit an old run's best round
            for path in (self.curve_path, self.model_path, self.workdir / BEST_WEIGHTS, self.workdir / "best.json"):
                path.unlink(missing_ok=True)
        self.curve = saved_curve(self.workdir)
        for pending in self.workdir.glob(self._pending_name("*")):
            if self.curve and pending.name == self._pending_name(self.curve[-1]["round"]):
                os.replace(pending, self.model_path)  # the commit happened; finish it
            else:
                pending.unlink()  # saved for a round the curve never took
        if self.curve and not self.model_path.exists():
            raise FileNotFoundError(f"{self.model_path} is missing, though {self.curve_path} records "
                                    f"{len(self.curve)} trained round(s): restore it, or start over (--overwrite)")

    def _pending_name(self, index):
        return f".{self.model_path.stem}.round{index}.keras"

    @property
    def minutes(self):
        """Training minutes spent so far, over every sitting."""
        return self.curve[-1]["minutes"] if self.curve else 0.0

    @property
    def next_round(self):
        """The index of the round to train next."""
        return len(self.curve)

    def done(self, budget_minutes, max_rounds):
        """Whether the budget (None: none) is spent or `max_rounds` (None: no limit) rounds are recorded."""
        return ((budget_minutes is not None and self.minutes >= budget_minutes)
                or (max_rounds is not None and self.next_round >= max_rounds))

    def record(self, model, metrics, seconds, keep_best=None):
        """Record a round that trained for `seconds`: save `model`, append `{round, minutes, **metrics}`.

        `keep_best=(metric, "min" | "max")` also saves the weights as
        `best.weights.h5` when the round is the best of the curve so far.
        Returns the curve's new entry.
        """
        index = self.next_round
        entry = {"round": index, "minutes": round(self.minutes + seconds / 60, 3), **metrics}
        pending = self.workdir / self._pending_name(index)
        model.save(pending)
        write_json(self.curve_path, self.curve + [entry])
        self.curve.append(entry)
        os.replace(pending, self.model_path)
        if keep_best and entry[keep_best[0]] == _best_value(self.curve, *keep_best):
            _atomic_save(model.save_weights, self.workdir / BEST_WEIGHTS)
            write_json(self.workdir / "best.json", {"round": index, keep_best[0]: entry[keep_best[0]]})
        return entry


# --- Training in rounds on a wall-clock budget -------------------------------------------------------------
#
# `train_in_rounds` trains a compiled model in rounds (typically one `fit` epoch of a fixed number of steps
# each, on the round's own data) until the training wall-clock (evaluation excluded) reaches a budget, and
# records each round in a `RoundLog`; a rerun with the same workdir loads the saved model and continues where
# the last completed round ended, so a budget of hours is spent over several sittings.


def anneal_learning_rate(model, minutes, budget_minutes, initial, final):
    """Set the optimizer's rate on a cosine from `initial` (0 minutes) to `final` (the budget's end).

    The benches' budget is wall-clock, so the schedule runs on training
    minutes rather than steps (Keras' `CosineDecay` evaluated at the spent
    fraction of the budget). Called before each round, it also sets the rate
    of a resumed model. Returns the rate set.
    """
    steps = 10_000
    schedule = keras.optimizers.schedules.CosineDecay(initial, decay_steps=steps, alpha=final / initial)
    rate = float(schedule(int(steps * min(minutes / budget_minutes, 1.0))))
    model.optimizer.learning_rate.assign(rate)
    return rate


def saved_curve(workdir):
    """The curve a `RoundLog` has saved in `workdir` so far: [] for a run not yet started."""
    path = pathlib.Path(workdir) / "curve.json"
    return json.loads(path.read_text()) if path.exists() else []


def train_in_rounds(
    build,
    train_round,
    evaluate,
    workdir,
    budget_minutes,
    describe=None,
    on_resume=None,
    on_round=None,
    before_round=None,
    keep_best=None,
    max_rounds=None,
):
    """Train in rounds until `budget_minutes` of training time are spent (or `max_rounds` rounds run).

    Args:
        build: `() -> compiled keras.Model`, used when no saved model exists.
        train_round: `(model, round_index) -> dict` of training metrics; runs
            one round of `model.fit`.
        evaluate: `(model) -> dict` of metrics recorded after each round.
        workdir: folder for `model.keras` and `curve.json` (a `RoundLog`).
        budget_minutes: float, training minutes to reach (over all sittings),
            or None for no budget (then `max_rounds` ends the run).
        describe: optional `(entry) -> str` printed after each round.
        on_resume: optional `(model) -> None` called after a saved model is
            loaded (e.g. to reset recurrent state).
        on_round: optional `(curve) -> None` called after each saved round
            (e.g. to record the partial result of an unfinished budget).
        before_round: optional `(model, minutes) -> None` called before each
            round with the training minutes spent so far (e.g. to anneal the
            learning rate on the budget's clock).
        keep_best: optional `(metric, "min" | "max")`: after each round
            whose `metric` is the best of the curve so far, its weights are
            saved as `best.weights.h5` (early stopping's model; read them
            back with `kept_best`).
        max_rounds: optional int, the most rounds the curve may hold (e.g.
            a trial of a few rounds whatever the budget).

    Returns:
        The curve: a list of dicts with `round`, `minutes` (cumulative
        training minutes) and the metrics of `train_round` and `evaluate`.
    """
    if budget_minutes is None and max_rounds is None:
        raise ValueError("train_in_rounds needs budget_minutes or max_rounds (or both); got neither")
    log = RoundLog(workdir)
    if log.curve:
        model = keras.saving.load_model(log.model_path)
        if on_resume:
            on_resume(model)
        print(f"resumed {log.workdir} after round {log.curve[-1]['round']} "
              f"({log.minutes:.1f} training minutes)", flush=True)
    else:
        # Say where a rerun looks, so that a workdir left on another machine is not silently started over.
        print(f"no saved run in {log.workdir} (model.keras and curve.json): starting at round 0", flush=True)
        log, model = RoundLog(workdir, fresh=True), build()
    while not log.done(budget_minutes, max_rounds):
        if before_round:
            before_round(model, log.minutes)
        start = time.perf_counter()
        metrics = train_round(model, log.next_round)
        seconds = time.perf_counter() - start
        entry = log.record(model, {**metrics, **evaluate(model)}, seconds, keep_best=keep_best)
        print(describe(entry) if describe else json.dumps(entry), flush=True)
        if on_round:
            on_round(log.curve)
    return log.curve, model


def best_entry(curve, metric, mode="min"):
    """The entry of `curve` with the lowest (`mode="min"`) or highest (`"max"`) `metric`; None if it is empty."""
    return (min if mode == "min" else max)(curve, key=lambda entry: entry[metric], default=None)


def _best_value(curve, metric, mode):
    return best_entry(curve, metric, mode)[metric]


def kept_best(workdir, curve, metric, mode):
    """The curve entry whose weights `train_in_rounds(keep_best=(metric, mode))` kept in `workdir`, or
    None when the curve's best round has none (e.g. a run that started keeping after its best round)."""
    path = pathlib.Path(workdir) / "best.json"
    if not path.exists() or not (pathlib.Path(workdir) / BEST_WEIGHTS).exists():
        return None
    kept = json.loads(path.read_text())["round"]
    entry = next((e for e in curve if e["round"] == kept), None)
    return entry if entry is not None and entry[metric] == _best_value(curve, metric, mode) else None


class WorkdirMismatch(ValueError):
    """A workdir holds a run other than the one asked for (another choice of starts, or none)."""


def best_of_starts(rounds, workdir, count, start_rounds, seed, summarize, by="train_error", extra=None,
                   seed_stride=1000):
    """Train `count` starts for `start_rounds` rounds each, then go on with the best of them.

    Start k trains in `workdir/start<k>` with seed `seed + seed_stride * k`
    (its initial weights and data order; start 0 is the run's own seed).
    The start whose `summarize(last curve entry)[by]` is lowest is then made
    the run's: its model and curve are copied into `workdir`, the curve's
    minutes carrying the other starts' minutes too, so a budget counts every
    start. End-to-end memory networks (Sukhbaatar et al. 2015, §4.2) kept the
    best of ten starts on bAbI by training error this way.

    Resumable: a finished start is not trained again (its `train_in_rounds`
    stops at `start_rounds`), and the choice, once written to
    `workdir/starts.json`, is read back instead of made again.

    Args:
        rounds: `(seed, workdir, max_rounds) -> (curve, model)`, e.g. a
            `train_in_rounds` call.
        workdir: the run's folder.
        count, start_rounds: how many starts, and the rounds of each.
        seed: the run's seed.
        summarize: `(curve entry) -> dict` recorded for each start; holds `by`.
        by: the key of `summarize`'s dict to minimise.
        extra: optional dict written into the record (e.g. what `by` was measured on).
        seed_stride: the seed distance between starts (keep it above the
            number of rounds when data-order seeds are `seed * 1000 + round`).

    Returns:
        The record written to `starts.json`: `count`, `rounds`, `chosen`
        (start index), `seed`, `minutes_of_other_starts` and `by_start`.

    Raises:
        WorkdirMismatch: `workdir` holds another choice, or a run begun with
            one start.

    Example:

    ```python
    >>> import contextlib, io, keras, numpy as np, pathlib, tempfile
    >>> def rounds(seed, workdir, max_rounds):
    ...     def build():
    ...         keras.utils.set_random_seed(seed)
    ...         model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    ...         model.compile("sgd", "mse")
    ...         return model
    ...     loss = lambda model: {"loss": float(model.evaluate(
    ...         np.ones((4, 1)), np.zeros((4, 1)), verbose=0))}
    ...     return train_in_rounds(build, lambda model, index: {}, loss, workdir,
    ...                            1e9, describe=lambda e: "", max_rounds=max_rounds)
    >>> with contextlib.redirect_stdout(io.StringIO()):  # each start's progress lines
    ...     record = best_of_starts(rounds, pathlib.Path(tempfile.mkdtemp()), 3, 1, 0,
    ...                             lambda entry: {"loss": entry["loss"]}, by="loss")
    >>> best = min(record["by_start"], key=lambda trial: trial["loss"])
    >>> record["chosen"] == best["start"], record["seed"] == best["seed"]
    (True, True)

    ```
    """
    workdir = pathlib.Path(workdir)
    path = workdir / "starts.json"
    if path.exists():
        chosen = json.loads(path.read_text())
        if (chosen["count"], chosen["rounds"]) != (count, start_rounds):
            raise WorkdirMismatch(f"{count} starts of {start_rounds} rounds asked for, but {workdir} chose among "
                                  f"{chosen['count']} starts of {chosen['rounds']} rounds; use a new workdir")
        if not saved_curve(workdir):  # the choice without its copy (starts.json copied alone): copy again
            source = workdir / f"start{chosen['chosen']}"
            if not saved_curve(source):
                raise WorkdirMismatch(f"{path} chose start {chosen['chosen'] + 1}, but neither {workdir} nor "
                                      f"{source} holds its model and curve; restore one of them or use a new workdir")
            _go_on_from(source, workdir, chosen["minutes_of_other_starts"])
        return chosen
    if saved_curve(workdir) and not (workdir / "start0").is_dir():  # with start0: stopped while choosing
        raise WorkdirMismatch(f"{count} starts asked for, but {workdir} holds a run begun with one start; "
                              "use a new workdir")
    trials = []
    for start in range(count):
        start_seed = seed + seed_stride * start
        print(f"start {start + 1} of {count} (seed {start_seed}), {start_rounds} rounds", flush=True)
        curve, _ = rounds(start_seed, workdir / f"start{start}", start_rounds)
        last = curve[-1]
        trials.append({"start": start, "seed": start_seed, "rounds": len(curve), "minutes": last["minutes"],
                       "examples": last.get("examples"), **summarize(last)})
    best = min(trials, key=lambda trial: trial[by])
    others = sum(trial["minutes"] for trial in trials if trial is not best)
    _go_on_from(workdir / f"start{best['start']}", workdir, others)
    chosen = {"count": count, "rounds": start_rounds, "chosen": best["start"], "seed": best["seed"],
              **(extra or {}), "minutes_of_other_starts": round(others, 3), "by_start": trials}
    write_json(path, chosen)  # last: a run stopped before this chooses again from the saved starts
    scores = ", ".join(f"{trial[by]:g}" for trial in trials)
    print(f"chose start {best['start'] + 1} (seed {best['seed']}): {by} {best[by]:g} (starts: {scores})", flush=True)
    return chosen


def _go_on_from(source, workdir, others):
    """Make start folder `source` the run's in `workdir`: its model, and its curve with the other starts'
    `others` minutes added."""
    shutil.copyfile(source / "model.keras", workdir / "model.keras")
    write_json(workdir / "curve.json", [{**e, "minutes": round(e["minutes"] + others, 3)} for e in saved_curve(source)])
