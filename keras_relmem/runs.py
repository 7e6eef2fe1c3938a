"""`kr.train(config, workdir=...)`: the one entry point that trains a task configuration.

It dispatches on the config's type (`keras_relmem.configs`) to its task's
trainer (bAbI, joint bAbI, language model, Nth Farthest, Learning to
Execute), each of which builds the data, the model, the optimizer and its
schedule and the callbacks, runs the training loop of
`keras_relmem.training` (resumable, atomic saves, budgets, rounds),
evaluates, exports when asked, and returns the results dict that it also
writes to `workdir/results.json`.

A workdir remembers its config: `workdir/config.json` is written before
training starts, and `kr.train(workdir=W, resume=True)` (no config) continues
the run it records. Continuing a run with another config is refused, naming
the fields, unless only fields that may change between sittings (budgets,
epochs, some training controls: `configs.setting(resume=True)`) differ. A
workdir written by keras-relmem 1.0 (run files without `config.json`) is
refused with a message, never overwritten.

The command-line tools (`relmem-train-babi`, ...) only parse flags into a
config and call this.
"""

import dataclasses
import json
import pathlib

from keras_relmem import configs

CONFIG_FILE = "config.json"
# What a training run leaves in its workdir (at the top, or in a per-task / per-start folder).
RUN_FILES = ("curve.json", "checkpoint.keras", "model.keras", "metrics.json", "results.json", "starts.json")
DEFAULT_WORKDIRS = {configs.BabiConfig: "runs/babi", configs.BabiJointConfig: "runs/babi/memo_joint",
                    configs.LMConfig: "runs/lm", configs.NthFarthestConfig: "runs/nth_farthest",
                    configs.LTEConfig: "runs/lte", configs.PAIConfig: "runs/memo_pai",
                    configs.ShortestPathConfig: "runs/memo_shortest_path",
                    configs.NthFarthestRoundsConfig: "runs/nth_farthest_rounds",
                    configs.LMRoundsConfig: "runs/lm_rounds"}


class RunRefused(ValueError):
    """A run that must not start: its workdir holds another run, or its config cannot continue that run."""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a run goes, beside what it trains (its config): where it writes, and its controls.

    Args:
        workdir: checkpoints, metrics, `config.json` and `results.json`.
        resume: continue what `workdir` holds (a joint bAbI run always does).
        export: export a SavedModel for TF Serving at the end.
        export_dir: its base folder (default `workdir/export`).
        verbose: Keras' progress output (0 silent, 1 a bar, 2 a line per epoch; None: the task's own, a bar
            for epochs and a line a round for a joint bAbI run).
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


def _trainers():
    from keras_relmem.tasks import babi, babi_joint, lm, lte, nth_farthest, pai, shortest_path

    return {configs.BabiConfig: babi.train, configs.BabiJointConfig: babi_joint.train, configs.LMConfig: lm.train,
            configs.NthFarthestConfig: nth_farthest.train, configs.LTEConfig: lte.train,
            configs.PAIConfig: pai.train, configs.ShortestPathConfig: shortest_path.train,
            configs.NthFarthestRoundsConfig: nth_farthest.train_rounds, configs.LMRoundsConfig: lm.train_rounds}


def recorded_config(workdir):
    """The config `workdir/config.json` records, or None if it has none."""
    path = pathlib.Path(workdir) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        return configs.by_name(record["type"]).from_dict(record["config"])
    except (ValueError, KeyError, TypeError) as error:
        raise RunRefused(f"{path} does not hold a config this version reads ({error}); give another workdir") \
            from None


def write_config(workdir, config):
    """Record `config` as `workdir/config.json` (atomically)."""
    from keras_relmem import __version__
    from keras_relmem.training import write_json

    write_json(pathlib.Path(workdir) / CONFIG_FILE, {"type": type(config).__name__, "version": __version__,
                                                     "recipe": config.recipe, "config": config.to_dict()})


def _run_files(workdir):
    """The run files below `workdir`, but those of another run in a folder of its own (with its `config.json`,
    e.g. the joint MEMO run's `runs/babi/memo_joint` below the bAbI runs' `runs/babi`)."""
    workdir = pathlib.Path(workdir)
    if not workdir.is_dir():
        return []
    others = [p.parent for p in workdir.rglob(CONFIG_FILE) if p.parent != workdir]
    return sorted(str(p.relative_to(workdir)) for name in RUN_FILES for p in workdir.rglob(name)
                  if not any(other in p.parents for other in others))


def check_workdir(config, workdir, resume):
    """Refuse a workdir this run must not write to: one from before configs were recorded, another task's,
    or (when continuing) one trained with settings that cannot change between sittings. Returns the recorded
    config (None for a new workdir)."""
    recorded = recorded_config(workdir)
    if recorded is None:
        found = _run_files(workdir)
        if found:
            raise RunRefused(
                f"{workdir} holds a run without {CONFIG_FILE} ({', '.join(found[:3])}{', ...' * (len(found) > 3)}),"
                " written by keras-relmem 1.0 or by hand: this version does not continue or overwrite it. Give "
                "another workdir, or continue that run with keras-relmem 1.0.0 (pip install keras-relmem==1.0.0)")
        return None
    if type(recorded) is not type(config):
        raise RunRefused(f"{workdir} holds a {type(recorded).__name__} run; this config is a "
                         f"{type(config).__name__}: give another workdir")
    if resume:
        fixed = {name: pair for name, pair in recorded.differences(config).items()
                 if not config.__dataclass_fields__[name].metadata.get("resume")}
        if fixed:
            listed = "; ".join(f"{name}: {old!r} there, {new!r} here" for name, (old, new) in fixed.items())
            raise RunRefused(f"{workdir} was trained with other settings, which a continued run cannot change "
                             f"({listed}): continue with its own config (kr.train(workdir=...), or the command "
                             "with --resume and no flags that change these), or give another workdir")
    return recorded


def train(config=None, workdir=None, **options):
    """Train `config` in `workdir` and return its results (the dict also written to `results.json`).

    Args:
        config: a `keras_relmem.configs` instance, e.g. `kr.recipes.get("entnet_babi")` or a
            `dataclasses.replace` of one. None: continue the run `workdir` records.
        workdir: the run's folder (default: the task's, e.g. `runs/babi`).
        **options: the run's controls, `RunOptions`' fields: `resume`, `export`, `export_dir`, `verbose`,
            `strategy`, `jit_compile`, `logdir`, `max_steps`, `max_eval_steps`, `plot`, `threads`, `results`.

    Returns:
        The task's results dict (bAbI: per-task accuracy and error, mean error, tasks solved; language
        model: perplexities; ...), the same as the command writes.

    Example:

    ```python
    import dataclasses, keras_relmem as kr
    config = dataclasses.replace(kr.recipes.get("entnet_babi"), task=1, data="en", epochs=2)
    results = kr.train(config, workdir="runs/entnet_qa1")
    print(results["tasks"]["1"]["error"])
    results = kr.train(workdir="runs/entnet_qa1", resume=True)  # continue it (nothing left: 2 epochs done)
    ```
    """
    if config is None:
        if workdir is None:
            raise ValueError("kr.train needs a config, or the workdir of a run to continue")
        config = recorded_config(workdir)
        if config is None:
            raise RunRefused(f"{workdir} records no config ({CONFIG_FILE}) to continue; pass a config")
        options.setdefault("resume", True)
    if not isinstance(config, configs.Config):
        raise TypeError(f"kr.train takes a keras_relmem.configs config (e.g. kr.recipes.get('entnet_babi')); got "
                        f"{type(config).__name__}")
    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(RunOptions)})
    if unknown:
        raise TypeError(f"kr.train got unknown option(s) {unknown}; it takes "
                        f"{', '.join(f.name for f in dataclasses.fields(RunOptions) if f.name != 'workdir')}")
    workdir = str(workdir or DEFAULT_WORKDIRS[type(config)])
    run = RunOptions(workdir=workdir, **options)
    continues = run.resume or isinstance(config, configs.BabiJointConfig)  # a joint run always continues
    check_workdir(config, workdir, continues)
    from keras_relmem import distribute

    if isinstance(config, configs.BabiConfig):
        from keras_relmem.tasks.babi import check_files

        check_files(config)  # before the workdir is written
    if isinstance(config, configs.BabiJointConfig):
        from keras_relmem.tasks.babi_joint import refuse_to_overwrite

        refuse_to_overwrite(run.results_path, pathlib.Path(workdir))
    if distribute.is_chief():
        write_config(workdir, config)
    from keras_relmem.training import limit_threads

    limit_threads(run.threads)
    return _trainers()[type(config)](config, run)
