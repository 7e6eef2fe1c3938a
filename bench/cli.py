"""What every bench command shares: its common flags, thread limits, the choice of what to run, and (for the
benches that train a library config) its flags parsed as the library's command parses them."""

import sys

from keras_relmem.training import limit_threads  # noqa: F401  (the benches' thread limit is the library's)


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
