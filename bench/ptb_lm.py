"""Penn Treebank language modelling: the RMC against the LSTM baseline at equal training wall-clock.

Both models are the ones `tasks/train_lm.py` trains (`build_language_model`:
embedding 192, tied softmax; RMC with 1 slot, 4 heads of 192, key size 64,
3-layer attention MLP; LSTM with 1000 units), with the task's recipe (Adam
1e-3, clip-norm 0.25, batch 64, truncated BPTT 100, memory carried from batch
to batch and reset at every epoch). Training runs in rounds of
`--batches-per-round` batches until `--budget-minutes` of training time are
spent; validation perplexity is measured after every round (the recurrent
state is saved around the evaluation, so training continues where it was) and
test perplexity at the end. Resumable: model, optimizer state, position in the
epoch and the curve are saved after every round under `--workdir/<model>`
(the memory restarts from its initial value after a resume, as at an epoch
start). The result goes into `bench/results/ptb_lm.json` as
`{"rmc": {"perplexity": <test>, "minutes": m, "curve": [...]}, "lstm": {...}, "args": ...}`.
Each curve point is one round: `minutes` (training time at its end),
`epoch` (epochs done when it started, the epoch its learning rate belongs to),
`train_perplexity` (over the round) and `val_perplexity` (after it).

Usage (one core per model, both side by side):
    KERAS_RELMEM_DATA=../shared/data python -m bench.ptb_lm --model rmc --threads 1 &
    KERAS_RELMEM_DATA=../shared/data python -m bench.ptb_lm --model lstm --threads 1 &
    python -m bench.ptb_lm --report      # table + picture from the JSON

The runs of the fair comparison (`bench/results/ptb_lm_fair.json`) are named recipes
(`keras_relmem.recipes`, task "lm_budget"): `lm_ptb_rmc_budget`, `lm_ptb_rmc_early_stop`,
`lm_ptb_lstm_zaremba_small` and `lm_ptb_lstm_zaremba_medium`; e.g. Zaremba et al.'s small LSTM
(their recipe, 2 hours):
    python -m bench.ptb_lm --recipe lm_ptb_lstm_zaremba_small --name lstm_zaremba_small --threads 1 \
        --results runs/ptb_lm_fair.json --workdir runs/ptb_fair
Their code's loss sums the cross-entropy over the 20 steps (mean over the
batch); ours is the mean over every token, so their SGD rate 1 and gradient
clip 5 are our rate 20 and clip 0.25 (the same updates exactly, for SGD).
"""

import argparse
import math
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from bench.budget import draw_model_curves, record_unfinished, run_names  # noqa: E402
from bench.cli import (  # noqa: E402
    add_bench_arguments,
    add_recipe_argument,
    dispatch,
    limit_threads,
    parse_with_recipe,
    run_arguments,
)
from bench.results import RESULTS_DIR, merge_result, read_results  # noqa: E402
from keras_relmem.training import BEST_WEIGHTS, best_entry, kept_best, train_in_rounds  # noqa: E402

RESULTS = RESULTS_DIR / "ptb_lm.json"
# Zaremba et al. 2014, non-regularized 2-layer LSTM (200 units): test perplexity.
REFERENCE = 114.5
# Their medium model (2 x 650 units, dropout 0.5, 39 epochs): test perplexity.
MEDIUM_REFERENCE = 82.7


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_recipe_argument(parser, "lm_budget")
    parser.add_argument("--model", choices=["rmc", "lstm"], default="rmc")
    parser.add_argument("--data-dir", default=None, help="folder holding ptb/ (default $KERAS_RELMEM_DATA)")
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    parser.add_argument("--batches-per-round", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--bptt", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--clipnorm", type=float, default=0.25, help="clip each gradient's norm (0: do not)")
    parser.add_argument("--global-clipnorm", type=float, default=0.0,
                        help="clip the norm of all gradients together, as Zaremba et al. (0: do not)")
    parser.add_argument("--name", default=None, help="the run's key in the results (default: the model)")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--lr-decay", type=float, default=1.0,
                        help="multiply the rate by this at the start of every epoch after --decay-after")
    parser.add_argument("--decay-after", type=int, default=0, help="epochs at the full rate")
    parser.add_argument("--keep-best", action="store_true",
                        help="keep the weights of the round with the best validation perplexity and report their "
                             "test perplexity too (early stopping), beside the budget's last round's")
    group = parser.add_argument_group("LSTM hyper-parameters (default: build_language_model's)")
    group.add_argument("--units", type=int, default=None)
    group.add_argument("--num-layers", type=int, default=None)
    group.add_argument("--dropout", type=float, default=None)
    group.add_argument("--init-scale", type=float, default=None)
    group.add_argument("--untied", action="store_true", help="a softmax of its own, not the embedding")
    add_bench_arguments(parser, "runs/bench_ptb_lm", RESULTS, "print the table and draw the curves")
    return parse_with_recipe(parser, argv)


def learning_rate_at(epoch, base, decay, after):
    """The rate of epoch `epoch` (0-based): `base` for the first `after` epochs, then times `decay` once
    more at every epoch, as in Zaremba et al.'s PTB code (`lr * decay ** max(epoch + 1 - after, 0)`)."""
    return base * decay ** max(int(epoch) + 1 - after, 0)


def _perplexity(model, dataset):
    """exp(mean cross-entropy) from the initial memory, leaving the training state as it was."""
    from keras_relmem.models import language_model

    states = {
        layer.name: [v.numpy() for v in layer.states]
        for layer in model.layers
        if getattr(layer, "stateful", False) and layer.states is not None
    }
    language_model.reset_memory(model)
    loss = float(model.evaluate(dataset, verbose=0))
    for layer in model.layers:
        for variable, value in zip(getattr(layer, "states", None) or [], states.get(layer.name, [])):
            variable.assign(value)
    return round(math.exp(min(loss, 50.0)), 2)


def run(args):
    limit_threads(args.threads)
    import keras

    from keras_relmem.data import lm as lm_data
    from keras_relmem.models import language_model

    keras.utils.set_random_seed(args.seed)
    corpus = lm_data.load_corpus("ptb", args.data_dir)
    train = corpus.bptt_dataset("train", args.batch_size, args.bptt)
    valid = corpus.bptt_dataset("valid", args.batch_size, args.bptt)
    test = corpus.bptt_dataset("test", args.batch_size, args.bptt)
    batches = int(train.cardinality())

    name = args.name or args.model
    workdir = pathlib.Path(args.workdir) / name
    hparams = {}
    if args.model == "lstm":
        hparams = {"units": args.units, "num_layers": args.num_layers, "dropout": args.dropout,
                   "init_scale": args.init_scale, "tied": False if args.untied else None}
    elif any(v is not None for v in (args.units, args.num_layers, args.dropout, args.init_scale)) or args.untied:
        raise SystemExit("--units, --num-layers, --dropout, --init-scale and --untied are LSTM settings.")

    def build():
        model = language_model.build_language_model(
            args.model, len(corpus.vocab), batch_size=args.batch_size,
            sequence_length=args.bptt, stateful=True, **hparams,
        )
        optimizer = {"adam": keras.optimizers.Adam, "sgd": keras.optimizers.SGD}[args.optimizer]
        clipping = {"clipnorm": args.clipnorm or None, "global_clipnorm": args.global_clipnorm or None}
        model.compile(
            optimizer(args.learning_rate, **clipping),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model

    def train_round(model, index):
        start = (index * args.batches_per_round) % batches
        epoch = index * args.batches_per_round // batches
        model.optimizer.learning_rate.assign(
            learning_rate_at(epoch, args.learning_rate, args.lr_decay, args.decay_after))
        if start < args.batches_per_round:  # a new epoch: the memory restarts
            language_model.reset_memory(model)
        history = model.fit(
            train.skip(start).take(args.batches_per_round), epochs=1, shuffle=False, verbose=0
        )
        loss = history.history["loss"][-1]
        epoch = index * args.batches_per_round / batches
        return {"epoch": round(epoch, 3), "train_perplexity": round(math.exp(min(loss, 50.0)), 2)}

    arguments = run_arguments(args, "data_dir")

    def summary(curve):
        return {
            "val_perplexity": curve[-1]["val_perplexity"],
            "minutes": curve[-1]["minutes"],
            "epochs": round(len(curve) * args.batches_per_round / batches, 3),
            "tokens": len(curve) * args.batches_per_round * args.batch_size * args.bptt,
            "curve": [
                {k: e[k] for k in ("minutes", "epoch", "train_perplexity", "val_perplexity")} for e in curve
            ],
        }


    curve, model = train_in_rounds(
        build, train_round, lambda model: {"val_perplexity": _perplexity(model, valid)},
        workdir, args.budget_minutes,
        describe=lambda e: (
            f"{name} round {e['round']:3d}  {e['minutes']:6.1f} min  epoch {e['epoch']:5.2f}  "
            f"train ppl {e['train_perplexity']:8.1f}  valid ppl {e['val_perplexity']:8.1f}"
        ),
        on_resume=language_model.reset_memory,
        on_round=record_unfinished(args.results, name, summary, arguments, args.budget_minutes),
        keep_best=("val_perplexity", "min") if args.keep_best else None,
    )
    result = {
        "complete": True,
        "perplexity": _perplexity(model, test),
        "parameters": int(model.count_params()),
        **summary(curve),
    }
    best = kept_best(workdir, curve, "val_perplexity", "min") if args.keep_best else None
    if best is not None:
        model.load_weights(workdir / BEST_WEIGHTS)
        result.update({"best_round": best["round"], "best_minutes": best["minutes"],
                       "best_val_perplexity": best["val_perplexity"], "best_perplexity": _perplexity(model, test)})
    merge_result(args.results, name, result, arguments)
    print(f"{name}: test perplexity {result['perplexity']:.1f} after {result['minutes']:.1f} "
          f"training minutes ({result['epochs']:.2f} epochs)"
          + (f"; {result['best_perplexity']:.1f} with the weights of its best validation round "
             f"({best['minutes']:.1f} min)" if best is not None else ""))


def markdown(results):
    """Test and validation perplexity of each model after its budget, and the reference."""
    lines = ["| model | seed | test ppl | valid ppl | lowest valid ppl on the way (minute) | training minutes "
             "| epochs | tokens | parameters | test ppl of the best valid round (its valid ppl, minute) |",
             "|" + "---|" * 10]
    for name in run_names(results):
        r, seed = results[name], results.get("args", {}).get(name, {}).get("seed", 0)
        test = f"{r['perplexity']:.1f}" if r.get("complete") else "(unfinished)"
        lowest = best_entry(r.get("curve", []), "val_perplexity")
        lowest = f"{lowest['val_perplexity']:.1f} ({lowest['minutes']:.1f})" if lowest else ""
        best = (f"{r['best_perplexity']:.1f} ({r['best_val_perplexity']:.1f}, {r['best_minutes']:.1f})"
                if "best_perplexity" in r else "")
        lines.append(f"| {name.upper()} | {seed} | {test} | {r['val_perplexity']:.1f} | {lowest} | "
                     f"{r['minutes']:.1f} | {r['epochs']:.2f} | {r['tokens']:,d} | {r.get('parameters', '')} | "
                     f"{best} |")
    lines += ["", f"Reference: Zaremba et al. 2014, test perplexity {REFERENCE} (small, non-regularized LSTM) "
              f"and {MEDIUM_REFERENCE} (medium, dropout 0.5)."]
    return "\n".join(lines)


def report(args):
    results = read_results(args.results)
    print(markdown(results))
    path = draw_model_curves(results, "val_perplexity", "validation perplexity",
                             "PTB: equal training time on one CPU core", args.results, log_y=True)
    print(f"Wrote {path}")


def main(argv=None):
    dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
