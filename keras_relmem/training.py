"""What every long training run needs, on top of `model.fit`.

Per-epoch checkpoints and resumption after a crash (Keras' `BackupAndRestore`,
which also restores the optimizer and the epoch counter), a `.keras`
checkpoint of the latest epoch, TensorBoard logs, a metrics JSON file that
survives restarts, and an optional learning-rate schedule by epoch.
"""

import json
import os
import pathlib
import shutil

import keras

from keras_relmem import distribute


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


def write_json(path, obj):
    """Write JSON atomically (temp file + rename): a kill never leaves half a file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2))
    os.replace(tmp, path)


def step_decay(initial, factor=0.5, every=25):
    """`lr(epoch) = initial * factor ** (epoch // every)` (EntNet: halve every 25)."""

    def schedule(epoch, lr=None):
        return float(initial * factor ** (epoch // every))

    return schedule


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

    Returns:
        The `MetricsJSON` record (`{"epochs": [...], "starts": [...]}`).

    Example:

    ```python
    record = run_fit(model, train_ds, val_ds, "runs/babi", epochs=20, resume=True)
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
        keras.callbacks.ModelCheckpoint(str(workdir / "checkpoint.keras")),
        # Last, so an epoch counts as done only once everything above is written.
        keras.callbacks.BackupAndRestore(str(backup), delete_checkpoint=False),
    ]
    if logdir:
        all_callbacks.append(keras.callbacks.TensorBoard(str(logdir)))
    model.fit(
        train,
        validation_data=validation,
        epochs=epochs,
        callbacks=all_callbacks,
        verbose=verbose,
        shuffle=False,  # the datasets shuffle themselves
    )
    return metrics.record
