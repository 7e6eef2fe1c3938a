"""What the studies share: their common flags, thread limits and the choice of what to run; results files read
and merged into atomically as runs finish; runs by name and curve pictures; steady-state step timing.

A study's runner that trains a library config parses its flags as the library's `relmem-...` command parses
them (`parse_config`) and trains it with `kr.train` (`train_config`), so the user's command reproduces what the
study measured.
"""

import fcntl
import json
import pathlib
import statistics
import sys
import time

from keras_relmem.training import (
    limit_threads,  # noqa: F401  (the studies' thread limit is the library's)
    write_json,
)

# Flags and dispatch

def add_bench_arguments(parser, workdir, results, report_help="print the table from the JSON", seed=True):
    """The options every budgeted bench shares: --threads, --seed, --workdir, --results, --report.

    (`keras_relmem.tasks.common.add_run_arguments` is the task scripts'
    counterpart: epochs, checkpoints and export.)
    """
    parser.add_argument("--threads", type=int, default=0, help="cores for TensorFlow (0: all)")
    if seed:
        parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=workdir, help="saved models and curves, one folder per run")
    parser.add_argument("--results", default=str(results), help="the results JSON (default: %(default)s)")
    parser.add_argument("--report", action="store_true", help=report_help)
    return parser


def parse_config(argv, config_class, workdir, results, description, modes=(), derived=(), more=None):
    """A bench's flags for a library config: the config's fields (and `--recipe`, from `keras_relmem.recipes`)
    parsed as its `relmem-...` command parses them, over the config class's own defaults; the run's flags
    (`--workdir`, `--threads`, `--results`, ...); `--name`, `--report` and the bench's `modes` (flags that
    choose another mode, each a `store_true`).

    Returns the flags as a namespace holding every field of the config (and its `derived` properties, e.g.
    MEMO's hops, as results files recorded them), with `config`, the config itself. `more(parser)` adds a
    bench's other flags.
    """
    from keras_relmem.commands import parse

    def extra(parser):
        parser.add_argument("--name", default=None, help="the run's key in the results (default: the model)")
        parser.add_argument("--report", action="store_true", help="print the tables from the JSON")
        for mode, text in modes:
            parser.add_argument("--" + mode.replace("_", "-"), action="store_true", help=text)
        if more:
            more(parser)

    config, _, args = parse(argv, [config_class], lambda given: config_class(), workdir, description, extra=extra)
    for name, value in config.to_dict().items():
        setattr(args, name, value)
    for name in derived:
        setattr(args, name, getattr(config, name))
    args.recipe, args.config = config.recipe, config
    args.results = args.results or str(results)
    return args


def train_config(args, workdir, key, record):
    """Train `args.config` in `workdir` through `kr.train` (export off, the bench's threads), recording the
    result so far after every round and the complete one at the end with `record(result)`; returns it."""
    from keras_relmem.runs import RunRefused, train

    try:
        result = train(args.config, workdir=str(workdir), threads=args.threads, export=False,
                       results=str(workdir / "results.json"), on_round=record, verbose=0,
                       command=" ".join(["python -m bench." + key, *sys.argv[1:]]))
    except RunRefused as error:
        raise SystemExit(f"error: {error}") from None
    record(result)
    return result


# the library command's run flags that a bench's results do not record (where and how it ran, not what)
LIBRARY_RUN_FLAGS = ("resume", "export_dir", "export", "strategy", "jit_compile", "logdir", "max_steps",
                     "max_eval_steps", "verbose", "plot")


def run_arguments(args, *leave_out):
    """The run's arguments as recorded in its results file (without --report, --results, the config object and
    `leave_out`)."""
    library = LIBRARY_RUN_FLAGS if hasattr(args, "config") else ()
    skip = {"report", "results", "config", "list_recipes", *library, *leave_out}
    return {k: v for k, v in vars(args).items() if k not in skip}


def dispatch(args, run, **modes):
    """Call the mode whose flag is set (`report=report` runs when `args.report`), else `run(args)`."""
    for flag, mode in modes.items():
        if getattr(args, flag, None):
            return mode(args)
    return run(args)


# Results files

def read_results(path):
    """The results JSON at `path`, or exit with a message when the bench has not run."""
    path = pathlib.Path(path)
    if not path.exists():
        # a study's committed tables are its results folder's files: name them, for --report --results
        others = sorted(p.name for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
        sys.exit(f"No results yet: {path}. Run the study first"
                 + (f", or report one of its files with --results {path.parent}/NAME: {', '.join(others)}"
                    if others else "") + ".")
    return json.loads(path.read_text())


def record_model_result(path, key, model, result, arguments):
    """MEMO's figures into `results[key]` itself, the EMN-style baseline's into `results[key]["EMN"]`."""
    if model == "memo":
        merge_result(path, key, result, arguments, update=True)
    else:
        merge_result(path, (key, "EMN"), result, arguments)


def merge_result(path, key, value, arguments, update=False):
    """Set `results[key] = value` in the JSON file at `path` (atomically), keeping
    the other keys, and record the arguments used under `args[key]`.

    `key` may be a tuple naming a nested entry: `("4", "EMN")` sets
    `results["4"]["EMN"]` and records the arguments under `args["4/EMN"]`.
    With `update`, a dict `value` updates the entry's keys instead of replacing
    it (so `results["4"]` can hold one model's figures and another's entry).
    `arguments=None` records none (a file whose header holds its run's arguments).
    A callable `value` is given the entry as the file holds it now (or None)
    and returns the new one: runs of the same table finishing side by side
    then add to each other's work instead of overwriting it."""
    keys = (key,) if isinstance(key, str) else tuple(key)

    def merge(results):
        entry = results
        for name in keys[:-1]:
            entry = entry.setdefault(name, {})
        if callable(value):
            entry[keys[-1]] = value(entry.get(keys[-1]))
        elif update:
            entry.setdefault(keys[-1], {}).update(value)
        else:
            entry[keys[-1]] = value
        if arguments is not None:
            results.setdefault("args", {})["/".join(keys)] = arguments

    return update_results(path, merge)


def update_results(path, change):
    """Apply `change(results)` (which edits the dict in place) to the JSON file at `path`, atomically and
    one writer at a time, and return the new contents: for a file whose summary is computed from its runs."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Two models timed side by side may finish together: one writer at a time.
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(path.read_text()) if path.exists() else {}
        change(results)
        write_json(path, results)
    return results


def cell(value, spec=".2f"):
    """A table cell: `value` formatted by `spec`, or empty when there is none."""
    return "" if value is None else format(value, spec)


# Runs by name and curve pictures

def run_names(results):
    """The runs of a results file by name (not its "args"): the RMC's first, then the others by name."""
    return sorted((n for n in results if n != "args"), key=lambda n: (not n.startswith("rmc"), n))


def draw_model_curves(results, metric, label, title, results_path, dashed=None, **kwargs):
    """Every run's curve of `metric` (the RMC's, the LSTM's, ...) against training minutes, beside the results
    file (PNG); `dashed={run name: (metric, legend suffix)}` adds a second metric of those runs, dashed."""
    from keras_relmem.viz import budget_curves

    return budget_curves({name.upper(): results[name]["curve"] for name in run_names(results)
                          if "curve" in results[name]},
                         metric, label, title, pathlib.Path(results_path).with_suffix(".png"),
                         dashed={name.upper(): d for name, d in (dashed or {}).items()}, **kwargs)


# Step timing

def seconds_per_step(model, x, y, batch_size, warmup=2):
    """Median seconds of a training step, after `warmup` steps (tracing, XLA)."""
    import keras

    class StepTimer(keras.callbacks.Callback):  # the wall time of every training batch
        def on_train_batch_begin(self, batch, logs=None):
            self._start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self._start)

    times = []
    timer = StepTimer()
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
    steady = times[warmup:]
    if not steady:
        raise ValueError("Give more batches than warm-up steps.")
    return float(statistics.median(steady))


def seconds_for_steps(model, dataset, steps, settle=3):
    """Wall seconds of `steps` training batches of `dataset` (repeated), after `settle` untimed batches.

    Trace or compile every batch shape first (one batch of each through
    `fit`): the settling batches only take up the steady state, so no
    tracing or XLA compilation lands in the timed steps.
    """
    model.fit(dataset, steps_per_epoch=settle, epochs=1, verbose=0, shuffle=False)
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    return time.perf_counter() - start
