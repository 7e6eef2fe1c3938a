"""EntNet training speed on bAbI: seconds per en-10k epoch, old and new input paths side by side.

One EntNet (`build_babi_model("entnet")`, the paper's sizes) and one set of
starting weights, timed on the same data in one run:

- `padded`: what `tasks/train_babi.py` did before bucketing: every story padded to
  the 70-sentence memory window (`BabiData.dataset`), so the recurrence runs 70
  steps for every question;
- `bucketed`: stories of similar length batched together and padded to their
  bucket's bound (`BabiData.bucketed_dataset`), the default of train_babi now;
- `bucketed + XLA`: the same with `jit_compile=True` and only full batches
  (`drop_remainder=True`: one compilation per bound; each pass drops at most
  one partial batch per bucket), as `train_babi.py --jit-compile` trains.

Each path trains `--steps` batches after a warm-up step on every batch shape
(so no tracing or compilation is timed) and the epoch time is extrapolated
from the steps/s; the weights are reset before each path. Also checks that the
padded and bucketed inputs give the same logits on the same weights. Results:
`bench/entnet_babi/results/entnet_speed.json`.

Usage:
    KERAS_RELMEM_DATA=../shared/data python -m bench.entnet_babi.speed [--task 2] [--steps 60]
"""

import argparse
import json
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from bench.common import limit_threads, seconds_for_steps  # noqa: E402

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "entnet_speed.json"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", type=int, default=2)
    parser.add_argument("--data", default="en-10k")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--steps", type=int, default=60, help="timed training batches per path")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--paths", nargs="+", default=["padded", "bucketed", "bucketed + XLA"])
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--results", default=str(RESULTS))
    return parser.parse_args(argv)


def one_batch_per_shape(ds, arrays, bounds, batch_size):
    """A dataset like `ds` with one full batch cut to each bound."""
    import tensorflow as tf

    def batches():
        rows = slice(0, batch_size)
        for bound in bounds:
            yield {"story": arrays["story"][rows, :bound], "query": arrays["query"][rows]}, arrays["answer"][rows]

    ds = tf.data.Dataset.from_generator(batches, output_signature=ds.element_spec)
    return ds.apply(tf.data.experimental.assert_cardinality(len(bounds)))


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    import keras
    import numpy as np

    from keras_relmem.data import babi, load_babi
    from keras_relmem.models import build_babi_model
    from keras_relmem.training import write_json

    data = load_babi(args.task, args.data, data_dir=args.data_dir)
    arrays = data.arrays("train")
    lengths = data.story_lengths("train")
    bounds = babi.bucket_bounds(lengths)
    steps_per_epoch = int(np.ceil(len(lengths) / args.batch_size))
    print(f"task {args.task} ({args.data}): {len(lengths)} training questions, window {data.story_length}, "
          f"mean story {lengths.mean():.1f} sentences, bucket bounds {bounds}", flush=True)

    keras.utils.set_random_seed(0)
    model = build_babi_model("entnet", len(data.vocab), len(data.answer_vocab), data.story_length,
                             data.sentence_length, data.query_length)
    start_weights = model.get_weights()

    # Same weights, same questions: the padded and the trimmed stories answer alike.
    rows = np.argsort(lengths)[:: max(1, len(lengths) // 64)][:64]
    full = {"story": arrays["story"][rows], "query": arrays["query"][rows]}
    trimmed = {**full, "story": full["story"][:, : int(lengths[rows].max())]}
    difference = float(np.abs(model.predict(full, verbose=0) - model.predict(trimmed, verbose=0)).max())
    print(f"max |logits padded - logits trimmed| on the same weights: {difference:.2e}", flush=True)

    rates = {}
    for path in args.paths:
        model.set_weights(start_weights)
        model.compile(keras.optimizers.Adam(0.01, clipnorm=40.0),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile="XLA" in path)
        if path == "padded":
            ds, shapes = data.dataset("train", args.batch_size, seed=0), [data.story_length]
        else:  # XLA compiles once per shape: only full batches
            ds = data.bucketed_dataset("train", args.batch_size, seed=0, drop_remainder="XLA" in path)
            shapes = bounds
        # Trace (and compile, under XLA) every batch shape before timing, through fit's own function.
        model.fit(one_batch_per_shape(ds, arrays, shapes, args.batch_size), epochs=1, verbose=0, shuffle=False)
        ds = ds.repeat()
        seconds = seconds_for_steps(model, ds, args.steps, settle=3)
        rates[path] = {"steps_per_s": round(args.steps / seconds, 2),
                       "epoch_seconds": round(steps_per_epoch * seconds / args.steps, 1)}
        print(f"{path:16s} {rates[path]['steps_per_s']:6.2f} steps/s, {rates[path]['epoch_seconds']:7.1f} s "
              f"per epoch", flush=True)
    if "padded" in rates:
        for path in rates:
            rates[path]["speed_up"] = round(rates["padded"]["epoch_seconds"] / rates[path]["epoch_seconds"], 2)
        print("speed-up over padded: " + ", ".join(f"{p} {r['speed_up']}x" for p, r in rates.items()))
    write_json(args.results, {"task": args.task, "data": args.data, "paths": rates, "steps": args.steps,
                              "batch_size": args.batch_size, "steps_per_epoch": steps_per_epoch,
                              "bounds": [int(b) for b in bounds], "mean_story": round(float(lengths.mean()), 2),
                              "max_logit_difference": difference, "cpus": os.cpu_count(), "threads": args.threads})
    return json.loads(pathlib.Path(args.results).read_text())


def markdown(results):
    """Seconds per epoch of each input path and its speed-up over the padded one."""
    lines = ["| path | steps/s | seconds per epoch | speed-up over padded |", "|---|---|---|---|"]
    for path, rate in results["paths"].items():
        lines.append(f"| {path} | {rate['steps_per_s']} | {rate['epoch_seconds']} | {rate.get('speed_up', '')} |")
    lines += ["", f"Task {results['task']} ({results['data']}), batch {results['batch_size']}, "
              f"{results['steps_per_epoch']} steps per epoch, mean story {results['mean_story']} sentences; "
              f"max logit difference padded vs trimmed {results['max_logit_difference']:.1e}; {results['cpus']} cores"
              + (f"; {results['how']}" if results.get("how") else "") + "."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
