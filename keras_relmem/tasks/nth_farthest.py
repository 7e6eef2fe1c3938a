"""Nth Farthest (Santoro et al. 2018, §4.1): the library behind `tasks/train_nth_farthest.py`.

A sequence of 8 random 16-dimensional vectors with labels is read one vector
per step; the answer is the label of the n-th farthest vector from vector m.
The recurrent core (RMC or LSTM) reads the sequence and an MLP answers from
its final output. Test accuracy is reported after every epoch.
"""

import argparse
import os
import pathlib
import sys
import time

from keras_relmem.data import synthetic
from keras_relmem.tasks import common

RMC_DEFAULTS = {"mem_slots": 4, "head_size": 64, "num_heads": 4, "num_blocks": 1}


def build_parser():
    parser = argparse.ArgumentParser(
        description="Train an RMC or an LSTM on the RMC paper's Nth Farthest task.",
    )
    parser.add_argument("--model", choices=["rmc", "lstm", "mlp"], default="rmc",
                        help="mlp: no recurrent core, the MLP reads the flattened sequence (a reference)")
    common.add_recipe_arguments(parser, "nth_farthest")
    parser.add_argument("--train-examples", type=common.positive_int, default=50_000)
    parser.add_argument("--test-examples", type=common.positive_int, default=5_000)
    parser.add_argument("--num-objects", type=common.positive_int, default=8)
    parser.add_argument("--num-features", type=common.positive_int, default=16)
    parser.add_argument("--epochs", type=common.positive_int, default=20)
    parser.add_argument("--batch-size", type=common.positive_int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--mem-slots", type=common.positive_int, default=RMC_DEFAULTS["mem_slots"])
    parser.add_argument("--head-size", type=common.positive_int, default=RMC_DEFAULTS["head_size"])
    parser.add_argument("--num-heads", type=common.positive_int, default=RMC_DEFAULTS["num_heads"])
    parser.add_argument("--num-blocks", type=common.positive_int, default=RMC_DEFAULTS["num_blocks"])
    parser.add_argument("--units", type=common.positive_int, default=512, help="LSTM units")
    parser.add_argument(
        "--mlp-layers", type=common.positive_int, default=2,
        help="ReLU layers of 256 units between the core and the answer (Sonnet's example: 4)",
    )
    parser.add_argument("--plot", default=None, metavar="DIR", help="write RMC attention grids and the training curves")
    common.add_run_arguments(parser, "runs/nth_farthest")
    return common.show_defaults(parser)


def build_model(args, input_shape):
    import keras

    from keras_relmem import RelationalMemory

    inputs = keras.Input(input_shape, name="objects")
    if args.model == "rmc":
        h = RelationalMemory(
            mem_slots=args.mem_slots, head_size=args.head_size,
            num_heads=args.num_heads, num_blocks=args.num_blocks, name="core",
        )(inputs)
    elif args.model == "lstm":
        h = keras.layers.LSTM(args.units, name="core")(inputs)
    else:
        h = keras.layers.Flatten(name="core")(inputs)
    for _ in range(getattr(args, "mlp_layers", 2)):
        h = keras.layers.Dense(256, activation="relu")(h)
    logits = keras.layers.Dense(args.num_objects, name="answer")(h)
    return keras.Model(inputs, logits, name=f"nth_farthest_{args.model}")


def run(argv=None):
    args = common.parse_with_recipes(build_parser(), sys.argv[1:] if argv is None else argv, "nth_farthest")
    import keras
    import tensorflow as tf

    from keras_relmem import distribute, training

    keras.utils.set_random_seed(args.seed)
    train = synthetic.nth_farthest(args.train_examples, args.num_objects, args.num_features, seed=args.seed)
    test = synthetic.nth_farthest(args.test_examples, args.num_objects, args.num_features, seed=args.seed + 1)
    strategy = distribute.get_strategy(args.strategy)
    static = distribute.needs_static_batches(strategy) or bool(args.jit_compile)

    def dataset(data, shuffle):
        ds = tf.data.Dataset.from_tensor_slices((data["inputs"], data["target"]))
        if shuffle:
            ds = ds.shuffle(len(data["target"]), seed=args.seed)
        ds = ds.batch(args.batch_size, drop_remainder=static)
        cap = args.max_steps if shuffle else args.max_eval_steps  # the training set is the shuffled one
        return (ds.take(cap) if cap else ds).prefetch(tf.data.AUTOTUNE)

    with strategy.scope():
        model = build_model(args, train["inputs"].shape[1:])
        model.compile(
            keras.optimizers.Adam(args.learning_rate),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=bool(args.jit_compile),
        )
    start = time.time()
    record = training.run_fit(
        model, dataset(train, True), dataset(test, False), args.workdir, args.epochs,
        resume=args.resume, logdir=args.logdir, verbose=args.verbose,
    )
    curve = [(e["epoch"] + 1, e.get("accuracy"), e.get("val_accuracy")) for e in record["epochs"]]
    print(f"\nNth Farthest ({args.model}, {model.count_params():,} parameters): accuracy over training")
    print(f"{'epoch':>5} {'train':>7} {'test':>7}")
    for epoch, acc, val in curve:
        print(f"{epoch:>5} {acc:7.1%} {val:7.1%}")
    results = {
        "model": args.model,
        "parameters": int(model.count_params()),
        "curve": [{"epoch": e, "train_accuracy": a, "test_accuracy": v} for e, a, v in curve],
        "test_accuracy": curve[-1][2] if curve else None,
        "chance": 1.0 / args.num_objects,
        "train_seconds": time.time() - start,
        "args": vars(args),
    }
    if distribute.is_chief():
        if args.plot:
            from keras_relmem.tasks import plots

            for path in plots.plot_nth_farthest(
                model, test, args.plot, metrics_path=pathlib.Path(args.workdir) / "metrics.json"
            ):
                print(f"Wrote {path}")
        training.write_json(pathlib.Path(args.workdir) / "results.json", results)
        if not args.no_export:
            from keras_relmem import export

            base = args.export_dir or os.path.join(args.workdir, "export")
            path = export.version_dir(base, f"nth_farthest_{args.model}")
            model.export(str(path), format="tf_saved_model", verbose=False)
            results["export"] = str(path)
    return results


def main():
    run()
