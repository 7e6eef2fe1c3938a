"""`kr.train(config, workdir=...)` and the one run lifecycle every task, command and bench goes through.

A task family registers itself (`register(Task(...))`, in its own module under `keras_relmem.tasks`): its
config class, its checks, how it trains, how its results read as a table, its default workdir and whether it
exports a SavedModel. `kr.train` finds the task by the config's type; this module names no task.

The workdir's rule, the same for every task:

- A workdir belongs to one run at a time: an exclusive lock (`fcntl.flock` on `workdir/.lock`, released by
  the operating system when the process ends, so a killed run never blocks the next) is held for the run's
  life; a second process is refused with the holder's pid.
- Running the same config on a workdir continues its run; a finished run reports its results again (no
  training, no new export). A config that differs in a field a continued run cannot change is refused,
  naming the fields; budgets and epochs (`configs.setting(resume=True)`) may change. Starting over is
  `overwrite=True` (`--overwrite`). `resume=True` (`--resume`) on a workdir with no run is an error.
- A workdir whose records say training happened but whose checkpoint is missing or unreadable is refused
  with the file's path: no run evaluates, records or exports fresh weights as a resumed result.
- Everything that can fail before training (the backend, the workdir, the export and results folders, the
  task's data, a warm-start file) is checked before anything is written; each failure is a `RunRefused`
  whose message names the path and what to do (the commands print it as one `error:` line, exit status 2).
- `config.json` records the config the weights are trained with (rewritten when a continued run changes a
  budget), and says when the run has finished; `results.json` holds the results and that config.

Example:

```python
import dataclasses, keras_relmem as kr
config = dataclasses.replace(kr.recipes.get("entnet_babi"), task=1, data="en", epochs=2)
results = kr.train(config, workdir="runs/entnet_qa1")   # trains
results = kr.train(config, workdir="runs/entnet_qa1")   # finished: the same results, reported again
kr.train(config, workdir="runs/entnet_qa1", overwrite=True)  # starts over
```
"""

import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import tempfile
import zipfile

from keras_relmem import configs
from keras_relmem.training import saved_curve, write_json

CONFIG_FILE = "config.json"
LOCK_FILE = ".lock"
# What a training run leaves in its workdir (at the top, or in a per-task / per-start folder).
RUN_FILES = ("curve.json", "checkpoint.keras", "model.keras", "metrics.json", "results.json", "starts.json")
MODEL_FILES = ("checkpoint.keras", "model.keras")


class RunRefused(ValueError):
    """A run that must not start: the message names the path (or setting) and what to do."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One task family, as `kr.train` runs it.

    Args:
        config: its config class (`keras_relmem.configs`).
        train: `(config, run) -> results dict`: trains (continuing when `run.resume`), evaluates and exports
            when `run.export`, naming the exports in the results (`"export"` or `"exports"`).
        table: `(results) -> str`, the results as the command prints them.
        workdir: the default workdir.
        check: optional `(config) -> None` raising for what would fail before training (missing data files).
        exports: whether the task exports a SavedModel (else the commands offer no export flags).
    """

    config: type
    train: object
    table: object
    workdir: str
    check: object = None
    exports: bool = True


TASKS = {}


def register(task):
    """Make `task` (a `Task`) the one `kr.train` runs for its config class; returns it."""
    TASKS[task.config] = task
    return task


def task_for(config_class):
    return TASKS[config_class]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a run goes, beside what it trains (its config): where it writes, and its controls.

    Args:
        workdir: checkpoints, metrics, `config.json` and `results.json`.
        resume: expect a run in `workdir` to continue (an error if there is none); the lifecycle sets it for
            the task whenever the workdir's run is continued.
        overwrite: start over: the workdir's run files are removed first.
        export: export a SavedModel for TF Serving at the end.
        export_dir: its base folder (default `workdir/export`).
        verbose: Keras' progress output (0 silent, 1 a bar, 2 a line per epoch; None: the task's own, a bar
            for epochs and a line a round for a run in rounds).
        strategy: a `keras_relmem.distribute` strategy name.
        jit_compile: compile the training step with XLA (None: the task's choice).
        logdir: TensorBoard log folder.
        max_steps: cap training batches per epoch (smoke tests).
        max_eval_steps: cap validation and test batches (smoke tests).
        plot: a folder for attention pictures and training curves (bAbI, Nth Farthest).
        threads: cores for TensorFlow (0: all).
        results: the results JSON (default `workdir/results.json`).
        command: the command line that started the run, recorded in its results.
        on_round: optional `(result so far) -> None`, called after every round of a run trained in rounds
            under a budget while the budget is not spent (a bench records progress with it).
    """

    workdir: str
    resume: bool = False
    overwrite: bool = False
    export: bool = True
    export_dir: str | None = None
    verbose: int | None = None
    strategy: str = "auto"
    jit_compile: bool | None = None
    logdir: str | None = None
    max_steps: int | None = None
    max_eval_steps: int | None = None
    plot: str | None = None
    threads: int = 0
    results: str | None = None
    command: str | None = None
    on_round: object = None

    def recorded(self, config):
        """What a results file records of the run: the config's fields, its recipe, and the command (if any)."""
        return {**config.to_dict(), "recipe": config.recipe, **({"command": self.command} if self.command else {})}

    @property
    def results_path(self):
        return pathlib.Path(self.results or pathlib.Path(self.workdir) / "results.json")

    def verbosity(self, default=1):
        return default if self.verbose is None else self.verbose

    def export_base(self):
        return self.export_dir or str(pathlib.Path(self.workdir) / "export")


# --- the workdir's record -------------------------------------------------------------------------------------


def read_record(workdir):
    """`workdir/config.json` as written by `write_record`, or None if there is none."""
    path = pathlib.Path(workdir) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (ValueError, OSError) as error:
        raise RunRefused(f"{path} cannot be read ({error}); start over with --overwrite or give another "
                         "workdir") from None


def recorded_config(workdir):
    """The config `workdir/config.json` records, or None if it has none."""
    record = read_record(workdir)
    if record is None:
        return None
    try:
        return configs.by_name(record["type"]).from_dict(record["config"])
    except (ValueError, KeyError, TypeError) as error:
        raise RunRefused(f"{pathlib.Path(workdir) / CONFIG_FILE} does not hold a config this version reads "
                         f"({error}); start over with --overwrite or give another workdir") from None


def write_record(workdir, config, finished=False, results=None, changes=()):
    """Record `config` as `workdir/config.json` (atomically), with whether the run has finished, where its
    results are, and the settings changed between its sittings (`changes`)."""
    from keras_relmem import __version__

    write_json(pathlib.Path(workdir) / CONFIG_FILE,
               {"type": type(config).__name__, "version": __version__, "recipe": config.recipe,
                "config": config.to_dict(), "finished": finished, **({"results": str(results)} if results else {}),
                **({"changes": list(changes)} if changes else {})})



def _nested_runs(workdir):
    """Folders below `workdir` that hold runs of their own (a `config.json`), e.g. `runs/babi/memo_joint`."""
    return [p.parent for p in pathlib.Path(workdir).rglob(CONFIG_FILE) if p.parent != pathlib.Path(workdir)]


def _own(workdir, paths):
    others = _nested_runs(workdir)
    return [p for p in paths if not any(other in p.parents for other in others)]


def _run_files(workdir):
    workdir = pathlib.Path(workdir)
    if not workdir.is_dir():
        return []
    found = _own(workdir, [p for name in RUN_FILES for p in workdir.rglob(name)])
    return sorted(str(p.relative_to(workdir)) for p in found)


def check_checkpoints(workdir):
    """Every folder of `workdir` whose curve says rounds were trained has a readable model file; else a
    `RunRefused` naming it (a resumed run must never go on from fresh weights)."""
    for curve in _own(workdir, sorted(pathlib.Path(workdir).rglob("curve.json"))):
        try:
            trained = len(saved_curve(curve.parent))
        except (ValueError, OSError) as error:
            raise RunRefused(f"{curve} cannot be read ({error}); start over with --overwrite") from None
        if not trained:
            continue
        models = [curve.parent / name for name in MODEL_FILES if (curve.parent / name).exists()]
        pending = list(curve.parent.glob(".*.round*.keras"))  # saved, not yet moved into place (training.RoundLog)
        if not models and not pending:
            raise RunRefused(f"{curve.parent / MODEL_FILES[0]} (or model.keras) is missing, though {curve} records "
                             f"{trained} trained round(s): the run cannot continue from its weights. Restore the "
                             "file, or start over with --overwrite")
        for model in models:
            if not zipfile.is_zipfile(model):
                raise RunRefused(f"{model} is not a readable .keras file (truncated or damaged): restore it, or "
                                 "start over with --overwrite")


# --- checks before anything is written ------------------------------------------------------------------------


def check_backend():
    import keras

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise RunRefused(f"KERAS_BACKEND={backend}: training, evaluation and export run on the tensorflow backend "
                         "only; set KERAS_BACKEND=tensorflow (the layers themselves run on jax and torch too)")


def check_writable(path, what):
    """`path` is (or can be made) a folder this process can write in; else a `RunRefused` naming it."""
    path = pathlib.Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise RunRefused(f"{what} {path}: {existing} is a file, not a folder; give a folder")
    try:
        with tempfile.TemporaryFile(dir=existing if existing is not None else "."):
            pass
    except OSError as error:
        raise RunRefused(f"{what} {path} is not writable ({error.strerror}); give a folder you can write "
                         "in") from None


def limit_threads(threads):
    """Run TensorFlow on `threads` cores (0 or None: all); a clear error once TensorFlow has started with
    others."""
    from keras_relmem.training import limit_threads as limit

    try:
        limit(threads)
    except RuntimeError:
        raise RunRefused(f"threads {threads}: TensorFlow already started in this process with other thread "
                         "pools; set threads before any TensorFlow op runs (a new process)") from None


# --- the lifecycle --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def workdir_lock(workdir):
    """Hold `workdir`'s exclusive lock for the block; a `RunRefused` naming the holder if another process has
    it. The operating system releases the lock when the process ends, however it ends."""
    import fcntl

    path = pathlib.Path(workdir) / LOCK_FILE
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunRefused(f"{workdir} is in use by another run (pid {holder}); wait for it to finish, or give "
                             "another workdir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()


def _start_over(workdir):
    """Remove the run files of `workdir` (not its lock, its exports, or other runs in folders of their own)."""
    workdir = pathlib.Path(workdir)
    others = _nested_runs(workdir)
    for child in workdir.iterdir():
        if child.name in (LOCK_FILE, "export") or child in others or any(child in o.parents for o in others):
            continue
        shutil.rmtree(child) if child.is_dir() else child.unlink()


def _decide(config, run, task):
    """Under the lock: what this call does with the workdir. Returns `("new" | "continue" | "finished",
    record, the config's differences from the recorded one)`, or raises `RunRefused`."""
    workdir = pathlib.Path(run.workdir)
    if run.overwrite:
        _start_over(workdir)
        return "new", None, {}
    record = read_record(workdir)
    if record is None:
        found = _run_files(workdir)
        if found:
            raise RunRefused(
                f"{workdir} holds a run without {CONFIG_FILE} ({', '.join(found[:3])}{', ...' * (len(found) > 3)}),"
                " written by keras-relmem 1.0 or by hand: give another workdir, or start over there with "
                "--overwrite")
        if run.resume:
            raise RunRefused(f"{workdir} holds no run to continue (--resume); leave out --resume to start one")
        if run.results_path.exists() and run.results_path.resolve().parent != workdir.resolve():
            raise RunRefused(f"{run.results_path} already holds a run's results, and {workdir} has no run: a new "
                             "run would overwrite them; give another results file, or start over with --overwrite")
        return "new", None, {}
    recorded = recorded_config(workdir)
    if type(recorded) is not type(config):
        raise RunRefused(f"{workdir} holds a {type(recorded).__name__} run; this config is a "
                         f"{type(config).__name__}: give another workdir")
    differences = recorded.differences(config)
    fixed = {name: pair for name, pair in differences.items()
             if not type(config).__dataclass_fields__[name].metadata.get("resume")}
    if fixed:
        listed = "; ".join(f"{name}: {old!r} there, {new!r} here" for name, (old, new) in fixed.items())
        raise RunRefused(f"{workdir} holds a run trained with other settings ({listed}): continue it with its own "
                         "settings (the command with --resume and no flags that change these), start over with "
                         "--overwrite, or give another workdir")
    check_checkpoints(workdir)
    if record.get("finished") and not differences and _results_file(record, run).is_file():
        return "finished", record, differences
    if record.get("finished") and differences and not set(differences) & set(EXTENT):
        listed = ", ".join(differences)
        raise RunRefused(f"{workdir} holds a finished run: a changed {listed} would train nothing more, and its "
                         f"record would name settings its weights were not trained with. Give more "
                         f"{' or '.join(n for n in EXTENT if n in type(config).__dataclass_fields__)} to train on "
                         "with them, start over with --overwrite, or give another workdir")
    return "continue", record, differences


# The fields that say how much a run trains: raising one continues a finished run.
EXTENT = ("epochs", "budget_minutes")


def _trained_so_far(workdir):
    """How many rounds (epochs) the longest curve below `workdir` records."""
    return max((len(saved_curve(p.parent)) for p in _own(workdir, pathlib.Path(workdir).rglob("curve.json"))),
               default=0)


def _results_file(record, run):
    """Where the run `record` describes keeps its results (the record says, else the run's own path)."""
    return pathlib.Path((record or {}).get("results") or run.results_path)


def _follow(config, run):
    """A worker of a multi-worker run (not the chief): the chief decides and writes; a worker reads the same record
    and does likewise (continue in its own `worker_N` folder, or report a finished run), so the replicas agree."""
    record = read_record(run.workdir)
    differences = recorded_config(run.workdir).differences(config) if record is not None else {}
    if record is not None and record.get("finished") and not differences and _results_file(record, run).is_file():
        return "finished", record, differences
    return ("continue" if record is not None or run.resume else "new"), record, differences


def train(config=None, workdir=None, **options):
    """Train `config` in `workdir` and return its results (the dict also written to `results.json`).

    The workdir's rule: the same config continues the run there (a finished run's results are reported
    again), another config is refused naming the fields, `overwrite=True` starts over.

    Args:
        config: a `keras_relmem.configs` instance, e.g. `kr.recipes.get("entnet_babi")` or a
            `dataclasses.replace` of one. None: continue the run `workdir` records.
        workdir: the run's folder (default: the task's, e.g. `runs/babi`).
        **options: the run's controls, `RunOptions`' fields: `resume`, `overwrite`, `export`, `export_dir`,
            `verbose`, `strategy`, `jit_compile`, `logdir`, `max_steps`, `max_eval_steps`, `plot`, `threads`,
            `results`, `command`, `on_round`.

    Returns:
        The task's results dict (bAbI: per-task accuracy and error, mean error, tasks solved; language
        model: perplexities; ...), the same as the command writes.

    Raises:
        RunRefused: the run cannot start (the message names the path or the settings and what to do).

    Example:

    ```python
    import dataclasses, keras_relmem as kr
    config = dataclasses.replace(kr.recipes.get("entnet_babi"), task=1, data="en", epochs=2)
    results = kr.train(config, workdir="runs/entnet_qa1")
    print(results["tasks"]["1"]["error"])
    results = kr.train(workdir="runs/entnet_qa1")  # the recorded run: finished, so its results again
    ```
    """
    if config is None:
        if workdir is None:
            raise ValueError("kr.train needs a config, or the workdir of a run to continue")
        config = recorded_config(workdir)
        if config is None:
            raise RunRefused(f"{workdir} records no run ({CONFIG_FILE}) to continue; pass a config")
    if not isinstance(config, configs.Config):
        raise TypeError(f"kr.train takes a keras_relmem.configs config (e.g. kr.recipes.get('entnet_babi')); got "
                        f"{type(config).__name__}")
    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(RunOptions)})
    if unknown:
        raise TypeError(f"kr.train got unknown option(s) {unknown}; it takes "
                        f"{', '.join(f.name for f in dataclasses.fields(RunOptions) if f.name != 'workdir')}")
    task = task_for(type(config))
    run = RunOptions(workdir=str(workdir or task.workdir), **options)
    if run.resume and run.overwrite:
        raise RunRefused("resume continues the run in the workdir and overwrite starts over: give one of them")
    if not task.exports:
        if run.export_dir:  # e.g. --export-dir on a recipe in rounds, whose task exports nothing
            raise RunRefused(f"export_dir {run.export_dir}: {type(config).__name__} exports nothing; leave it out")
        run = dataclasses.replace(run, export=False)
    check_backend()
    check_writable(run.workdir, "workdir")
    check_writable(run.results_path.parent, "results folder")
    if run.export:
        check_writable(run.export_base(), "export folder")
    for folder, what in ((run.logdir, "TensorBoard log folder"), (run.plot, "plot folder")):
        if folder:
            check_writable(folder, what)
    if task.check:
        try:
            task.check(config)
        except (OSError, ValueError) as error:  # missing or unreadable data, a bad warm-start file
            raise RunRefused(str(error)) from None
    from keras_relmem import distribute

    chief = distribute.is_chief()
    created = not pathlib.Path(run.workdir).exists()
    pathlib.Path(run.workdir).mkdir(parents=True, exist_ok=True)
    with workdir_lock(run.workdir) if chief else contextlib.nullcontext():
        try:
            state, record, differences = _decide(config, run, task) if chief else _follow(config, run)
        except RunRefused:
            if created:  # a refused run leaves nothing behind
                shutil.rmtree(run.workdir, ignore_errors=True)
            raise
        if state == "finished":
            results_path = _results_file(record, run)
            results = json.loads(results_path.read_text())
            print(f"{run.workdir} holds this run, finished; its results (start over with --overwrite):", flush=True)
            _report(task, results, results_path, announce=False)
            return results
        limit_threads(run.threads)
        run = dataclasses.replace(run, resume=state == "continue")
        # the record's settings changed between sittings, this sitting's added: each with the rounds before it
        changes = list((record or {}).get("changes", []))
        if differences:
            changes.append({"after": _trained_so_far(run.workdir),
                            "fields": {name: list(pair) for name, pair in differences.items()}})
            listed = ", ".join(f"{name} {old!r} -> {new!r}" for name, (old, new) in differences.items())
            print(f"continuing {run.workdir} after {changes[-1]['after']} round(s) with {listed}", flush=True)
        if chief:
            write_record(run.workdir, config, changes=changes)
        try:
            results = task.train(config, run)
        except BaseException:
            if chief and state == "new" and not _trained_so_far(run.workdir):  # failed before its first round
                (pathlib.Path(run.workdir) / CONFIG_FILE).unlink(missing_ok=True)
                if created:
                    shutil.rmtree(run.workdir, ignore_errors=True)
            raise
        results.setdefault("args", run.recorded(config))
        if changes:
            results["changes"] = changes
        if chief:
            write_json(run.results_path, results)
            write_record(run.workdir, config, finished=True, results=run.results_path, changes=changes)
            _report(task, results, run.results_path)
        return results


def _report(task, results, path, announce=True):
    """How every run ends: the results table, where they are, and each export with the line that serves it."""
    print("\n" + task.table(results), flush=True)
    print(f"Results written to {path}" if announce else f"Results in {path}", flush=True)
    if not announce:
        return
    from keras_relmem import export

    exports = results.get("exports") or {}
    for exported in [results.get("export"), *(exports.values() if isinstance(exports, dict) else exports)]:
        if exported:
            export.announce(exported)
