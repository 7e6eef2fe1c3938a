"""The inter-op pool side by side: TensorFlow's own size (a thread a core) against the server's default (one less).

TensorFlow gives its inter-op pool a thread a core. Between a server's model
calls its Python and gRPC threads run, and the pool's threads spin a while
after each op before they sleep: on two cores a second inter-op thread mostly
takes the core the server's own threads need. The server therefore picks the
cores less one when `--tensorflow_inter_op_parallelism` is 0
(`keras_relmem.serving.server.default_inter_op_threads`). This bench measures
that choice against TensorFlow's, with four servers running at once: unbatched
and batched (`--enable_batching`, as `bench.serving_latency`'s), each with
`--tensorflow_inter_op_parallelism` set to the core count (TensorFlow's size,
the server's default before) and left at 0.

Each round, in an order rotated from round to round, measures with native
clients over gRPC (h2load): the unbatched servers' sequential batch-1 p50
beside the in-process signature call, and every server's requests/s and p99
with `--clients` clients. Each round is written to `--out` as it finishes;
a rerun goes on from the rounds already there.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_threads --rounds 6 \\
        --out bench/results/serving_threads.json

Needs Debian's `nghttp2-client` (`bench.native_load`).
"""

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import tempfile

from bench import native_load
from bench.serving import alternated_rounds, export_babi_entnet, rotated
from bench.serving_latency import (
    QUESTION,
    STORY,
    grpc_message,
    h2load_p50,
    running_server,
    sequential_p50,
    server_flags,
    stats,
)

# server name: (batching, the inter-op flag's value: None for the server's default)
SERVERS = {
    "unbatched_tensorflow_pool": (False, "cores"),
    "unbatched_server_default": (False, None),
    "batched_tensorflow_pool": (True, "cores"),
    "batched_server_default": (True, None),
}
SEQUENTIAL = ("in_process", "unbatched_tensorflow_pool", "unbatched_server_default")


def flags(base, batching, inter_op):
    extra = [] if inter_op is None else ["--tensorflow_inter_op_parallelism", str(os.cpu_count() or 1)]
    return server_flags(base, batching, "tensorflow_default") + extra


def summarize(rounds):
    """Medians over rounds: sequential p50 (and over in-process), each server's requests/s and p99, and the
    server's default over TensorFlow's pool per round."""
    p50 = {name: statistics.median(r["sequential_p50_ms"][name] for r in rounds) for name in SEQUENTIAL}
    load = {name: {key: statistics.median(r["load"][name][key] for r in rounds) for key in ("rps", "p99_ms")}
            for name in SERVERS}
    floor = [r["sequential_p50_ms"]["in_process"] for r in rounds]
    result = {"rounds": len(rounds), "sequential_p50_ms": p50,
              "sequential_over_in_process": {name: p50[name] / p50["in_process"] for name in SEQUENTIAL[1:]},
              "rounds_within_1_3x": {name: sum(r["sequential_p50_ms"][name] / f <= 1.3 for r, f in zip(rounds, floor))
                                     for name in SEQUENTIAL[1:]},
              "load": load}
    for kind in ("unbatched", "batched"):
        ratios = [r["load"][f"{kind}_server_default"]["rps"] / r["load"][f"{kind}_tensorflow_pool"]["rps"]
                  for r in rounds]
        result[f"{kind}_rps_server_default_over_tensorflow_pool"] = {
            "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    seq = [r["sequential_p50_ms"]["unbatched_server_default"] / r["sequential_p50_ms"]["unbatched_tensorflow_pool"]
           for r in rounds]
    result["sequential_server_default_over_tensorflow_pool"] = {
        "median": statistics.median(seq), "min": min(seq), "max": max(seq)}
    return result


def markdown(result):
    s, args = result["summary"], result["arguments"]
    lines = [f"{s['rounds']} rounds; inter-op pool of TensorFlow's size ({args['cores']} threads) against the "
             f"server's default ({args['server_default_threads']})", "",
             f"Sequential batch-1 p50 ms (gRPC, h2load): in-process {s['sequential_p50_ms']['in_process']:.3f}, "
             f"TensorFlow's pool {s['sequential_p50_ms']['unbatched_tensorflow_pool']:.3f} "
             f"({s['sequential_over_in_process']['unbatched_tensorflow_pool']:.2f}x), server's default "
             f"{s['sequential_p50_ms']['unbatched_server_default']:.3f} "
             f"({s['sequential_over_in_process']['unbatched_server_default']:.2f}x)", "",
             f"| server, {args['clients']} clients | req/s | p99 ms |", "|---|---|---|"]
    for name in SERVERS:
        lines.append(f"| {name.replace('_', ' ')} | {s['load'][name]['rps']:.0f} | {s['load'][name]['p99_ms']:.1f} |")
    return "\n".join(lines)


def run(args):
    import tensorflow as tf

    from keras_relmem.serving.server import default_inter_op_threads

    out = pathlib.Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {"rounds": []}
    result["arguments"] = {"rounds": args.rounds, "seconds": args.seconds, "clients": args.clients,
                           "cores": os.cpu_count(), "server_default_threads": default_inter_op_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        export_babi_entnet(base)
        answer = tf.saved_model.load(str(base / "babi" / "1")).signatures["answer"]
        story, question = tf.constant([STORY]), tf.constant([QUESTION])
        with contextlib.ExitStack() as stack:
            ports = {name: stack.enter_context(running_server(flags(base, batching, inter_op)))["grpc"]
                     for name, (batching, inter_op) in SERVERS.items()}
            for port in ports.values():
                native_load.check_grpc_body(port, grpc_message())
                native_load.h2load_grpc(port, grpc_message(), args.clients, seconds=1)  # connections, caches

            def measure_round(index):
                sequential, load = {}, {}
                for name in rotated(SEQUENTIAL, index):
                    sequential[name] = (sequential_p50(lambda: answer(story=story, question=question))
                                        if name == "in_process" else h2load_p50(ports[name], grpc_message()))
                for name in rotated(SERVERS, index):
                    rate, latencies = native_load.h2load_grpc(ports[name], grpc_message(), args.clients,
                                                              seconds=args.seconds)
                    load[name] = stats(latencies, rate)
                return {"sequential_p50_ms": sequential, "load": load}

            alternated_rounds(result, out, args.rounds, measure_round, summarize)
    print(markdown(result))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds of each load measurement")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--out", default="bench/results/serving_threads.json")
    if not native_load.available():
        parser.error("needs Debian's nghttp2-client (h2load) and wrk")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
