"""Where a language-model training step spends its time, by kind of op (TensorFlow profiler).

Trains the RMC language model of `bench.lm.speed` (or the LSTM) for a few
batches under `tf.profiler`, reads the trace back and sums the ops' own time
by phase (forward / backward), place (inside the recurrence's loop or
outside it) and kind (matrix products against everything else), with the
largest single ops. The matrix products' share says how much a faster
recurrence could still win: a step that is mostly matrix products running at
the machine's rate is as fast as its FLOPs allow.

`--products` times instead the matrix products of one step of the RMC's
memory gates (64 rows by a 768 x 1536 kernel) the three ways a training step
computes them: forward, the input gradient autodiff writes (by the kernel
transposed inside the product) and the same on a kernel transposed
beforehand (`RelationalMemory(transposed_kernels=True)`).

Usage:
    python -m bench.lm.profile [--model rmc|rmc-cell|lstm] [--steps 2] [--bptt 100]
    python -m bench.lm.profile --products
"""

import argparse
import collections
import os
import pathlib
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.lm import speed as lm_speed  # noqa: E402

# --model: the bench.lm.speed row each choice profiles (TensorFlow's default RelationalMemory transposes
# its kernels).
PROFILED = {"rmc": "RMC, RelationalMemory(transposed_kernels=True)", "rmc-cell": lm_speed.REFERENCE,
            "lstm": "LSTM baseline (tied)"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(PROFILED), default="rmc",
                        help="rmc: RelationalMemory; rmc-cell: RNN(RelationalMemoryCell), the reference")
    parser.add_argument("--steps", type=int, default=2, help="profiled training batches (after 2 warm-up)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--bptt", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--top", type=int, default=15, help="largest single ops to list")
    parser.add_argument("--products", action="store_true",
                        help="time one step's products with and without a transposed operand instead")
    return parser.parse_args(argv)


def product_rates(rows=64, features=768, units=1536, repeats=300):
    """GFLOP/s of `x @ W`, `dz @ transpose(W)` (transposed inside the product) and `dz @ W_t` (a transposed
    copy), TensorFlow graph, on the shapes of one step of the PTB RMC's memory gates."""
    import time

    import tensorflow as tf

    x, dz = tf.random.normal((rows, features)), tf.random.normal((rows, units))
    kernel = tf.random.normal((features, units))
    kernel_t = tf.transpose(kernel)
    cases = {"forward: x @ W": (lambda: tf.matmul(x, kernel)),
             "input gradient, autodiff: dz @ transpose(W)": (lambda: tf.matmul(dz, kernel, transpose_b=True)),
             "input gradient, transposed copy: dz @ W_t": (lambda: tf.matmul(dz, kernel_t))}
    rates = {}
    for name, product in cases.items():
        step = tf.function(lambda product=product: tf.reduce_sum(product()))
        step()
        start = time.perf_counter()
        for _ in range(repeats):
            step()
        float(step())
        rates[name] = 2 * rows * features * units * repeats / (time.perf_counter() - start) / 1e9
    return rates


def op_times(trace_dir):
    """{op name: (type, total picoseconds)} of the TensorFlow ops in a profiler trace directory."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals = collections.defaultdict(int)
    types = {}
    for path in pathlib.Path(trace_dir).glob("plugins/profile/*/*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            for line in plane.lines:
                if not line.name.startswith("tf_Compute"):
                    continue
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if ":" not in name or name.startswith("ExecutorState"):  # spans that hold the ops
                        continue
                    op, kind = name.rsplit(":", 1)
                    totals[op] += event.duration_ps
                    types[op] = kind
    return {op: (types[op], ps) for op, ps in totals.items()}


def categorize(times):
    """{(phase, place, kind): picoseconds}: forward, backward or the optimizer's update, in the loop or
    outside, matmul or other."""
    groups = collections.Counter()
    for op, (kind, ps) in times.items():
        if "adam" in op.lower() or "clip" in op.lower():
            phase = "optimizer"
        else:
            phase = "backward" if "gradient_tape" in op or "gradients" in op else "forward"
        place = "loop" if "/while/" in op or "while_grad" in op else "outside"
        groups[(phase, place, "matmul" if "MatMul" in kind else "other")] += ps
    return groups


def main(argv=None):
    args = parse_args(argv)
    if args.products:
        for name, rate in product_rates().items():
            print(f"{name:45s} {rate:6.1f} GFLOP/s")
        return
    import tensorflow as tf

    name = PROFILED[args.model]
    model, x, y = lm_speed.compiled_with_batches(lm_speed.build(name, args), args, jit=False, batches=args.steps + 2)
    warm = args.batch * 2
    model.fit(x[:warm], y[:warm], batch_size=args.batch, verbose=0, shuffle=False)
    with tempfile.TemporaryDirectory() as trace:
        tf.profiler.experimental.start(trace)
        model.fit(x[warm:], y[warm:], batch_size=args.batch, verbose=0, shuffle=False)
        tf.profiler.experimental.stop()
        times = op_times(trace)
    total = sum(ps for _, ps in times.values())
    tokens = args.batch * args.bptt * args.steps
    flops = lm_speed.training_flops(name, args.vocab) * tokens
    matmul = sum(ps for kind, ps in times.values() if "MatMul" in kind)
    print(f"{args.model}: {total / 1e12:.2f} s of op time over {args.steps} batches of {args.batch} x {args.bptt}; "
          f"matrix products {100 * matmul / total:.0f}% of it, at {flops / (matmul / 1e12) / 1e9:.1f} GFLOP/s")
    for (phase, place, kind), ps in sorted(categorize(times).items(), key=lambda kv: -kv[1]):
        print(f"  {100 * ps / total:5.1f}%  {phase:9s} {place:7s} {kind}")
    print("largest ops (share of op time):")
    for op, (kind, ps) in sorted(times.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {100 * ps / total:5.1f}%  {kind:28s} {op[-90:]}")


if __name__ == "__main__":
    main()
