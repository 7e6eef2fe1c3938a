"""Training tokens/s and parameter count of the language models.

Measures, on random token ids with the TBPTT shapes of `tasks/train_lm.py`:
our RMC language model at the PyTorch RMC port's PTB configuration
(embedding 192, 1 slot, head size 192, 4 heads, key size 64, 3 MLP layers,
1 block, batch 64, BPTT 100, tied 10k softmax) in its two forms, side by side
in one run: `RelationalMemory` (input-only terms computed before the
recurrence, what the models use) and the reference
`keras.layers.RNN(RelationalMemoryCell(...))`; then our LSTM baseline and a
plain `keras.layers.LSTM` model (Embedding -> LSTM -> Dense) of the same size,
in graph mode and with XLA. `--only rmc` times the two RMC forms alone.

Usage:
    python -m bench.lm_speed [--steps 5] [--batch 64] [--bptt 100] [--vocab 10000]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from bench.timing import seconds_per_step  # noqa: E402
from keras_relmem.models.language_model import build_language_model  # noqa: E402


def plain_lstm(vocab, batch, bptt, units=1000, dim=192):
    return keras.Sequential(
        [
            keras.Input((bptt,), batch_size=batch, dtype="int32"),
            keras.layers.Embedding(vocab, dim),
            keras.layers.LSTM(units, return_sequences=True, stateful=True),
            keras.layers.Dense(vocab),
        ]
    )


def tokens_per_second(model, args, jit):
    model.compile(
        keras.optimizers.Adam(1e-3, clipnorm=0.25),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )
    rng = np.random.default_rng(0)
    x = rng.integers(args.vocab, size=(args.batch * (args.steps + 2), args.bptt))
    y = rng.integers(args.vocab, size=x.shape)
    return args.batch * args.bptt / seconds_per_step(model, x, y, args.batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed training steps (after 2 warm-up steps)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--bptt", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--only", choices=["all", "rmc"], default="all")
    parser.add_argument("--no-xla", action="store_true", help="graph mode only")
    args = parser.parse_args()
    models = {
        "RMC LM, RNN(cell) (reference)": lambda: build_language_model(
            "rmc", args.vocab, args.batch, args.bptt, stateful=True, precompute_inputs=False
        ),
        "RMC LM, RelationalMemory (ours)": lambda: build_language_model(
            "rmc", args.vocab, args.batch, args.bptt, stateful=True
        ),
        "LSTM LM baseline (ours, tied)": lambda: build_language_model(
            "lstm", args.vocab, args.batch, args.bptt, stateful=True
        ),
        "plain keras LSTM model (untied)": lambda: plain_lstm(args.vocab, args.batch, args.bptt),
    }
    print(
        f"batch {args.batch} x BPTT {args.bptt}, vocabulary {args.vocab}, "
        f"{args.steps} timed steps, {os.cpu_count()} CPUs"
    )
    print(f"{'model':34s} {'params':>10s} {'graph tok/s':>12s} {'XLA tok/s':>10s}")
    if args.only == "rmc":
        models = {name: make for name, make in models.items() if name.startswith("RMC")}
    for name, make in models.items():
        params = make().count_params()
        graph = tokens_per_second(make(), args, jit=False)
        xla = float("nan") if args.no_xla else tokens_per_second(make(), args, jit=True)
        print(f"{name:34s} {params:10,d} {graph:12,.0f} {xla:10,.0f}", flush=True)


if __name__ == "__main__":
    main()
