"""Training steps/s of RelationalMemoryCell, EntNetCell and LSTMCell.

Each model is `keras.layers.RNN(cell)` followed by a Dense classifier, trained
with Adam on random data; the LSTM gets the number of units that brings its
parameter count closest to each memory cell's. Graph mode (`tf.function`,
Keras' default) and XLA (`jit_compile=True`) are both timed.

Usage:
    python -m bench.lm.throughput [--batch 32] [--steps 20] [--features 32] [--iters 30]
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_relmem as kr  # noqa: E402
from bench.common import seconds_per_step  # noqa: E402


def cell_params(cell, features):
    cell.build((None, features))
    return sum(int(np.prod(w.shape)) for w in cell.trainable_weights)


def lstm_matching(params, features):
    best = min(
        range(4, 1024),
        key=lambda u: abs(4 * u * (features + u + 1) - params),
    )
    return keras.layers.LSTMCell(best)


def model_for(cell_factory, args):
    model = keras.Sequential(
        [
            keras.Input((args.steps, args.features)),
            keras.layers.RNN(cell_factory()),
            keras.layers.Dense(10),
        ]
    )
    return model


def steps_per_second(cell_factory, args, jit):
    model = model_for(cell_factory, args)
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch * (args.iters + 2), args.steps, args.features))
    y = rng.integers(10, size=(len(x),))
    return 1.0 / seconds_per_step(model, x.astype("float32"), y, args.batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="sequence length")
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--iters", type=int, default=30, help="timed training steps")
    args = parser.parse_args()

    cells = {
        "RelationalMemoryCell(4 slots, 2x32 heads)": lambda: kr.RelationalMemoryCell(
            mem_slots=4, head_size=32, num_heads=2
        ),
        "EntNetCell(20 blocks x 32)": lambda: kr.EntNetCell(
            num_blocks=20, units=args.features
        ),
    }
    print(
        f"batch {args.batch}, sequence length {args.steps}, features {args.features}, "
        f"{args.iters} timed steps, backend {keras.backend.backend()}"
    )
    print(f"{'cell':48s} {'params':>8s} {'graph st/s':>11s} {'XLA st/s':>9s}")
    for name, factory in cells.items():
        params = cell_params(factory(), args.features)
        lstm = lstm_matching(params, args.features)
        lstm_params = cell_params(lstm, args.features)
        rows = [
            (name, factory, params),
            (f"  LSTMCell({lstm.units}) of similar size", lambda u=lstm.units: keras.layers.LSTMCell(u), lstm_params),
        ]
        for label, make, count in rows:
            graph = steps_per_second(make, args, jit=False)
            xla = steps_per_second(make, args, jit=True)
            print(f"{label:48s} {count:8d} {graph:11.1f} {xla:9.1f}", flush=True)


if __name__ == "__main__":
    main()
