"""Command-line pieces shared by the task scripts (and tuning/)."""

import argparse

from keras_relmem.distribute import STRATEGIES


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def show_defaults(parser):
    """Give every flag of `parser` that has a default and does not name it in its help a
    "(default: ...)" in `--help`. Returns `parser`.

    `argparse.ArgumentDefaultsHelpFormatter` shows a default only for flags that have a help
    text, and twice for those whose help already names it.
    """
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if action.default in (None, False, argparse.SUPPRESS) or action.dest == "help":
            continue
        if action.help is None or "default" not in action.help:
            action.help = f"{action.help} (default: %(default)s)" if action.help else "(default: %(default)s)"
    return parser


def add_run_arguments(parser, workdir):
    """Flags every long training run has: strategy, XLA, checkpoints, logs, export, seed."""
    group = parser.add_argument_group("run")
    group.add_argument("--strategy", choices=STRATEGIES, default="auto", help="tf.distribute strategy (default auto)")
    group.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None,
                       help="compile the training step with XLA (default: the task's choice)")
    group.add_argument("--workdir", default=workdir, help=f"checkpoints, metrics and results (default {workdir})")
    group.add_argument("--resume", action="store_true", help="continue from the last completed epoch in --workdir")
    group.add_argument("--logdir", default=None, help="TensorBoard log folder")
    group.add_argument("--export-dir", default=None, help="TF Serving base folder (default WORKDIR/export)")
    group.add_argument("--no-export", action="store_true", help="do not export a SavedModel")
    group.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    group.add_argument("--max-steps", type=positive_int, default=None,
                       help="cap training steps per epoch (smoke tests); evaluation is capped only by "
                            "--max-eval-steps")
    group.add_argument("--max-eval-steps", type=positive_int, default=None,
                       help="cap validation and test steps (smoke tests; default: every batch)")
    group.add_argument(
        "--verbose", type=int, choices=[0, 1, 2], default=1, help="Keras progress output (default 1: a bar)"
    )
    return parser


def limit_threads(threads):
    """Run TensorFlow on `threads` cores (inter- and intra-op pools; 0 or None: all), e.g. one core per
    run so that two runs can go side by side. Other backends are left alone."""
    import keras

    if threads and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(threads)
        tf.config.threading.set_intra_op_parallelism_threads(threads)


def add_recipe_arguments(parser, task):
    """--list-recipes and --recipe NAME for a task script whose flags a recipe of `task` fills."""
    parser.add_argument("--list-recipes", action="store_true", help=f"list the named {task} recipes and exit")
    parser.add_argument("--recipe", default=None, metavar="NAME",
                        help="a named recipe (see --list-recipes); flags given override its single parts "
                             "(default: the model's own)")
    return parser


def apply_recipe(parser, name):
    """Make recipe `name`'s settings the defaults of `parser`'s flags (explicit flags still win); a recipe
    naming a flag the parser lacks is refused, since it would be silently ignored. Returns the recipe."""
    from keras_relmem import recipes

    try:
        recipe = recipes.get(name)
    except KeyError as error:
        parser.error(str(error.args[0]))
    unknown = sorted(set(recipe.settings) - {action.dest for action in parser._actions})
    if unknown:
        parser.error(f"--recipe {name} sets {unknown}, which are not flags of this command")
    parser.set_defaults(**recipe.settings)
    return recipe


def parse_with_recipes(parser, argv, task):
    """Parse `argv` for a task script with recipes (`add_recipe_arguments`): --list-recipes prints the
    task's recipes and exits; the settings of --recipe (which also names the model), or of --model's
    default recipe, are the defaults of the other flags. `args.recipe` names the recipe used."""
    from keras_relmem import recipes

    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("--model")
    named.add_argument("--recipe")
    named.add_argument("--list-recipes", action="store_true")
    chosen = named.parse_known_args(argv)[0]
    if chosen.list_recipes:
        print(recipes.listing(task, others=True))
        raise SystemExit(0)
    model = chosen.model or parser.get_default("model")
    if chosen.recipe:
        if chosen.recipe in recipes.names() and recipes.get(chosen.recipe).task != task:
            parser.error(f"--recipe {chosen.recipe} is a {recipes.get(chosen.recipe).task} recipe; this command "
                         f"trains {task} (see --list-recipes)")
        recipe = apply_recipe(parser, chosen.recipe)
        if chosen.model is None:
            parser.set_defaults(model=recipe.model)
        elif chosen.model != recipe.model:
            parser.error(f"--recipe {recipe.name} is for --model {recipe.model}; got --model {chosen.model}")
    else:
        recipe = recipes.default(task, model)
        if recipe is not None:
            apply_recipe(parser, recipe.name)
    args = parser.parse_args(argv)
    args.recipe = recipe.name if recipe else None
    return args
