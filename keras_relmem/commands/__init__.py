"""The console scripts' flags: each training command's flags are its config's fields, and a command only parses.

`relmem-train-babi`, `relmem-train-lm`, `relmem-train-nth-farthest` and
`relmem-train-lte` build their flags from a config class
(`keras_relmem.configs`): a field `learning_rate` is `--learning-rate`, with
the field's type, help and the default recipe's value in `--help`. A command
maps `--recipe NAME` (or the model's default recipe) and the flags given onto
one config, and calls `kr.train` with it; `--list-recipes` prints every recipe
with the command that trains it.

Example:

```python
>>> from keras_relmem.commands import parse
>>> from keras_relmem import configs, recipes
>>> config, options, _ = parse(["--model", "lstm", "--units", "256", "--epochs", "2", "--workdir", "runs/x"],
...                         [configs.NthFarthestConfig], lambda given: recipes.default(
...                             configs.NthFarthestConfig, given.get("model", "rmc")), "runs/nth_farthest")
>>> config.recipe, config.units, config.epochs, options["workdir"]
('nth_farthest_lstm', 256, 2, 'runs/x')

```
"""

import argparse
import dataclasses
import sys
import types
import typing
from typing import Literal

from keras_relmem.distribute import STRATEGIES


def _value_type(kind):
    """An argparse `type` for one value of a config field's type (`None` spelt "none" where it is allowed)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    optional = origin in (typing.Union, types.UnionType) and type(None) in args
    options = [a for a in args if a is not type(None)] if origin in (typing.Union, types.UnionType) else [kind]

    def parse(text):
        if optional and text.lower() == "none":
            return None
        for option in options:
            if typing.get_origin(option) is Literal:
                for value in option.__args__:
                    if str(value) == text:
                        return value
                continue
            try:
                return option(text)
            except ValueError:
                continue
        raise argparse.ArgumentTypeError(f"expected {_words(kind)}; got {text!r}")

    return parse


def _words(kind):
    from keras_relmem.configs import _describe

    return _describe(kind)


def _metavar(kind):
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        parts = [_metavar(a) for a in args if a is not type(None)]
        return "|".join(parts) + ("|none" if type(None) in args else "")
    if origin is Literal:
        return "{" + ",".join(map(str, args)) + "}"
    return {int: "N", float: "X", str: "TEXT"}.get(kind, "VALUE")


def _merged(kinds):
    """One type that takes the values of every type in `kinds`: their literals in one `Literal`."""
    literals, others = [], []
    for kind in kinds:
        union = typing.get_origin(kind) in (typing.Union, types.UnionType)
        for member in typing.get_args(kind) if union else (kind,):
            if typing.get_origin(member) is Literal:
                literals += [v for v in typing.get_args(member) if v not in literals]
            elif member not in others:
                others.append(member)
    members = ([Literal[tuple(literals)]] if literals else []) + others
    merged = members[0]
    for member in members[1:]:
        merged = merged | member
    return merged


def _shown(value):
    if isinstance(value, tuple):
        return " ".join(map(str, value)) or "(none)"
    return value


def add_config_arguments(parser, classes, shown):
    """A flag for every field of the config `classes` (a field they share is one flag); nothing is set unless
    given (`argparse.SUPPRESS`), and `--help` shows each field's value in `shown` (a config, or a list of
    configs: the first that has the field)."""
    shown = shown if isinstance(shown, (list, tuple)) else [shown]
    group = parser.add_argument_group(
        "settings", "The config's fields. A flag overrides one part of the recipe the run starts from; the "
                    "defaults shown are the command's default recipe's.")
    kinds = {}  # a field the classes share takes the values of either (relmem-train-memo's --task pai|shortest_path)
    for cls in classes:
        for name, kind in typing.get_type_hints(cls).items():
            if kind not in kinds.setdefault(name, []):
                kinds[name].append(kind)
    done = set()
    for cls in classes:
        for field in cls.settings():
            if field.name in done:
                continue
            done.add(field.name)
            boolean = all(k is bool or typing.get_args(k) == (True,) for k in kinds[field.name])
            kind = bool if boolean else _merged(kinds[field.name])
            source = next((c for c in shown if hasattr(c, field.name)), None)
            default = field.default if source is None else getattr(source, field.name)
            flag = "--" + field.name.replace("_", "-")
            # a field the command's own default recipe lacks: its value is that of the recipe the flag makes it run
            where = (f" in recipe {source.recipe}, which this flag makes the command run"
                     if source is not None and source is not shown[0] and getattr(source, "recipe", None) else "")
            help_text = f"{field.metadata['help']} (default: {_shown(default)}{where})".replace("%", "%%")
            listed = [k for k in (kind, *typing.get_args(kind)) if typing.get_origin(k) is tuple]
            item = typing.get_args(listed[0])[0] | None if listed else kind  # "none" names no list at all
            if kind is bool:  # a Literal[True] field (the joint run's `joint`) is a bool flag too
                group.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction,
                                   default=argparse.SUPPRESS, help=help_text)
            elif listed:
                group.add_argument(flag, dest=field.name, nargs="*", type=_value_type(item), metavar=_metavar(item),
                                   default=argparse.SUPPRESS, help=help_text)
            else:
                group.add_argument(flag, dest=field.name, type=_value_type(kind), metavar=_metavar(kind),
                                   default=argparse.SUPPRESS, help=help_text)
    return parser


def add_run_arguments(parser, workdir, plot=False, classes=()):
    """The run's controls (`keras_relmem.runs.RunOptions`): where it writes, resumption, export, output.
    `workdir` None: each config class's own default folder (its task's, `keras_relmem.runs.task_for`), named in
    `--help` for `classes`; the export flags only where one of their tasks exports a SavedModel."""
    from keras_relmem.runs import task_for

    group = parser.add_argument_group(
        "run", "A workdir holds one run: the same settings continue it (a finished run reports its results "
               "again), other settings are refused, --overwrite starts over.")
    shown = workdir or ", ".join(f"{task_for(cls).workdir} for a {cls.__name__}" for cls in classes)
    group.add_argument("--workdir", default=workdir,
                       help=f"checkpoints, metrics, config.json and results.json (default: {shown})")
    group.add_argument("--resume", action="store_true",
                       help="continue the run in --workdir, an error if it holds none (with no settings given: the "
                            "config it records)")
    group.add_argument("--overwrite", action="store_true",
                       help="start over: remove the run in --workdir first (its exports are kept)")
    group.add_argument("--results", default=None, help="the results JSON (default: WORKDIR/results.json)")
    if any(task_for(cls).exports for cls in classes):
        group.add_argument("--export-dir", default=None, help="TF Serving base folder (default: WORKDIR/export)")
        group.add_argument("--no-export", dest="export", action="store_false", help="do not export a SavedModel")
    group.add_argument("--strategy", choices=STRATEGIES, default="auto", help="tf.distribute strategy (default: auto)")
    group.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None,
                       help="compile the training step with XLA (default: the task's choice)")
    group.add_argument("--logdir", default=None, help="TensorBoard log folder")
    group.add_argument("--threads", type=int, default=0, help="cores for TensorFlow (default: 0, all)")
    group.add_argument("--max-steps", type=positive_int, default=None,
                       help="cap training steps per epoch (smoke tests)")
    group.add_argument("--max-eval-steps", type=positive_int, default=None,
                       help="cap validation and test steps (smoke tests; default: every batch)")
    group.add_argument("--verbose", type=int, choices=[0, 1, 2], default=None,
                       help="Keras' progress output: 0 none, 1 a bar, 2 a line per epoch (default: a bar; a line "
                            "per round for a joint bAbI run)")
    if plot:
        group.add_argument("--plot", default=None, metavar="DIR",
                           help="write attention pictures of a few test examples and the training curves")
    return parser


def show_defaults(parser):
    """Give every flag of `parser` that has a default and does not name it in its help a
    "(default: ...)" in `--help` (for the commands whose flags are not a config's). Returns `parser`."""
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if action.default in (None, False, argparse.SUPPRESS) or action.dest == "help":
            continue
        if action.help is None or "default" not in action.help:
            action.help = f"{action.help} (default: %(default)s)" if action.help else "(default: %(default)s)"
    return parser


def positive_int(text):
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


RUN_FLAGS = ("workdir", "resume", "overwrite", "results", "export_dir", "export", "strategy", "jit_compile", "logdir",
             "threads", "max_steps", "max_eval_steps", "verbose", "plot")


def build_parser(description, classes, shown, workdir, plot=False):
    """A training command's parser: --list-recipes, --recipe, the config `classes`' fields, the run's flags."""
    # no abbreviations: `--epoch 3` must be an error, not a quiet `--epochs 3`
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    parser.add_argument("--list-recipes", action="store_true", help="list the named recipes and exit")
    parser.add_argument("--recipe", default=None, metavar="NAME",
                        help="the named recipe to start from (see --list-recipes); flags given override its parts "
                             "(default: the model's own)")
    add_config_arguments(parser, classes, shown)
    return add_run_arguments(parser, workdir, plot=plot, classes=classes)


def command_line(config, base=None):
    """The shortest command that trains `config`: its class's command, `--recipe` of `base` (default: the
    config's own recipe), and a flag for every field that differs from it.

    Example:

    ```python
    >>> import dataclasses
    >>> from keras_relmem import recipes
    >>> command_line(dataclasses.replace(recipes.get("entnet_babi"), task=2, seed=3))
    'relmem-train-babi --recipe entnet_babi --task 2 --seed 3'

    ```
    """
    from keras_relmem import recipes

    base = base or (recipes.get(config.recipe) if config.recipe else type(config)())
    words = [config.command] + (["--recipe", base.recipe] if base.recipe and base.recipe != "quickstart" else [])
    for name, (value, _) in config.differences(base).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, tuple):
            words += [flag, *map(str, value)]
        else:
            words += [flag, "none" if value is None else repr(value) if isinstance(value, float) else str(value)]
    return " ".join(words)


def parse(argv, classes, choose, workdir, description=None, shown=None, plot=False, extra=None, prog=None):
    """Parse a training command's `argv` into `(config, run options)`.

    Args:
        argv: the command's arguments.
        classes: the config classes whose fields are its flags.
        choose: `(given settings) -> config`: the recipe (or recorded config) the flags apply to when no
            `--recipe` is named.
        workdir: the default `--workdir` (None: the config class's task's, `keras_relmem.runs.task_for`).
        description: the `--help` text.
        shown: the config(s) whose values `--help` shows as defaults (default: `choose({})`).
        plot: whether the command takes `--plot`.
        extra: optional `(parser) -> None` adding a caller's own flags (a bench's modes).

    Returns:
        `(config, options, namespace)`: the config to train, the `kr.train` keyword arguments and every
        parsed flag. `--list-recipes` prints the recipes and exits; a bad flag, recipe or value exits with a
        usage error naming it.
    """
    from keras_relmem import recipes, runs

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(description, classes, shown or choose({}), workdir, plot=plot)
    if prog:
        parser.prog = prog
    if extra:
        extra(parser)
    for cls in classes:  # a flag renamed in 1.2: refused, naming its replacement
        for old, (_, replacement) in cls.RENAMED.items():
            flag = "--" + old.replace("_", "-")
            if any(a == flag or a.startswith(flag + "=") for a in argv):
                parser.error(f"{flag} is now {replacement} (MEMO's own argument names; see the CHANGELOG)")
    namespace = parser.parse_args(argv)
    command = classes[0].command
    if namespace.list_recipes:
        print(recipes.listing(command))
        raise SystemExit(0)
    fields = {f.name for cls in classes for f in cls.settings()}
    given = {k: None if isinstance(v, list) and None in v else v for k, v in vars(namespace).items() if k in fields}
    options = {k: v for k, v in vars(namespace).items() if k in RUN_FLAGS}
    options["command"] = " ".join([command, *argv])
    try:
        if namespace.recipe:
            base = recipes.get(namespace.recipe)
            if base.command != command:
                parser.error(f"--recipe {namespace.recipe} is a recipe of {base.command}, not of {command} "
                             "(see --list-recipes)")
            if "model" in given and given["model"] != base.model:
                parser.error(f"--recipe {base.recipe} is for --model {base.model}; got --model {given['model']}")
        else:
            chosen = choose(given)
            where = namespace.workdir or runs.task_for(type(chosen)).workdir
            recorded = runs.recorded_config(where) if namespace.resume else None
            if recorded is not None and type(recorded) not in classes:
                parser.error(f"--resume: {where} holds a {type(recorded).__name__} run, which {command} does not "
                             "train; give the workdir of one of its runs")
            base = recorded if recorded is not None and not (set(given) & {"model", "joint"}) else chosen
        other = sorted(set(given) - {f.name for f in type(base).settings()})
        if other:
            flags = ", ".join("--" + name.replace("_", "-") for name in other)
            parser.error(f"{flags}: not a setting of {type(base).__name__} (recipe {base.recipe}); see --help")
        return dataclasses.replace(base, **given), options, namespace
    except runs.RunRefused as error:
        print(f"{command}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except (KeyError, ValueError) as error:
        parser.error(str(error.args[0]))


def run(argv, classes, choose, workdir, description, shown=None, plot=False, announce=None):
    """A training command: `parse` its arguments and `kr.train` the config; problems found before training
    starts (the workdir, the data files) are usage errors naming them. Returns the results."""
    from keras_relmem import runs

    argv = list(sys.argv[1:] if argv is None else argv)
    config, options, _ = parse(argv, classes, choose, workdir, description, shown=shown, plot=plot,
                               prog=classes[0].command)
    if announce:
        announce(config)
    from keras_relmem.data.sources import DataFormatError

    try:
        return runs.train(config, **options)
    except (runs.RunRefused, OSError, DataFormatError) as error:  # refused, missing files, unreadable data
        print(f"{classes[0].command}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
