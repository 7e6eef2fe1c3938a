"""What every long training run needs, on top of `model.fit`.

Per-epoch checkpoints and resumption after a crash (Keras' `BackupAndRestore`,
which also restores the optimizer and the epoch counter), a `.keras`
checkpoint of the latest epoch, TensorBoard logs, a metrics JSON file that
survives restarts, and an optional learning-rate schedule by epoch.

Keras' own callbacks write their files in place, so a run killed while one is
being written leaves half a file that the next run cannot open. The two
subclasses here write to a new file or folder first and then switch to it
with an atomic rename, so a kill at any moment leaves the previous complete
state readable.

Training in rounds on a wall-clock budget (`train_in_rounds`, with
`best_of_starts` to begin from the best of several starts) is the loop of the
recipes that train for a number of minutes rather than epochs, e.g. MEMO's
joint bAbI recipe.
"""

import json
import os
import pathlib
import shutil
import time

import keras

from keras_relmem import distribute
from keras_relmem._keras_internals import BackupAndRestoreHooks

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


class AtomicBackupAndRestore(BackupAndRestoreHooks):
    """`BackupAndRestore` whose saves are all-or-nothing.

    Each save goes into a fresh folder `state-<n>/` (weights and epoch
    together); only once both are written does `latest` (a one-line file,
    replaced atomically) name it, and older folders are removed. Loading reads
    the folder `latest` names, so a kill during a save resumes from the save
    before. Local paths only (the atomic rename needs a POSIX file system).

    Args:
        backup_dir: folder for the states.
        **kwargs: passed to `keras.callbacks.BackupAndRestore`.

    Example:

    ```python
    >>> import keras, numpy as np, pathlib, tempfile
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> backup = pathlib.Path(tempfile.mkdtemp()) / "backup"
    >>> callback = AtomicBackupAndRestore(backup, delete_checkpoint=False)
    >>> _ = model.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=2, verbose=0,
    ...               callbacks=[callback])
    >>> (backup / "latest").read_text().strip()  # the last complete save
    'state-1'

    ```
    """

    def __init__(self, backup_dir, **kwargs):
        super().__init__(backup_dir, **kwargs)
        self._root = pathlib.Path(backup_dir)
        self._pointer = self._root / "latest"

    def load_state(self):
        if self._pointer.is_file():
            # Keras' fall-back to a previous save is replaced by the `latest` pointer.
            self.use_folder(self._root / self._pointer.read_text().strip())
            self.load_files()

    def save_state(self):
        self._root.mkdir(parents=True, exist_ok=True)
        previous = self._pointer.read_text().strip() if self._pointer.is_file() else None
        index = int(previous.split("-")[1]) + 1 if previous else 0
        folder = self._root / f"state-{index}"
        if folder.exists():  # left by a save that was killed
            shutil.rmtree(folder)
        folder.mkdir()
        self.use_folder(folder)
        self.save_files()
        write_text_atomic(self._pointer, folder.name)
        for stale in self._root.glob("state-*"):
            if stale.name != folder.name:
                shutil.rmtree(stale, ignore_errors=True)


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
        self.final_path = pathlib.Path(filepath)
        # Keras checks the extension, so the temporary name keeps `.keras`.
        self.partial_path = self.final_path.with_name("." + self.final_path.stem + ".partial.keras")

    def on_epoch_end(self, epoch, logs=None):
        self.final_path.parent.mkdir(parents=True, exist_ok=True)
        self.model.save(self.partial_path)
        os.replace(self.partial_path, self.final_path)


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
):
    """`model.fit` with checkpoints, resumption, logs and a metrics file.

    Args:
        model: a compiled model.
        train, validation: `tf.data.Dataset`s (validation may be None).
        workdir: folder for `backup/` (resume state), `checkpoint.keras` (the
            latest epoch's model) and `metrics.json`. On a multi-worker
            cluster, workers other than the chief write under `workdir/worker_N`.
        epochs: total epochs of the run (a resumed run ends at the same one).
        resume: continue from `workdir/backup` if present; otherwise any old
            backup is removed and training starts at epoch 0.
        logdir: TensorBoard log folder, or None.
        schedule: optional `epoch -> learning rate` function.
        callbacks: more Keras callbacks.
        verbose: Keras' progress bar setting.
        steps_per_epoch: batches per epoch of an endless `train` dataset.

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
    >>> [entry["epoch"] for entry in record["epochs"]], record["starts"]
    ([0, 1, 2], [0, 2])

    ```
    """
    workdir = pathlib.Path(workdir)
    if not distribute.is_chief():
        index = json.loads(os.environ["TF_CONFIG"])["task"].get("index", 0)
        workdir = workdir / f"worker_{index}"
    workdir.mkdir(parents=True, exist_ok=True)
    backup = workdir / "backup"
    if not resume and backup.exists():
        shutil.rmtree(backup)
    metrics = MetricsJSON(workdir / "metrics.json", resume=resume)
    # The caller's callbacks first, so what they add to the logs is recorded.
    all_callbacks = list(callbacks) + [metrics]
    if schedule is not None:
        all_callbacks.append(keras.callbacks.LearningRateScheduler(schedule))
    all_callbacks += [
        AtomicModelCheckpoint(workdir / "checkpoint.keras"),
        # Last, so an epoch counts as done only once everything above is written.
        AtomicBackupAndRestore(str(backup), delete_checkpoint=False),
    ]
    if logdir:
        all_callbacks.append(keras.callbacks.TensorBoard(str(logdir)))
    model.fit(
        train,
        validation_data=validation,
        epochs=epochs,
        callbacks=all_callbacks,
        verbose=verbose,
        steps_per_epoch=steps_per_epoch,
        shuffle=False,  # the datasets shuffle themselves
    )
    return metrics.record


# --- Training in rounds on a wall-clock budget -------------------------------------------------------------
#
# `train_in_rounds` trains a compiled model in rounds (one `fit` epoch of a fixed number of steps each) until
# the training wall-clock (evaluation excluded) reaches a budget. After every round it evaluates, then saves
# the model (with its optimizer state) as `.keras` and the curve as JSON, both atomically; a rerun with the
# same workdir loads them and continues where the last completed round ended, so a budget of hours is spent
# over several sittings. The clock counts only the rounds' training: evaluation, saving and the time between
# sittings are excluded.


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
    """The curve `train_in_rounds` has saved in `workdir` so far: [] for a run not yet started."""
    path = pathlib.Path(workdir) / "curve.json"
    return json.loads(path.read_text()) if path.exists() else []


def _atomic_save(save, path):
    """`save(path)` through a temporary file, so a kill mid-write leaves the last complete file."""
    tmp = path.with_name("tmp_" + path.name)
    save(tmp)
    os.replace(tmp, path)


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
        workdir: folder for `model.keras` and `curve.json`.
        budget_minutes: float, training minutes to reach (over all sittings).
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
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    model_path, curve_path = workdir / "model.keras", workdir / "curve.json"
    curve = saved_curve(workdir)
    if curve and model_path.exists():
        model = keras.saving.load_model(model_path)
        if on_resume:
            on_resume(model)
        print(f"resumed {workdir} after round {curve[-1]['round']} "
              f"({curve[-1]['minutes']:.1f} training minutes)", flush=True)
    else:
        # Say where a rerun looks, so that a workdir left on another machine is not silently started over.
        print(f"no saved run in {workdir} (model.keras and curve.json): starting at round 0", flush=True)
        curve, model = [], build()
    minutes = curve[-1]["minutes"] if curve else 0.0
    while minutes < budget_minutes and (max_rounds is None or len(curve) < max_rounds):
        index = len(curve)
        if before_round:
            before_round(model, minutes)
        start = time.perf_counter()
        metrics = train_round(model, index)
        minutes += (time.perf_counter() - start) / 60
        entry = {"round": index, "minutes": round(minutes, 3), **metrics, **evaluate(model)}
        _atomic_save(model.save, model_path)
        curve.append(entry)
        write_json(curve_path, curve)
        if keep_best and entry[keep_best[0]] == _best_value(curve, *keep_best):
            _atomic_save(model.save_weights, workdir / BEST_WEIGHTS)
            write_json(workdir / "best.json", {"round": index, keep_best[0]: entry[keep_best[0]]})
        print(describe(entry) if describe else json.dumps(entry), flush=True)
        if on_round:
            on_round(curve)
    return curve, model


BEST_WEIGHTS = "best.weights.h5"


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
