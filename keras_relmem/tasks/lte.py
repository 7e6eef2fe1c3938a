"""Learning to Execute (the RMC paper's Table 1): what `kr.train` runs for a `configs.LTEConfig`.

A recurrent core (the RMC, the EntNet cell or an LSTM) reads a program one
character at a time and writes what it prints (`keras_relmem.models.ReadThenWrite`).
Training examples are drawn fresh for every batch under an LTE curriculum;
after every epoch the model is tested on a fixed test set of the target
setting (per-character accuracy and solved answers).

The configuration's defaults are Sonnet's `rmc_learn_to_execute.py` scaled
to one CPU core: 4 memories and 4 heads as there, but head size 32 (not
2,048: a CPU core runs about 40 RMC steps a second at this size), 2 MLP layers
of 256 (not 4), batch 64 (not 1,600) and Adam 1e-3 (not 1e-4: a smaller batch
takes a larger rate). The LSTM has 256 units, the EntNet cell 20 blocks of the
embedding size (64).
"""

import pathlib

from keras_relmem import configs, runs
from keras_relmem.data import lte


def build_model(args, jit_compile=False):
    """A compiled `ReadThenWrite` for `args` (a `configs.LTEConfig`: task, setting, core and training)."""
    import keras

    from keras_relmem.models.seq2seq import ReadThenWrite, answer_loss, answer_metrics, build_core

    core_args = {"embedding_dim": args.embedding_dim, "mem_slots": args.mem_slots, "head_size": args.head_size,
                 "num_heads": args.num_heads, "num_blocks": args.num_blocks, "units": args.units,
                 "entnet_blocks": args.entnet_blocks}
    model = ReadThenWrite(
        build_core(args.model, **core_args), len(lte.VOCABULARY),
        lte.answer_length(args.task, args.length, args.nesting, args.data),
        embedding_dim=args.embedding_dim, mlp_units=args.mlp_units, name=f"lte_{args.task}_{args.model}",
    )
    model.compile(keras.optimizers.Adam(args.learning_rate), loss=answer_loss(), metrics=answer_metrics(),
                  jit_compile=bool(jit_compile))
    return model


def accuracy_at(model, data, batch_size=250):
    """(per-character accuracy, solved rate) of `model` on `lte.examples` arrays: the model's own metrics."""
    from keras_relmem.models.seq2seq import answer_metrics

    logits = model.predict(data["program"], batch_size=batch_size, verbose=0)
    metrics = answer_metrics()
    for metric in metrics:
        metric.update_state(data["answer"], logits)
    return tuple(float(metric.result()) for metric in metrics)


def advance_if_mastered(model, level, task, threshold, seed, probe_examples=256, style="paper"):
    """Move `level` (a `lte.CurriculumLevel`) on when `model`'s per-character accuracy on fresh examples of
    the current level reaches `threshold`. Returns that accuracy (None for curricula without a level)."""
    if level.curriculum not in ("naive", "combine") or level.at_target:
        return None
    probe = lte.examples(probe_examples, task, *level.target, seed=seed, style=style,
                         level=lte.CurriculumLevel(*level.target, "naive", level=level.level, task=task))
    accuracy, _ = accuracy_at(model, probe)
    if accuracy >= threshold:
        level.advance()
    return accuracy


def curriculum_callback(level, task, threshold, seed, style="paper", examples_per_epoch=None):
    """A Keras callback that moves the curriculum on after every epoch (`advance_if_mastered`, or by the
    examples trained when `level.every` is set) and logs the level it leaves."""
    import keras

    class AdvanceCurriculum(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if level.every:
                level.at_examples((epoch + 1) * examples_per_epoch)
            else:
                advance_if_mastered(self.model, level, task, threshold, seed=[seed, epoch, 7], style=style)
            if logs is not None:
                logs["level_length"], logs["level_nesting"] = level.level

    return AdvanceCurriculum()


def saved_level(workdir, task, length, nesting, curriculum, every=None):
    """The curriculum level a resumed run left in its `metrics.json` (the start level for a new run)."""
    import json

    path = pathlib.Path(workdir) / "metrics.json"
    epochs = json.loads(path.read_text())["epochs"] if path.exists() else []
    level = None
    if epochs and "level_length" in epochs[-1]:
        level = (int(epochs[-1]["level_length"]), int(epochs[-1]["level_nesting"]))
    return lte.CurriculumLevel(length, nesting, curriculum, level=level, task=task, every=every), len(epochs)


def train(config, run):
    """Train `config` (a `configs.LTEConfig`) as `run` (`RunOptions`) says; returns the results dict also
    written to `results.json`."""
    args = config
    import keras
    import tensorflow as tf

    from keras_relmem import training

    keras.utils.set_random_seed(args.seed)
    every = args.advance_every or None
    level, done = saved_level(run.workdir, args.task, args.length, args.nesting, args.curriculum, every) \
        if run.resume else (lte.CurriculumLevel(args.length, args.nesting, args.curriculum, task=args.task,
                                                every=every), 0)
    steps = run.max_steps or args.steps_per_epoch
    # One draw of examples per epoch, numbered on from the epochs already done, so a resumed run sees new data.
    train = lte.dataset(args.task, args.length, args.nesting, args.batch_size, seed=args.seed, level=level,
                        batches_per_draw=steps, first_draw=done, style=args.data)
    test = lte.test_set(args.task, args.length, args.nesting, args.test_examples, seed=args.seed, style=args.data)
    test_ds = tf.data.Dataset.from_tensor_slices((test["program"], test["answer"])).batch(250)
    if run.max_eval_steps:
        test_ds = test_ds.take(run.max_eval_steps)
    model = build_model(args, jit_compile=run.jit_compile)
    record = training.run_fit(
        model, train, test_ds, run.workdir, args.epochs, resume=run.resume, logdir=run.logdir,
        callbacks=[curriculum_callback(level, args.task, args.advance_at, args.seed, args.data,
                                       steps * args.batch_size)], verbose=run.verbosity(),
        steps_per_epoch=steps,
    )
    epochs = record["epochs"]
    results = {
        "task": args.task, "model": args.model, "parameters": int(model.count_params()),
        "test_character_accuracy": epochs[-1]["val_character_accuracy"] if epochs else None,
        # the paper's measure: the best test accuracy of the run
        "best_test_character_accuracy": max((e["val_character_accuracy"] for e in epochs), default=None),
        "test_solved": epochs[-1]["val_solved"] if epochs else None,
        "epochs": [{"epoch": e["epoch"], "level": [int(e.get("level_length", args.length)),
                                                   int(e.get("level_nesting", args.nesting))],
                    **{k: e[k] for k in ("character_accuracy", "val_character_accuracy", "val_solved")}}
                   for e in epochs],
        "args": run.recorded(config),
    }
    if run.export:
        from keras_relmem import export

        results["export"] = str(export.export_lte(model, args.task, args.length, args.nesting, run.export_base(),
                                                  name=f"lte_{args.task}", style=args.data))
    return results


def table(results):
    """A Learning to Execute run's results as the command prints them: the curriculum's level and the
    accuracies per epoch."""
    args = results["args"]
    setting = f"length {args['length']}" + (f", nesting {args['nesting']}" if args["task"] in lte.PROGRAM_TASKS else "")
    lines = [f"Learning to Execute, {args['task']} ({setting}), {args['model']} ({results['parameters']:,} parameters)",
             f"{'epoch':>5} {'level':>7} {'train chars':>11} {'test chars':>10} {'test solved':>11}"]
    return "\n".join(lines + [
        f"{e['epoch'] + 1:>5} {'{},{}'.format(*e['level']):>7} {e['character_accuracy']:11.1%} "
        f"{e['val_character_accuracy']:10.1%} {e['val_solved']:11.1%}" for e in results["epochs"]])


TASK = runs.register(runs.Task(configs.LTEConfig, train, table, "runs/lte"))
