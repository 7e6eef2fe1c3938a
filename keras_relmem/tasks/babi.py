"""bAbI question answering, one model per task: what `kr.train` runs for a `configs.BabiConfig`.

Trains one model per task (or one on all tasks with `joint`) for epochs,
prints a per-task table of test accuracy and error with the number of tasks
solved (error < 5%, the bAbI convention), writes it as JSON and exports the
model for TF Serving. MEMO's joint run in rounds is `keras_relmem.tasks.babi_joint`.
"""

import pathlib
import time

from keras_relmem import configs, runs
from keras_relmem.data import babi as babi_data

SOLVED_ERROR = 0.05


def uses_buckets(config, replicas_need_static_batches):
    """Bucketed batches for the models that take stories of any length (`babi_qa.ANY_STORY_LENGTH`), on one
    replica."""
    from keras_relmem.models.babi_qa import ANY_STORY_LENGTH

    return config.buckets and config.model in ANY_STORY_LENGTH and not replicas_need_static_batches


def load_data(config, tasks):
    return babi_data.load_babi(tasks, config.data, data_dir=config.data_dir, memory_size=config.memory_size,
                               validation_split=config.validation_split, seed=config.seed)


def check_files(config, tasks=None, task_data=None):
    """Every bAbI file the run reads exists (a FileNotFoundError naming the first missing one): of `tasks`
    (default: the config's), `task_data` `{task: data}` naming a task read from another set than `config.data`."""
    files = babi_data.BabiFiles(config.data_dir)
    for task in tasks or config.tasks:
        for split in babi_data.SPLITS:
            path = files.path((task_data or {}).get(task, config.data), task, split)
            if files.archive is None and not pathlib.Path(path).is_file():
                hint = " (task 3 of en-10k is missing from our shared copy; use data 'en')" if task == 3 else ""
                raise FileNotFoundError(f"bAbI file not found: {path}{hint}")


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


def build_model(config, data):
    """The (uncompiled) model `config` describes for `data` (a `BabiData`): its size and vocabularies, the
    model's settings, and EntNet's tied keys."""
    import keras

    from keras_relmem.models import build_babi_model

    settings = config.model_settings()
    if config.tied_keys:  # EntNet's (the config refuses them for another model)
        settings["entity_ids"] = babi_data.entity_ids(data.vocab)
    if config.embedding_stddev is not None:
        settings["embeddings_initializer"] = keras.initializers.RandomNormal(stddev=config.embedding_stddev)
    return build_babi_model(config.model, len(data.vocab), len(data.answer_vocab), data.story_length,
                            data.sentence_length, data.query_length, **settings)


def optimizer_and_schedule(config, steps_per_epoch, optimizer_options=None):
    """The optimizer `config` describes (Adam with its clip and weight decay, `keras_relmem.training.adam`,
    plus `optimizer_options`) at its learning-rate schedule, and the callbacks that schedule needs."""
    from keras_relmem import training

    rate, schedule = training.learning_rate_schedule(
        config.schedule, config.learning_rate, steps_per_epoch, halve_every=config.halve_every,
        patience=config.patience, minimum=config.min_learning_rate, half_cycle_epochs=config.half_cycle_epochs)
    options = {"clipnorm": config.clipnorm, **(optimizer_options or {})}
    return training.adam(rate, weight_decay=config.weight_decay, decay_scope=config.decay_scope,
                         **options), schedule


def compile_model(model, optimizer, jit_compile=False):
    """Compile a bAbI model: MEMO trains itself (its REINFORCE step, no compiled loss); the others with the
    answers' cross-entropy and accuracy."""
    import keras

    from keras_relmem.models import MEMOClassifier

    if isinstance(model, MEMOClassifier):
        model.compile(optimizer, jit_compile=jit_compile)
    else:
        model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                      jit_compile=jit_compile)
    return model


def train_one(config, run, tasks, workdir, strategy, callbacks=(), adjust_model=None, optimizer_options=None):
    """Train one model on `tasks` as `config` says, test it per task, and export it.

    Args:
        config: a `configs.BabiConfig`.
        run: the run's `keras_relmem.runs.RunOptions`.
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

    data = load_data(config, tasks)
    static = distribute.needs_static_batches(strategy) or bool(run.jit_compile)
    if uses_buckets(config, distribute.needs_static_batches(strategy)):
        # Stories of similar length, padded to their bucket's bound: no work on most padded sentences.
        # Under XLA only full batches, so that every bound compiles once.
        train = data.bucketed_dataset("train", config.batch_size, seed=config.seed,
                                      drop_remainder=bool(run.jit_compile))
        validation = data.bucketed_dataset("validation", config.batch_size) if data.examples["validation"] else None
    else:
        train = data.dataset("train", config.batch_size, seed=config.seed, drop_remainder=static)
        validation = (
            data.dataset("validation", config.batch_size, drop_remainder=static)
            if data.examples["validation"]
            else None
        )
    if run.max_steps:
        train = train.take(run.max_steps)
    if run.max_eval_steps and validation is not None:
        validation = validation.take(run.max_eval_steps)
    with strategy.scope():
        model = build_model(config, data)
        steps_per_epoch = max(1, len(data.story_lengths("train")) // config.batch_size)
        if run.max_steps:
            steps_per_epoch = min(steps_per_epoch, run.max_steps)
        if adjust_model is not None:
            adjust_model(model)
        optimizer, schedule = optimizer_and_schedule(config, steps_per_epoch, optimizer_options)
        compile_model(model, optimizer, jit_compile=bool(run.jit_compile))
    extra = list(callbacks) + list(schedule)
    if config.budget_minutes:
        extra.append(controls.TimeBudget(config.budget_minutes))
    best = pathlib.Path(workdir) / "best.weights.h5"
    if config.restore_best:
        extra.append(keras.callbacks.ModelCheckpoint(str(best), monitor="val_loss", save_best_only=True,
                                                     save_weights_only=True))
    start = time.time()
    record = training.run_fit(
        model,
        train,
        validation,
        workdir,
        config.epochs,
        resume=run.resume,
        logdir=run.logdir,
        callbacks=extra,
        verbose=run.verbosity(),
    )
    seconds = time.time() - start
    if config.restore_best and best.exists():
        model.load_weights(best)
    accuracy = per_task_accuracy(model, data)
    if run.plot and distribute.is_chief():
        from keras_relmem.tasks import plots

        label = pathlib.Path(workdir).name
        for path in plots.plot_babi(
            model, data, pathlib.Path(run.plot) / label, metrics_path=pathlib.Path(workdir) / "metrics.json"
        ):
            print(f"Wrote {path}")
    exported = None
    if run.export and distribute.is_chief():
        exported = str(export.export_babi(model, data, run.export_base(),
                                          name=export.babi_model_name(config.model, tasks)))
    return model, data, accuracy, seconds, exported, record


def train(config, run):
    """Train `config` (a `configs.BabiConfig`) as `run` (`RunOptions`) says: one model per task, or one on
    all of them with `joint`; returns the results dict also written to `results.json`."""
    import keras

    from keras_relmem import distribute

    keras.utils.set_random_seed(config.seed)
    strategy = distribute.get_strategy(run.strategy)
    joint = config.joint and len(config.tasks) > 1
    groups = [config.tasks] if joint else [[t] for t in config.tasks]
    results, exports, timings = {}, {}, {}
    for tasks in groups:
        label = "joint" if len(tasks) > 1 else f"qa{tasks[0]}"
        workdir = pathlib.Path(run.workdir) / label
        _, _, accuracy, seconds, exported, _ = train_one(config, run, tasks, workdir, strategy)
        timings[label] = seconds
        exports[label] = exported
        for task, (acc, count) in accuracy.items():
            results[task] = {"accuracy": acc, "error": 1.0 - acc, "questions": count}
    return {
        "model": config.model,
        "data": config.data,
        "joint": joint,
        "tasks": {str(t): r for t, r in sorted(results.items())},
        "mean_error": sum(r["error"] for r in results.values()) / len(results),
        "solved": sum(r["error"] < SOLVED_ERROR for r in results.values()),
        "train_seconds": timings,
        "exports": exports,
        "args": run.recorded(config),
    }


def table(results):
    """A bAbI run's results as the command prints them."""
    return format_table({int(task): row for task, row in results["tasks"].items()}, results["model"])


TASK = runs.register(runs.Task(configs.BabiConfig, train, table, "runs/babi", check=check_files))
