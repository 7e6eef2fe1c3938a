"""Nth Farthest (Santoro et al. 2018, §4.1): what `kr.train` runs for a `configs.NthFarthestConfig`.

A sequence of 8 random 16-dimensional vectors with labels is read one vector
per step; the answer is the label of the n-th farthest vector from vector m.
The recurrent core (RMC or LSTM) reads the sequence and an MLP answers from
its final output. Test accuracy is reported after every epoch.
"""

import pathlib
import time

from keras_relmem import configs, runs
from keras_relmem.data import synthetic


def build_model(args, input_shape):
    import keras

    from keras_relmem.models.seq2seq import build_core

    inputs = keras.Input(input_shape, name="objects")
    h = build_core(args.model, mem_slots=args.mem_slots, head_size=args.head_size, num_heads=args.num_heads,
                   num_blocks=args.num_blocks, units=args.units or 512, return_sequences=False)(inputs)
    for _ in range(args.mlp_layers):
        h = keras.layers.Dense(256, activation="relu")(h)
    logits = keras.layers.Dense(args.num_objects, name="answer")(h)
    return keras.Model(inputs, logits, name=f"nth_farthest_{args.model}")


def train(config, run):
    """Train `config` (a `configs.NthFarthestConfig`) as `run` (`RunOptions`) says; returns the results dict
    (the accuracy curve, the last test accuracy) also written to `results.json`."""
    args = config
    import keras
    import tensorflow as tf

    from keras_relmem import distribute, training

    keras.utils.set_random_seed(args.seed)
    train = synthetic.nth_farthest(args.train_examples, args.num_objects, args.num_features, seed=args.seed)
    test = synthetic.nth_farthest(args.test_examples, args.num_objects, args.num_features, seed=args.seed + 1)
    strategy = distribute.get_strategy(run.strategy)
    static = distribute.needs_static_batches(strategy) or bool(run.jit_compile)

    def dataset(data, shuffle):
        ds = tf.data.Dataset.from_tensor_slices((data["inputs"], data["target"]))
        if shuffle:
            ds = ds.shuffle(len(data["target"]), seed=args.seed)
        ds = ds.batch(args.batch_size, drop_remainder=static)
        cap = run.max_steps if shuffle else run.max_eval_steps  # the training set is the shuffled one
        return (ds.take(cap) if cap else ds).prefetch(tf.data.AUTOTUNE)

    with strategy.scope():
        model = build_model(args, train["inputs"].shape[1:])
        model.compile(
            keras.optimizers.Adam(args.learning_rate),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=bool(run.jit_compile),
        )
    start = time.time()
    record = training.run_fit(
        model, dataset(train, True), dataset(test, False), run.workdir, args.epochs,
        resume=run.resume, logdir=run.logdir, verbose=run.verbosity(),
    )
    curve = [(e["epoch"] + 1, e.get("accuracy"), e.get("val_accuracy")) for e in record["epochs"]]
    results = {
        "model": args.model,
        "parameters": int(model.count_params()),
        "curve": [{"epoch": e, "train_accuracy": a, "test_accuracy": v} for e, a, v in curve],
        "test_accuracy": curve[-1][2] if curve else None,
        "chance": 1.0 / args.num_objects,
        "train_seconds": time.time() - start,
        "args": run.recorded(config),
    }
    if distribute.is_chief():
        if run.plot:
            from keras_relmem.tasks import plots

            for path in plots.plot_nth_farthest(
                model, test, run.plot, metrics_path=pathlib.Path(run.workdir) / "metrics.json"
            ):
                print(f"Wrote {path}")
        if run.export:
            from keras_relmem import export

            path = export.version_dir(run.export_base(), f"nth_farthest_{args.model}")
            model.export(str(path), format="tf_saved_model", verbose=False)
            results["export"] = str(path)
    return results


def next_questions(asked, train_accuracy, threshold, num_objects):
    """The curriculum's questions for the next round: `asked` (n = 0 .. k), with n = k + 1 added once a
    round on them reaches `threshold` % training accuracy."""
    if train_accuracy >= threshold and len(asked) < num_objects:
        return [*asked, len(asked)]
    return list(asked)


def curriculum_start(curve, threshold, num_objects):
    """The questions a curriculum run asks in its next round: the farthest alone for a new run, or what
    the last round of its saved `curve` leads to for a resumed one."""
    if curve:
        return next_questions(curve[-1]["asked"], curve[-1]["train_accuracy"], threshold, num_objects)
    return [0]


def train_rounds(config, run):
    """Train `config` (a `configs.NthFarthestRoundsConfig`) as `run` (`RunOptions`) says: rounds of fresh
    examples until the budget is spent (continuing what the workdir holds), a fixed test set after each;
    returns the result also written to the results file."""
    import keras

    from keras_relmem.data import synthetic
    from keras_relmem.tasks.rounds import recorder
    from keras_relmem.training import saved_curve, train_in_rounds

    keras.utils.set_random_seed(config.seed)
    task = {"num_objects": config.num_objects, "num_features": config.num_features,
            "questions": None if config.questions is None else list(config.questions)}
    test = synthetic.nth_farthest(config.test_examples, seed=10_000 + config.seed, **task)

    def build():
        model = build_model(config, test["inputs"].shape[1:])
        model.compile(keras.optimizers.Adam(config.learning_rate),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        return model

    asked = None
    if config.curriculum is not None:
        asked = curriculum_start(saved_curve(run.workdir), config.curriculum, config.num_objects)

    def train_round(model, index):
        nonlocal asked
        # Fresh examples every round (a different seed per round, so a resumed run sees the data it would have)
        data = synthetic.nth_farthest(config.steps_per_round * config.batch_size,
                                      seed=config.seed * 100_003 + index + 1,
                                      **{**task, "questions": task["questions"] if asked is None else asked})
        history = model.fit(data["inputs"], data["target"], batch_size=config.batch_size, epochs=1,
                            verbose=run.verbosity(0))
        metrics = {"train_accuracy": round(100 * history.history["accuracy"][-1], 2)}
        if asked is not None:
            metrics["asked"] = asked
            asked = next_questions(asked, metrics["train_accuracy"], config.curriculum, config.num_objects)
        return metrics

    def evaluate(model):
        _, accuracy = model.evaluate(test["inputs"], test["target"], batch_size=500, verbose=0)
        return {"test_accuracy": round(100 * accuracy, 2)}

    def summary(curve):
        return {"accuracy": curve[-1]["test_accuracy"], "best_accuracy": max(e["test_accuracy"] for e in curve),
                "minutes": curve[-1]["minutes"], "examples": len(curve) * config.steps_per_round * config.batch_size,
                "curve": [{k: e[k] for k in ("minutes", "train_accuracy", "test_accuracy", "asked") if k in e}
                          for e in curve]}

    on_round = recorder(config, run, summary)
    curve, model = train_in_rounds(
        build, train_round, evaluate, run.workdir, config.budget_minutes,
        describe=lambda e: (f"{config.model} round {e['round']:3d}  {e['minutes']:6.1f} min  "
                            f"train {e['train_accuracy']:5.1f}%  test {e['test_accuracy']:5.1f}%"
                            + (f"  asked n = {', '.join(map(str, e['asked']))}" if "asked" in e else "")),
        on_round=on_round)
    return {"complete": True, "parameters": int(model.count_params()), **summary(curve)}


def table(results):
    """An Nth Farthest run's results as the command prints them: accuracy over training."""
    lines = [f"Nth Farthest ({results['model']}, {results['parameters']:,} parameters): accuracy over training",
             f"{'epoch':>5} {'train':>7} {'test':>7}"]
    return "\n".join(lines + [f"{e['epoch']:>5} {e['train_accuracy']:7.1%} {e['test_accuracy']:7.1%}"
                              for e in results["curve"]])


def table_rounds(result):
    """A budgeted Nth Farthest run's result as the command prints it."""
    return (f"{result['args']['model']}: test accuracy {result['accuracy']:.1f}% (best {result['best_accuracy']:.1f}%) "
            f"after {result['minutes']:.1f} training minutes")


TASK = runs.register(runs.Task(configs.NthFarthestConfig, train, table, "runs/nth_farthest"))
ROUNDS = runs.register(runs.Task(configs.NthFarthestRoundsConfig, train_rounds, table_rounds,
                                 "runs/nth_farthest_rounds", exports=False))

