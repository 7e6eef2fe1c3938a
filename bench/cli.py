"""What every bench command shares: its common flags, thread limits and the choice of what to run."""

from keras_relmem.tasks.common import limit_threads  # noqa: F401  (the benches' thread limit is the library's)


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


def add_recipe_argument(parser, task, default=None):
    """--recipe NAME: one of `task`'s recipes (`keras_relmem.recipes.names(task)`) gives the flags' defaults.
    Added first, so a recorded run's arguments name the recipe before the flags that override it."""
    from keras_relmem import recipes

    parser.add_argument("--recipe", choices=recipes.names(task), default=default,
                        help="a named recipe (keras_relmem.recipes) whose settings are the defaults of the other "
                             "flags; an explicit flag overrides its part (default: %(default)s)")
    return parser


def parse_with_recipe(parser, argv):
    """Parse `argv` with the defaults of its --recipe (explicit flags still win)."""
    from keras_relmem.tasks.common import apply_recipe

    name = parser.parse_known_args(argv)[0].recipe
    if name:
        apply_recipe(parser, name)
    return parser.parse_args(argv)


def run_arguments(args, *leave_out):
    """The run's arguments as recorded in its results file (without --report, --results and `leave_out`)."""
    skip = {"report", "results", *leave_out}
    return {k: v for k, v in vars(args).items() if k not in skip}


def dispatch(args, run, **modes):
    """Call the mode whose flag is set (`report=report` runs when `args.report`), else `run(args)`."""
    for flag, mode in modes.items():
        if getattr(args, flag, None):
            return mode(args)
    return run(args)
