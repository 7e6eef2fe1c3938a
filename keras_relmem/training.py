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
"""

import json
import os
import pathlib
import shutil

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
