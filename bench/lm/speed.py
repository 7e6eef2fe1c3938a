"""Training tokens/s of the language models on every backend and mode, against the machine's matrix-product rate.

Measures, on random token ids with the TBPTT shapes of `tasks/train_lm.py`,
our RMC language model at the PyTorch RMC port's PTB configuration
(embedding 192, 1 slot, head size 192, 4 heads, key size 64, 3 MLP layers,
1 block, batch 64, BPTT 100, tied 10k softmax) in its two forms, side by side
in one run: `RelationalMemory` (input-only terms computed before the
recurrence, what the models use) and the reference
`keras.layers.RNN(RelationalMemoryCell(...))`; then (unless `--only rmc`) our
LSTM baseline and a plain `keras.layers.LSTM` model of the same size.

Every model is timed on each backend (`--backends`, one process each: Keras
fixes its backend at import) in each compiled mode: TensorFlow graph
(`tf.function`) and XLA (`jit_compile=True`), JAX `jit`. Each process also
measures the machine's matrix-product rate (`bench.lm.flops.matmul_gflops`), so
each row reports its matrix-product GFLOP/s (training FLOPs per token, counted
from the layer sizes, times tokens/s) and the share of the machine's rate
that it reaches.

Results go to `bench/lm/results/lm_speed.json` row by row as they finish;
`--resume` continues an interrupted run (a new run starts a new table: rows of
different runs are not compared).

Usage:
    python -m bench.lm.speed [--only rmc] [--backends tensorflow jax] [--steps 3] [--resume]
    python -m bench.lm.speed --report
"""

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.common import merge_result  # noqa: E402

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "lm_speed.json"
MODES = {"tensorflow": ["graph", "XLA"], "jax": ["jit"]}
REFERENCE = "RMC, RNN(cell) (reference)"
MODELS = {
    REFERENCE: ("rmc", {"precompute_inputs": False}),
    "RMC, RelationalMemory(transposed_kernels=False)": ("rmc", {"transposed_kernels": False}),
    "RMC, RelationalMemory(transposed_kernels=True)": ("rmc", {"transposed_kernels": True}),
    "LSTM baseline (tied)": ("lstm", {}),
    "plain keras LSTM (untied)": ("plain_lstm", {}),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed training steps (after 2 warm-up steps)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--bptt", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--only", choices=["all", "rmc"], default="rmc")
    parser.add_argument("--backends", nargs="+", choices=sorted(MODES), default=["tensorflow", "jax"])
    parser.add_argument("--resume", action="store_true", help="continue the run in the results file")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--report", action="store_true", help="print the table from the JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def plain_lstm(vocab, batch, bptt, units=1000, dim=192):
    import keras

    return keras.Sequential(
        [
            keras.Input((bptt,), batch_size=batch, dtype="int32"),
            keras.layers.Embedding(vocab, dim),
            keras.layers.LSTM(units, return_sequences=True, stateful=True),
            keras.layers.Dense(vocab),
        ]
    )


def build(name, args):
    from keras_relmem.models.language_model import build_language_model

    kind, options = MODELS[name]
    if kind == "plain_lstm":
        return plain_lstm(args.vocab, args.batch, args.bptt)
    return build_language_model(kind, args.vocab, args.batch, args.bptt, stateful=True, **options)


def training_flops(name, vocab):
    from bench.lm.flops import lm_training_flops_per_token
    from keras_relmem.models.language_model import lm_defaults

    kind = MODELS[name][0]
    if kind == "plain_lstm":
        return lm_training_flops_per_token("lstm", {"embedding_dim": 192, "units": 1000, "tied": False}, vocab)
    return lm_training_flops_per_token(kind, lm_defaults(kind), vocab)


def compiled_with_batches(model, args, jit, batches):
    """`model` compiled with the task's recipe (Adam 1e-3, clip-norm 0.25), and `batches` batches of random
    token ids and targets for it: what every timing and profile of this bench trains on."""
    import keras
    import numpy as np

    model.compile(
        keras.optimizers.Adam(1e-3, clipnorm=0.25),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )
    rng = np.random.default_rng(0)
    x = rng.integers(args.vocab, size=(args.batch * batches, args.bptt))
    y = rng.integers(args.vocab, size=x.shape)
    return model, x, y


def tokens_per_second(model, args, jit):
    from bench.common import seconds_per_step

    model, x, y = compiled_with_batches(model, args, jit, args.steps + 2)
    return args.batch * args.bptt / seconds_per_step(model, x, y, args.batch)


def worker(args):
    """Time every model in every mode of this process' backend, one row at a time."""
    import keras

    from bench.lm.flops import matmul_gflops

    backend = keras.backend.backend()
    done = json.loads(pathlib.Path(args.results).read_text()).get("rows", {})
    rate = round(matmul_gflops(), 1)
    print(f"{backend}: matrix products at {rate} GFLOP/s", flush=True)
    merge_result(args.results, ("matmul_gflops", backend), rate, None)
    names = [n for n in MODELS if args.only == "all" or MODELS[n][0] == "rmc"]
    for name in names:
        for mode in MODES[backend]:
            key = f"{backend} {mode}: {name}"
            if key in done:
                print(f"{key}: done, skipped", flush=True)
                continue
            model = build(name, args)
            tokens = tokens_per_second(model, args, jit=mode != "graph")
            flops = training_flops(name, args.vocab)
            row = {"backend": backend, "mode": mode, "model": name, "params": model.count_params(),
                   "tokens_per_s": round(tokens, 1), "flops_per_token": flops,
                   "gflops": round(tokens * flops / 1e9, 1)}
            merge_result(args.results, ("rows", key), row, None)
            print(f"{key}: {tokens:,.0f} tok/s, {row['gflops']} GFLOP/s", flush=True)


def run(args):
    path = pathlib.Path(args.results)
    if not (args.resume and path.exists()):
        shape = {k: getattr(args, k) for k in ("steps", "batch", "bptt", "vocab", "only")}
        header = {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(), **shape, "rows": {}}
        path.write_text(json.dumps(header, indent=2) + "\n")
    for backend in args.backends:
        command = [sys.executable, "-m", "bench.lm.speed", "--worker", "--results", str(path),
                   "--steps", str(args.steps), "--batch", str(args.batch), "--bptt", str(args.bptt),
                   "--vocab", str(args.vocab), "--only", args.only]
        subprocess.run(command, env={**os.environ, "KERAS_BACKEND": backend}, check=True)
    print(markdown(json.loads(path.read_text())))


def markdown(results):
    """Each model, backend and mode: tokens/s, its matrix-product rate, and the speed-up over RNN(cell)."""
    machine = max(results.get("matmul_gflops", {}).values(), default=float("nan"))
    lines = ["| model | backend, mode | parameters | training tok/s | × RNN(cell) | MFLOP per token | GFLOP/s "
             "| share of the machine's matrix-product rate |", "|---|---|---|---|---|---|---|---|"]
    rows = results.get("rows", {})
    for row in rows.values():
        reference = next((r for r in rows.values() if r["model"] == REFERENCE
                          and (r["backend"], r["mode"]) == (row["backend"], row["mode"])), None)
        ratio = f"{row['tokens_per_s'] / reference['tokens_per_s']:.2f}" if reference else ""
        lines.append(f"| {row['model']} | {row['backend']} {row['mode']} | {row['params']:,} | "
                     f"{row['tokens_per_s']:,.0f} | {ratio} | {row['flops_per_token'] / 1e6:.1f} | {row['gflops']} | "
                     f"{100 * row['gflops'] / machine:.0f}% |")
    rates = ", ".join(f"{backend} {rate} GFLOP/s" for backend, rate in results.get("matmul_gflops", {}).items())
    lines += ["", f"Batch {results['batch']} x BPTT {results['bptt']}, vocabulary {results['vocab']}, median of "
              f"{results['steps']} timed steps after 2 warm-up steps, {results['cpus']} cores, {results['date']}. "
              f"The machine's matrix-product rate (a 6400 x 768 by 768 x 1280 product, best of 5): {rates}; the "
              "share is against the highest. FLOPs count the matrix products of a training step (3 x forward)."]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        print(markdown(json.loads(pathlib.Path(args.results).read_text())))
    elif args.worker:
        worker(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
