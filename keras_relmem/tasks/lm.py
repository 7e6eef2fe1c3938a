"""Word-level language modelling: what `kr.train` runs for a `configs.LMConfig` (`relmem-train-lm`).

Embedding, a recurrent core (RMC or LSTM) and a tied softmax, trained with
truncated back-propagation through time: each batch row continues the
previous batch's row and the recurrent state is carried between batches (reset
to the initial memory at every epoch and evaluation). Reports validation
perplexity per epoch and test perplexity at the end, and exports a next-word
model.
"""

import math
import time

from keras_relmem import configs, runs
from keras_relmem.data import lm as lm_data


def train(config, run):
    """Train `config` (a `configs.LMConfig`) as `run` (`RunOptions`) says; returns the results dict (validation
    perplexity per epoch, test perplexity) also written to `results.json`."""
    args = config
    # Graph mode beats XLA for these models on CPU (bench/lm/speed.py).
    jit = bool(run.jit_compile)
    corpus = lm_data.load_corpus(config.corpus, config.data_dir)

    import keras

    from keras_relmem import distribute, export, training
    from keras_relmem.models import language_model

    keras.utils.set_random_seed(args.seed)
    strategy = distribute.get_strategy(run.strategy)
    if strategy.num_replicas_in_sync > 1:
        raise ValueError("the LM carries state across batches (stateful TBPTT), which needs a single replica; "
                         "use the strategy 'default'")
    train = corpus.bptt_dataset("train", args.batch_size, args.bptt)
    valid = corpus.bptt_dataset("valid", args.batch_size, args.bptt)
    test = corpus.bptt_dataset("test", args.batch_size, args.bptt)
    if run.max_steps:
        train = train.take(run.max_steps)
    if run.max_eval_steps:
        valid, test = (d.take(run.max_eval_steps) for d in (valid, test))
    hparams = {**config.model_settings(), "tied": not config.untied}
    with strategy.scope():
        model = language_model.build_language_model(
            args.model, len(corpus.vocab), batch_size=args.batch_size,
            sequence_length=args.bptt, stateful=True, **hparams,
        )
        model.compile(
            keras.optimizers.Adam(args.learning_rate, clipnorm=args.clipnorm),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit,
        )
    print(f"{args.model} language model on {args.corpus}: {model.count_params():,} parameters", flush=True)
    start = time.time()
    record = training.run_fit(
        model, train, valid, run.workdir, args.epochs, resume=run.resume, logdir=run.logdir,
        callbacks=[language_model.ResetMemory(), language_model.Perplexity()], verbose=run.verbosity(),
    )
    seconds = time.time() - start
    language_model.reset_memory(model)
    test_loss = float(model.evaluate(test, verbose=0))
    results = {
        "model": args.model,
        "corpus": args.corpus,
        "parameters": int(model.count_params()),
        "epochs": [
            {"epoch": e["epoch"], "val_perplexity": e.get("val_perplexity"), "perplexity": e.get("perplexity")}
            for e in record["epochs"]
        ],
        "test_perplexity": math.exp(min(test_loss, 50.0)),
        "train_seconds": seconds,
        "args": run.recorded(config),
    }
    if run.export and distribute.is_chief():
        serving = language_model.build_language_model(args.model, len(corpus.vocab), **hparams)
        serving.set_weights(model.get_weights())
        results["export"] = str(export.export_lm(serving, corpus.vocab, run.export_base(),
                                                 name=f"lm_{args.model}_{args.corpus}"))
    return results


def table(results):
    """An LM run's results as the command prints them: validation perplexity per epoch, test perplexity."""
    lines = [f"epoch {e['epoch'] + 1}: validation perplexity {e['val_perplexity']:.2f}" for e in results["epochs"]]
    return "\n".join(lines + [f"test perplexity {results['test_perplexity']:.2f}"])


def check_corpus(config):
    """The corpus files the run reads exist (a FileNotFoundError naming the first missing one)."""
    for split in lm_data.SPLITS:
        lm_data.corpus_file(getattr(config, "corpus", "ptb"), split, config.data_dir)


def learning_rate_at(epoch, base, decay, after):
    """The rate of epoch `epoch` (0-based): `base` for the first `after` epochs, then times `decay` once
    more at every epoch, as in Zaremba et al.'s PTB code (`lr * decay ** max(epoch + 1 - after, 0)`)."""
    return base * decay ** max(int(epoch) + 1 - after, 0)


def perplexity(model, dataset):
    """exp(mean cross-entropy) from the initial memory, leaving the training state as it was."""
    from keras_relmem.models import language_model

    states = {layer.name: [v.numpy() for v in layer.states] for layer in model.layers
              if getattr(layer, "stateful", False) and layer.states is not None}
    language_model.reset_memory(model)
    loss = float(model.evaluate(dataset, verbose=0))
    for layer in model.layers:
        for variable, value in zip(getattr(layer, "states", None) or [], states.get(layer.name, [])):
            variable.assign(value)
    return round(math.exp(min(loss, 50.0)), 2)


def train_rounds(config, run):
    """Train `config` (a `configs.LMRoundsConfig`) on PTB as `run` (`RunOptions`) says: rounds of stateful TBPTT
    batches until the budget is spent (continuing what the workdir holds), validation perplexity after each;
    returns the result (test perplexity after the budget, and of the best validation round with `keep_best`)
    also written to the results file."""
    import pathlib

    import keras

    from keras_relmem.models import language_model
    from keras_relmem.tasks.rounds import recorder
    from keras_relmem.training import BEST_WEIGHTS, kept_best, train_in_rounds

    keras.utils.set_random_seed(config.seed)
    corpus = lm_data.load_corpus("ptb", config.data_dir)
    train = corpus.bptt_dataset("train", config.batch_size, config.bptt)
    valid = corpus.bptt_dataset("valid", config.batch_size, config.bptt)
    test = corpus.bptt_dataset("test", config.batch_size, config.bptt)
    batches = int(train.cardinality())
    hparams = {**config.model_settings(), "tied": False if config.untied else None}

    def build():
        model = language_model.build_language_model(config.model, len(corpus.vocab), batch_size=config.batch_size,
                                                    sequence_length=config.bptt, stateful=True, **hparams)
        optimizer = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[config.optimizer]
        clipping = {"clipnorm": config.clipnorm or None, "global_clipnorm": config.global_clipnorm or None}
        model.compile(optimizer(config.learning_rate, **clipping),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    def train_round(model, index):
        start = (index * config.batches_per_round) % batches
        epoch = index * config.batches_per_round // batches
        model.optimizer.learning_rate.assign(
            learning_rate_at(epoch, config.learning_rate, config.lr_decay, config.decay_after))
        if start < config.batches_per_round:  # a new epoch: the memory restarts
            language_model.reset_memory(model)
        history = model.fit(train.skip(start).take(config.batches_per_round), epochs=1, shuffle=False,
                            verbose=run.verbosity(0))
        loss = history.history["loss"][-1]
        return {"epoch": round(index * config.batches_per_round / batches, 3),
                "train_perplexity": round(math.exp(min(loss, 50.0)), 2)}

    def summary(curve):
        return {"val_perplexity": curve[-1]["val_perplexity"], "minutes": curve[-1]["minutes"],
                "epochs": round(len(curve) * config.batches_per_round / batches, 3),
                "tokens": len(curve) * config.batches_per_round * config.batch_size * config.bptt,
                "curve": [{k: e[k] for k in ("minutes", "epoch", "train_perplexity", "val_perplexity")}
                          for e in curve]}

    on_round = recorder(config, run, summary)
    curve, model = train_in_rounds(
        build, train_round, lambda model: {"val_perplexity": perplexity(model, valid)}, run.workdir,
        config.budget_minutes,
        describe=lambda e: (f"{config.model} round {e['round']:3d}  {e['minutes']:6.1f} min  epoch "
                            f"{e['epoch']:5.2f}  train ppl {e['train_perplexity']:8.1f}  valid ppl "
                            f"{e['val_perplexity']:8.1f}"),
        on_resume=language_model.reset_memory, on_round=on_round,
        keep_best=("val_perplexity", "min") if config.keep_best else None)
    result = {"complete": True, "perplexity": perplexity(model, test), "parameters": int(model.count_params()),
              **summary(curve)}
    workdir = pathlib.Path(run.workdir)
    best = kept_best(workdir, curve, "val_perplexity", "min") if config.keep_best else None
    if best is not None:
        model.load_weights(workdir / BEST_WEIGHTS)
        result.update({"best_round": best["round"], "best_minutes": best["minutes"],
                       "best_val_perplexity": best["val_perplexity"], "best_perplexity": perplexity(model, test)})
    return result


def table_rounds(result):
    """A budgeted LM run's result as the command prints it."""
    best = (f"; the best validation round's: {result['best_perplexity']:.1f}" if "best_perplexity" in result else "")
    return (f"{result['args']['model']}: test perplexity {result['perplexity']:.1f} after {result['minutes']:.1f} "
            f"training minutes ({result['epochs']:.2f} epochs){best}")


TASK = runs.register(runs.Task(configs.LMConfig, train, table, "runs/lm", check=check_corpus))
ROUNDS = runs.register(runs.Task(configs.LMRoundsConfig, train_rounds, table_rounds, "runs/lm_rounds",
                                 check=check_corpus, exports=False))
