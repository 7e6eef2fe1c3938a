"""Word-level language modelling: the library behind `tasks/train_lm.py`.

Embedding, a recurrent core (RMC or LSTM) and a tied softmax, trained with
truncated back-propagation through time: each batch row continues the
previous batch's row and the recurrent state is carried between batches (reset
to the initial memory at every epoch and evaluation). Reports validation
perplexity per epoch and test perplexity at the end, and exports a next-word
model.
"""

import argparse
import math
import os
import pathlib
import sys
import time

from keras_relmem.data import lm as lm_data
from keras_relmem.tasks import common

# The flags' defaults are the model's default recipe (keras_relmem.recipes: lm_ptb_rmc, lm_ptb_lstm).


def build_parser():
    parser = argparse.ArgumentParser(
        description="Train a next-word language model (RMC or LSTM) with truncated BPTT.",
    )
    parser.add_argument("--model", choices=["rmc", "lstm"], default="rmc")
    common.add_recipe_arguments(parser, "lm")
    parser.add_argument("--corpus", choices=lm_data.CORPORA, default="ptb")
    parser.add_argument("--data-dir", default=None, help="local data folder (default $KERAS_RELMEM_DATA)")
    parser.add_argument("--epochs", type=common.positive_int, default=None)
    parser.add_argument("--batch-size", type=common.positive_int, default=None)
    parser.add_argument(
        "--bptt", type=common.positive_int, default=None, help="truncation length (default: the recipe's, 100)"
    )
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--clipnorm", type=float, default=None)
    parser.add_argument("--embedding-dim", type=common.positive_int, default=None, help="default 192")
    parser.add_argument("--untied", action="store_true", help="a separate softmax matrix instead of the embedding")
    parser.add_argument("--mem-slots", type=common.positive_int, default=None, help="RMC (default 1)")
    parser.add_argument("--head-size", type=common.positive_int, default=None, help="RMC (default 192)")
    parser.add_argument("--num-heads", type=common.positive_int, default=None, help="RMC (default 4)")
    parser.add_argument("--key-size", type=common.positive_int, default=None, help="RMC (default 64)")
    parser.add_argument("--units", type=common.positive_int, default=None, help="LSTM (default 1000)")
    common.add_run_arguments(parser, "runs/lm")
    return common.show_defaults(parser)


def model_hparams(args):
    names = ["embedding_dim"] + (
        ["mem_slots", "head_size", "num_heads", "key_size"] if args.model == "rmc" else ["units"]
    )
    hparams = {n: getattr(args, n) for n in names if getattr(args, n) is not None}
    hparams["tied"] = not args.untied
    return hparams


def run(argv=None):
    args = common.parse_with_recipes(build_parser(), sys.argv[1:] if argv is None else argv, "lm")
    # Graph mode beats XLA for these models on CPU (bench/lm_speed.py).
    jit = bool(args.jit_compile)
    try:
        corpus = lm_data.load_corpus(args.corpus, args.data_dir)
    except (FileNotFoundError, ValueError, ConnectionError) as error:
        build_parser().error(str(error))

    import keras

    from keras_relmem import distribute, export, training
    from keras_relmem.models import language_model

    keras.utils.set_random_seed(args.seed)
    strategy = distribute.get_strategy(args.strategy)
    if strategy.num_replicas_in_sync > 1:
        build_parser().error(
            "the LM carries state across batches (stateful TBPTT), which needs a single "
            "replica; use --strategy default"
        )
    train = corpus.bptt_dataset("train", args.batch_size, args.bptt)
    valid = corpus.bptt_dataset("valid", args.batch_size, args.bptt)
    test = corpus.bptt_dataset("test", args.batch_size, args.bptt)
    if args.max_steps:
        train = train.take(args.max_steps)
    if args.max_eval_steps:
        valid, test = (d.take(args.max_eval_steps) for d in (valid, test))
    hparams = model_hparams(args)
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
        model, train, valid, args.workdir, args.epochs, resume=args.resume, logdir=args.logdir,
        callbacks=[language_model.ResetMemory(), language_model.Perplexity()], verbose=args.verbose,
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
        "args": vars(args),
    }
    for entry in results["epochs"]:
        print(f"epoch {entry['epoch'] + 1}: validation perplexity {entry['val_perplexity']:.2f}")
    print(f"test perplexity {results['test_perplexity']:.2f}", flush=True)
    if not args.no_export and distribute.is_chief():
        serving = language_model.build_language_model(args.model, len(corpus.vocab), **hparams)
        serving.set_weights(model.get_weights())
        base = args.export_dir or os.path.join(args.workdir, "export")
        results["export"] = str(export.export_lm(serving, corpus.vocab, base, name=f"lm_{args.model}_{args.corpus}"))
        export.announce(results["export"])
    if distribute.is_chief():
        training.write_json(pathlib.Path(args.workdir) / "results.json", results)
    return results


def main():
    run()
