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
