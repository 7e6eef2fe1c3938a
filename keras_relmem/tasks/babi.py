"""bAbI question answering: the library behind `tasks/train_babi.py`.

Trains one model per task (or one on all tasks with `--joint`), prints a
per-task table of test accuracy and error with the number of tasks solved
(error < 5%, the bAbI convention), writes it as JSON and exports the model for
TF Serving.
"""

import argparse
import os
import pathlib
import sys
import time

from keras_relmem.data import babi as babi_data
from keras_relmem.tasks import common

# The embedded default: what `python tasks/train_babi.py` runs with no
# arguments (EntNet, task 1 of the 1k set, ~1 minute on 2 CPU cores).
QUICK_DEFAULT = ["--model", "entnet", "--task", "1", "--data", "en", "--epochs", "20"]
CHOOSING_FLAGS = {"--model", "--task", "--joint", "--data", "--epochs", "--recipe"}

# Training recipes (keras_relmem.recipes): a flag left unset takes the value of --recipe, by default the
# model's default recipe (EntNet: the measured best; `--recipe entnet_babi_paper`, or `--paper-recipe`, the
# paper's). MEMO with --joint (its joint recipes) trains in rounds: `keras_relmem.tasks.babi_joint`.
SOLVED_ERROR = 0.05


def parse_task(text):
    if text == "all":
        return "all"
    try:
        task = int(text)
    except ValueError:
        task = None
    if task not in babi_data.TASK_NAMES:
        raise argparse.ArgumentTypeError(f"tasks are 1..20 or 'all'; got {text!r}")
    return task


def build_parser():
    parser = argparse.ArgumentParser(
        description=(
            "Train a memory model on bAbI question answering. Unless --model, --task, "
            "--joint, --data or --epochs is given, runs the quick default: "
            f"{' '.join(QUICK_DEFAULT)}; otherwise the model's recipe (EntNet: 200 epochs)."
        ),
    )
    parser.add_argument("--model", choices=("entnet", "lstm", "memo", "rmc"), default="entnet")
    parser.add_argument("--list-recipes", action="store_true", help="list the named recipes and exit")
    parser.add_argument("--recipe", default=None, metavar="NAME",
                        help="a named recipe (see --list-recipes); flags given override its single parts "
                             "(default: the model's own, e.g. entnet_babi)")
    parser.add_argument("--task", type=parse_task, default=1, help="1..20 or 'all' (default 1)")
    parser.add_argument("--joint", action="store_true", help="one model on all the given tasks")
    parser.add_argument("--data", choices=babi_data.DATASETS, default="en", help="1k or 10k questions per task")
    parser.add_argument("--data-dir", default=None, help="local bAbI copy (default $KERAS_RELMEM_DATA)")
    parser.add_argument("--memory-size", type=int, default=None, help="sentences kept (default 70; 130 with task 3)")
    parser.add_argument(
        "--epochs", type=common.positive_int, default=None, help="default: the model's recipe (EntNet 200)"
    )
    parser.add_argument("--batch-size", type=common.positive_int, default=None, help="global batch size (default 32)")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--paper-recipe", action="store_true",
                        help="EntNet: the paper's recipe (step schedule, untied keys, no weight decay) instead of "
                             "the default cyclic schedule, tied keys and weight decay 0.02 (--recipe "
                             "entnet_babi_paper)")
    parser.add_argument("--schedule", choices=("step", "plateau", "cyclic"), default=None,
                        help="step: halve every --halve-every epochs (the papers'); plateau: halve after "
                             "--patience epochs without a better validation loss; cyclic: triangular cycles "
                             "from --min-learning-rate up to --learning-rate and back (the EntNet TF port's). "
                             "Default: cyclic for EntNet, step otherwise")
    parser.add_argument("--halve-every", type=int, default=None, help="halve the learning rate every N epochs")
    parser.add_argument("--patience", type=common.positive_int, default=3, help="plateau: epochs to wait")
    parser.add_argument("--min-learning-rate", type=float, default=2e-4, help="cyclic: the rate between peaks")
    parser.add_argument("--half-cycle-epochs", type=float, default=10, help="cyclic: epochs from trough to peak")
    parser.add_argument("--clipnorm", type=float, default=None, help="gradient norm clip (default 40)")
    parser.add_argument("--weight-decay", type=float, default=None,
                        help="decoupled weight decay, as AdamW: each step every weight shrinks by the learning "
                             "rate x this of itself (default 0.02 for EntNet, 0 otherwise and in the papers)")
    parser.add_argument("--decay-scope", choices=("all", "matrices"), default=None,
                        help="which weights --weight-decay shrinks: all, or only the embeddings and kernels "
                             "(not positional masks and PReLU slopes, which start at one, nor biases); "
                             "default: matrices for EntNet, all otherwise")
    parser.add_argument("--embedding-stddev", type=float, default=None,
                        help="EntNet: the word embeddings' (and tied keys') initial N(0, stddev) "
                             "(default 0.3; the paper's 0.1 with --paper-recipe)")
    parser.add_argument("--embedding-dim", type=int, default=None, help="d (EntNet default 100)")
    parser.add_argument("--num-blocks", type=int, default=None, help="EntNet memory blocks / RMC attention blocks")
    parser.add_argument("--tied-keys", action=argparse.BooleanOptionalAction, default=None,
                        help="EntNet: one memory block per entity word of the task, its key and initial memory "
                             "that word's embedding (the authors' -tied 1; the default); overrides --num-blocks")
    parser.add_argument("--mem-slots", type=int, default=None, help="RMC memory slots")
    parser.add_argument("--num-heads", type=int, default=None, help="RMC attention heads")
    parser.add_argument("--head-size", type=int, default=None, help="RMC head size")
    parser.add_argument("--max-hops", type=int, default=None, help="MEMO's hard stop N (default 5)")
    parser.add_argument("--validation-split", type=float, default=0.1)
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="stop each model's training after this many minutes, whatever --epochs says "
                             "(keras_relmem.callbacks.TimeBudget; the EntNet table's runs had 10)")
    parser.add_argument("--restore-best", action="store_true",
                        help="test the weights of the epoch with the lowest validation loss rather than the last "
                             "epoch's (the EntNet table's runs did)")
    parser.add_argument("--no-buckets", action="store_true",
                        help="pad every batch to the memory window instead of batching stories of similar "
                             "length padded to their bucket (EntNet and MEMO, one replica)")
    parser.add_argument("--plot", default=None, metavar="DIR",
                        help="write attention/gate pictures of a few test questions and the training curves")
    return common.show_defaults(common.add_run_arguments(parser, "runs/babi"))


def babi_recipe(args, parser):
    """The recipe whose settings fill the unset flags: --recipe, --paper-recipe, or the model's default."""
    from keras_relmem import recipes

    name = args.recipe or ("entnet_babi_paper" if args.paper_recipe and args.model == "entnet" else None)
    if name is None:
        return recipes.default("babi", args.model)
    try:
        recipe = recipes.get(name)
    except KeyError as error:
        parser.error(str(error.args[0]))
    if recipe.task != "babi" or recipe.model != args.model:
        parser.error(f"--recipe {name} is a {recipe.task} recipe for --model {recipe.model}; got --model {args.model}")
    return recipe


def resolve_args(argv):
    argv = list(argv)
    if "--list-recipes" in argv:
        from keras_relmem import recipes

        print(recipes.listing("babi", others=True))
        raise SystemExit(0)
    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("--recipe")
    named.add_argument("--model")
    chosen = named.parse_known_args(argv)[0]
    if chosen.recipe and not chosen.model:  # a recipe names its model: `--recipe rmc_babi` trains the RMC
        from keras_relmem import recipes

        if chosen.recipe in recipes.names("babi"):
            argv = ["--model", recipes.get(chosen.recipe).model, *argv]
    # The quick default holds unless a flag chooses what to train; run
    # controls (--verbose, --workdir, --plot, --seed, ...) keep it.
    quick = not any(arg.split("=")[0] in CHOOSING_FLAGS for arg in argv)
    parser = build_parser()
    args = parser.parse_args(QUICK_DEFAULT + argv if quick else argv)
    args.quick_default = quick
    recipe = babi_recipe(args, parser)
    args.recipe = recipe.name
    for key, value in recipe.settings.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    tasks = babi_data.parse_tasks(args.task)
    if args.joint and len(tasks) == 1:
        args.joint = False
    args.tasks = tasks
    return args


def model_hparams(args):
    names = {
        "entnet": ["embedding_dim", "num_blocks"],
        "rmc": ["embedding_dim", "num_blocks", "mem_slots", "num_heads", "head_size"],
        "lstm": ["embedding_dim"],
        "memo": ["embedding_dim", "num_heads", "max_hops"],
    }[args.model]
    hparams = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    if args.model == "entnet" and getattr(args, "embedding_stddev", None) is not None:
        import keras

        hparams["embeddings_initializer"] = keras.initializers.RandomNormal(stddev=args.embedding_stddev)
    return hparams


def uses_buckets(args, replicas_need_static_batches):
    """Bucketed batches for the models that take stories of any length, on one replica."""
    return (not getattr(args, "no_buckets", False) and args.model in ("entnet", "memo")
            and not replicas_need_static_batches)


def load_data(args, tasks):
    return babi_data.load_babi(
        tasks,
        args.data,
        data_dir=args.data_dir,
        memory_size=args.memory_size,
        validation_split=args.validation_split,
        seed=args.seed,
    )


def check_inputs(args):
    """Every impossible combination fails here, before any training."""
    files = babi_data.BabiFiles(args.data_dir)
    for task in args.tasks:
        for split in babi_data.SPLITS:
            path = files.path(args.data, task, split)
            if files.archive is None and not pathlib.Path(path).is_file():
                hint = " (task 3 of en-10k is missing from our shared copy; use --data en)" if task == 3 else ""
                raise FileNotFoundError(f"bAbI file not found: {path}{hint}")
    if args.memory_size is not None and args.memory_size < 1:
        raise ValueError(f"--memory-size must be positive; got {args.memory_size}")
    if not 0 <= args.validation_split < 1:
        raise ValueError(f"--validation-split must be in [0, 1); got {args.validation_split}")
    if getattr(args, "tied_keys", False) and args.model != "entnet":
        raise ValueError(f"--tied-keys ties EntNet keys to entity embeddings; --model is {args.model}")
    if args.weight_decay < 0:
        raise ValueError(f"--weight-decay must be >= 0; got {args.weight_decay}")
    if getattr(args, "embedding_stddev", None) is not None:
        if args.model != "entnet":
            raise ValueError(f"--embedding-stddev sets EntNet's embedding scale; --model is {args.model}")
        if args.embedding_stddev <= 0:
            raise ValueError(f"--embedding-stddev must be positive; got {args.embedding_stddev}")
    if args.budget_minutes is not None and not args.budget_minutes > 0:
        raise ValueError(f"--budget-minutes must be > 0; got {args.budget_minutes}")
    if args.restore_best and args.validation_split == 0:
        raise ValueError("--restore-best picks the epoch by its validation loss; --validation-split is 0")
    if args.schedule == "plateau" and args.validation_split == 0:
        raise ValueError("--schedule plateau watches the validation loss; --validation-split is 0")
    if args.schedule == "cyclic" and not 0 < args.min_learning_rate <= args.learning_rate:
        raise ValueError(f"--schedule cyclic runs from --min-learning-rate {args.min_learning_rate} up to "
                         f"--learning-rate {args.learning_rate}: need 0 < min <= max")


def per_task_accuracy(model, data, batch_size=256):
    """{task: (accuracy, questions)} on the test split."""
    import numpy as np

    arrays = data.arrays("test")
    logits = model.predict(
        {"story": arrays["story"], "query": arrays["query"]}, batch_size=batch_size, verbose=0
    )
    correct = np.argmax(logits, axis=-1) == arrays["answer"]
    out = {}
    for task in data.tasks:
        rows = arrays["task"] == task
        out[task] = (float(correct[rows].mean()), int(rows.sum()))
    return out


def format_table(results, model_name):
    lines = [f"bAbI test results ({model_name})", f"{'task':>4}  {'name':24s} {'accuracy':>9s} {'error':>7s}"]
    for task, row in sorted(results.items()):
        flag = "" if row["error"] < SOLVED_ERROR else "  (failed)"
        lines.append(
            f"{task:>4}  {babi_data.TASK_NAMES[task]:24s} {row['accuracy']:9.1%} {row['error']:7.1%}{flag}"
        )
    errors = [row["error"] for row in results.values()]
    solved = sum(e < SOLVED_ERROR for e in errors)
    lines.append(f"mean error {sum(errors) / len(errors):.1%}; solved (error < 5%): {solved}/{len(errors)}")
    return "\n".join(lines)


def build_model(args, data):
    """The (uncompiled) model `args` describe for `data` (a `BabiData`): its size and vocabularies, the
    model's flags, and EntNet's tied keys."""
    from keras_relmem.models import build_babi_model

    hparams = model_hparams(args)
    if getattr(args, "tied_keys", False):
        hparams["entity_ids"] = babi_data.entity_ids(data.vocab)
    return build_babi_model(args.model, len(data.vocab), len(data.answer_vocab), data.story_length,
                            data.sentence_length, data.query_length, **hparams)


def optimizer_and_schedule(args, steps_per_epoch, optimizer_options=None):
    """The optimizer `args` describe (Adam with their clip and weight decay, `keras_relmem.training.adam`,
    plus `optimizer_options`) at their learning-rate schedule, and the callbacks that schedule needs."""
    from keras_relmem import training

    rate, schedule = training.learning_rate_schedule(
        args.schedule, args.learning_rate, steps_per_epoch, halve_every=args.halve_every,
        patience=args.patience, minimum=args.min_learning_rate, half_cycle_epochs=args.half_cycle_epochs)
    options = {"clipnorm": args.clipnorm, **(optimizer_options or {})}
    return training.adam(rate, weight_decay=args.weight_decay, decay_scope=args.decay_scope, **options), schedule


def compile_model(model, name, optimizer, jit_compile=False):
    """Compile the bAbI model `name` built: MEMO trains itself (its REINFORCE step, no compiled loss); the
    others with the answers' cross-entropy and accuracy."""
    import keras

    if name == "memo":
        model.compile(optimizer, jit_compile=jit_compile)
    else:
        model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                      jit_compile=jit_compile)
    return model


def train_one(args, tasks, workdir, strategy, callbacks=(), adjust_model=None, optimizer_options=None):
    """Train one model on `tasks` as `args` say, test it per task, and export it.

    Args:
        args: from `resolve_args`.
        tasks: the task numbers this model trains on.
        workdir: its folder (checkpoints, metrics.json).
        strategy: a `tf.distribute` strategy.
        callbacks: more Keras callbacks for `fit`.
        adjust_model: optional `(model) -> None` called after the model is
            built, before it is compiled (e.g. a benchmark's other initial weights).
        optimizer_options: more arguments of `keras_relmem.training.adam`.

    Returns:
        `(model, data, accuracy, seconds, exported, record)`: `accuracy` is
        `{task: (accuracy, questions)}` on the test split, `record` the
        per-epoch metrics (`run_fit`'s).
    """
    import keras

    from keras_relmem import callbacks as controls
    from keras_relmem import distribute, export, training

    data = load_data(args, tasks)
    static = distribute.needs_static_batches(strategy) or bool(args.jit_compile)
    if uses_buckets(args, distribute.needs_static_batches(strategy)):
        # Stories of similar length, padded to their bucket's bound: no work on most padded sentences.
        # Under XLA only full batches, so that every bound compiles once.
        train = data.bucketed_dataset("train", args.batch_size, seed=args.seed, drop_remainder=bool(args.jit_compile))
        validation = data.bucketed_dataset("validation", args.batch_size) if data.examples["validation"] else None
    else:
        train = data.dataset("train", args.batch_size, seed=args.seed, drop_remainder=static)
        validation = (
            data.dataset("validation", args.batch_size, drop_remainder=static)
            if data.examples["validation"]
            else None
        )
    if args.max_steps:
        train = train.take(args.max_steps)
    if args.max_eval_steps and validation is not None:
        validation = validation.take(args.max_eval_steps)
    with strategy.scope():
        model = build_model(args, data)
        steps_per_epoch = max(1, len(data.story_lengths("train")) // args.batch_size)
        if args.max_steps:
            steps_per_epoch = min(steps_per_epoch, args.max_steps)
        if adjust_model is not None:
            adjust_model(model)
        optimizer, schedule = optimizer_and_schedule(args, steps_per_epoch, optimizer_options)
        compile_model(model, args.model, optimizer, jit_compile=bool(args.jit_compile))
    extra = list(callbacks) + list(schedule)
    if args.budget_minutes:
        extra.append(controls.TimeBudget(args.budget_minutes))
    best = pathlib.Path(workdir) / "best.weights.h5"
    if args.restore_best:
        extra.append(keras.callbacks.ModelCheckpoint(str(best), monitor="val_loss", save_best_only=True,
                                                     save_weights_only=True))
    start = time.time()
    record = training.run_fit(
        model,
        train,
        validation,
        workdir,
        args.epochs,
        resume=args.resume,
        logdir=args.logdir,
        callbacks=extra,
        verbose=args.verbose,
    )
    seconds = time.time() - start
    if args.restore_best and best.exists():
        model.load_weights(best)
    accuracy = per_task_accuracy(model, data)
    if args.plot and distribute.is_chief():
        from keras_relmem.tasks import plots

        label = pathlib.Path(workdir).name
        for path in plots.plot_babi(
            model, data, pathlib.Path(args.plot) / label, metrics_path=pathlib.Path(workdir) / "metrics.json"
        ):
            print(f"Wrote {path}")
    exported = None
    if not args.no_export and distribute.is_chief():
        base = args.export_dir or os.path.join(args.workdir, "export")
        exported = str(export.export_babi(model, data, base, name=export.babi_model_name(args.model, tasks)))
        export.announce(exported)
    return model, data, accuracy, seconds, exported, record


def joint_recipe(argv):
    """The recipe of a joint run trained in rounds (MEMO with --joint: `memo_babi_joint` unless --recipe names
    another joint recipe), or None for the epoch-based runs of this module."""
    from keras_relmem import recipes

    named = argparse.ArgumentParser(add_help=False)
    for flag in ("--recipe", "--model"):
        named.add_argument(flag)
    named.add_argument("--joint", action="store_true")
    named.add_argument("--list-recipes", action="store_true")
    chosen = named.parse_known_args(argv)[0]
    if chosen.list_recipes:
        return None
    if chosen.recipe in recipes.names("babi") and recipes.get(chosen.recipe).joint:
        return chosen.recipe
    if chosen.recipe is None and chosen.model == "memo" and chosen.joint:
        return recipes.default("babi", "memo", joint=True).name
    return None


def run(argv=None):
    """Run the bAbI task; returns the results dict that is also written as JSON.

    MEMO with --joint trains in rounds on a wall-clock budget (`keras_relmem.tasks.babi_joint`, the joint
    recipe); everything else trains for epochs here.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    joint = joint_recipe(argv)
    if joint:
        from keras_relmem.tasks import babi_joint

        return babi_joint.run(argv, recipe=joint)
    args = resolve_args(argv)
    if args.quick_default:
        print(f"Running the quick default ({' '.join(QUICK_DEFAULT)}).", flush=True)
    try:
        check_inputs(args)
    except (FileNotFoundError, ValueError, ConnectionError) as error:
        build_parser().error(str(error))

    import keras

    from keras_relmem import distribute, training

    keras.utils.set_random_seed(args.seed)
    strategy = distribute.get_strategy(args.strategy)
    groups = [args.tasks] if args.joint else [[t] for t in args.tasks]
    results, exports, timings = {}, {}, {}
    for tasks in groups:
        label = "joint" if len(tasks) > 1 else f"qa{tasks[0]}"
        workdir = pathlib.Path(args.workdir) / label
        _, _, accuracy, seconds, exported, _ = train_one(args, tasks, workdir, strategy)
        timings[label] = seconds
        exports[label] = exported
        for task, (acc, count) in accuracy.items():
            results[task] = {"accuracy": acc, "error": 1.0 - acc, "questions": count}
    table = format_table(results, args.model)
    print("\n" + table, flush=True)
    summary = {
        "model": args.model,
        "data": args.data,
        "joint": args.joint,
        "tasks": {str(t): r for t, r in sorted(results.items())},
        "mean_error": sum(r["error"] for r in results.values()) / len(results),
        "solved": sum(r["error"] < SOLVED_ERROR for r in results.values()),
        "train_seconds": timings,
        "exports": exports,
        "args": {k: v for k, v in vars(args).items() if k not in ("tasks",)},
    }
    if distribute.is_chief():
        training.write_json(pathlib.Path(args.workdir) / "results.json", summary)
        print(f"Results written to {pathlib.Path(args.workdir) / 'results.json'}")
    return summary


def main():
    run()


if __name__ == "__main__":
    main()
