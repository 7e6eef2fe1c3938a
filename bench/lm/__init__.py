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
start). The result goes into `bench/lm/results/ptb_lm.json` as
`{"rmc": {"perplexity": <test>, "minutes": m, "curve": [...]}, "lstm": {...}, "args": ...}`.
Each curve point is one round: `minutes` (training time at its end),
`epoch` (epochs done when it started, the epoch its learning rate belongs to),
`train_perplexity` (over the round) and `val_perplexity` (after it).

Usage (one core per model, both side by side):
    KERAS_RELMEM_DATA=../shared/data python -m bench.lm --model rmc --threads 1 &
    KERAS_RELMEM_DATA=../shared/data python -m bench.lm --model lstm --threads 1 &
    python -m bench.lm --report      # table + picture from the JSON

The runs of the fair comparison (`bench/lm/results/ptb_lm_fair.json`) are named recipes
(`keras_relmem.recipes`, configs of `LMRoundsConfig`, which `relmem-train-lm --recipe NAME` trains too):
`lm_ptb_rmc_budget`, `lm_ptb_rmc_early_stop`,
`lm_ptb_lstm_zaremba_small` and `lm_ptb_lstm_zaremba_medium`; e.g. Zaremba et al.'s small LSTM
(their recipe, 2 hours):
    python -m bench.lm --recipe lm_ptb_lstm_zaremba_small --name lstm_zaremba_small --threads 1 \
        --results runs/ptb_lm_fair.json --workdir runs/ptb_fair
Their code's loss sums the cross-entropy over the 20 steps (mean over the
batch); ours is the mean over every token, so their SGD rate 1 and gradient
clip 5 are our rate 20 and clip 0.25 (the same updates exactly, for SGD).
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from bench import common  # noqa: E402
from keras_relmem.configs import LMRoundsConfig  # noqa: E402
from keras_relmem.tasks.lm import learning_rate_at  # noqa: E402, F401  (the library's, as the tests use it)
from keras_relmem.training import best_entry  # noqa: E402

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "ptb_lm.json"
# Zaremba et al. 2014, non-regularized 2-layer LSTM (200 units): test perplexity.
REFERENCE = 114.5
# Their medium model (2 x 650 units, dropout 0.5, 39 epochs): test perplexity.
MEDIUM_REFERENCE = 82.7


def parse_args(argv=None):
    """The flags of `configs.LMRoundsConfig` (as `relmem-train-lm --budget-minutes ...` parses them, over the
    config's own defaults), the run's, --name and --report."""
    return common.parse_config(argv, LMRoundsConfig, "runs/bench_ptb_lm", RESULTS, __doc__.splitlines()[0])


def run(args):
    """Train the run `args` describe (`kr.train` of its `LMRoundsConfig`) in WORKDIR/<name>, its result recorded
    in the bench's table as it goes."""
    name = args.name or args.model
    arguments = common.run_arguments(args, "data_dir")
    common.train_config(args, pathlib.Path(args.workdir) / name, "ptb_lm",
                 lambda result: common.merge_result(args.results, name, result, arguments))


def markdown(results):
    """Test and validation perplexity of each model after its budget, and the reference."""
    lines = ["| model | seed | test ppl | valid ppl | lowest valid ppl on the way (minute) | training minutes "
             "| epochs | tokens | parameters | test ppl of the best valid round (its valid ppl, minute) |",
             "|" + "---|" * 10]
    for name in common.run_names(results):
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
    results = common.read_results(args.results)
    print(markdown(results))
    path = common.draw_model_curves(results, "val_perplexity", "validation perplexity",
                             "PTB: equal training time on one CPU core", args.results, log_y=True)
    print(f"Wrote {path}")


def main(argv=None):
    common.dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
