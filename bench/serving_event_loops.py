"""Event loops side by side: the batching server on uvloop and on asyncio's own loop, repeated and alternated.

One 8-second measurement a server swings by 10% from run to run on two
cores, more than the difference one event loop makes against another, so
`bench.serving_latency`'s single figures cannot tell them apart. Here three
servers run at once, all with REST and TensorFlow's threads as `--threads`:
unbatched, batched on uvloop (`--event_loop=uvloop`) and batched on asyncio's
own loop (`--event_loop=asyncio`). Each round measures each of them with 32
native clients (h2load over gRPC, then wrk over REST) in an order rotated
from round to round, so a drift of the machine touches them alike. Each
round is written to `--out` as it finishes, and a rerun goes on from the
rounds already there.

Reports per round and as medians: requests/s and p99 of each server, each
batched server over the unbatched one of the same round (the serving issue
asks 2.5x), and uvloop over asyncio.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_event_loops --rounds 6 \\
        --out bench/results/serving_event_loops.json
"""

import argparse
import contextlib
import json
import pathlib
import statistics
import tempfile

from bench import native_load
from bench.serving import alternated_rounds, export_babi_entnet, rotated
from bench.serving_latency import (
    THREADS,
    _with_rest,
    grpc_message,
    rest_body,
    running_server,
    server_flags,
    stats,
    wrk_stats,
)

SERVERS = {
    "unbatched": (False, []),
    "batched_uvloop": (True, ["--event_loop=uvloop"]),
    "batched_asyncio": (True, ["--event_loop=asyncio"]),
}
APIS = ("grpc", "rest")


def measure(api, ports, clients, seconds):
    """`stats`' figures of `clients` native clients of `api` for `seconds`."""
    if api == "grpc":
        rate, latencies = native_load.h2load_grpc(ports["grpc"], grpc_message(), clients, seconds=seconds)
        return stats(latencies, rate)
    return wrk_stats(ports["rest"], rest_body(), clients, seconds)


def order(round_index):
    """The servers' order in a round: rotated by one each round."""
    return rotated(SERVERS, round_index)


def summarize(rounds):
    """Per API: the medians over rounds of each server's requests/s and p99, and of the ratios."""
    result = {}
    for api in APIS:
        rows = [r[api] for r in rounds if api in r]
        if not rows:
            continue
        ratios = {
            "batched_uvloop_over_unbatched": [r["batched_uvloop"]["rps"] / r["unbatched"]["rps"] for r in rows],
            "batched_asyncio_over_unbatched": [r["batched_asyncio"]["rps"] / r["unbatched"]["rps"] for r in rows],
            "uvloop_over_asyncio": [r["batched_uvloop"]["rps"] / r["batched_asyncio"]["rps"] for r in rows],
        }
        result[api] = {
            **{name: {"rps": statistics.median(r[name]["rps"] for r in rows),
                      "p99_ms": statistics.median(r[name]["p99_ms"] for r in rows)} for name in SERVERS},
            **{key: {"median": statistics.median(values), "min": min(values), "max": max(values)}
               for key, values in ratios.items()},
            "rounds_uvloop_faster": sum(v > 1 for v in ratios["uvloop_over_asyncio"]),
            "rounds_uvloop_at_least_2_5x": sum(v >= 2.5 for v in ratios["batched_uvloop_over_unbatched"]),
            "rounds": len(rows),
        }
    return result


def markdown(result):
    lines = [f"32 native clients, TensorFlow threads: {result['arguments']['threads'].replace('_', ' ')}; "
             f"{len(result['rounds'])} rounds of {result['arguments']['seconds']:g} s a server", "",
             "| API | unbatched req/s | uvloop req/s (p99 ms) | asyncio req/s (p99 ms) | uvloop / unbatched "
             "| asyncio / unbatched | uvloop / asyncio |",
             "|---|---|---|---|---|---|---|"]
    for api, s in result["summary"].items():
        lines.append(
            f"| {api} | {s['unbatched']['rps']:.0f} | {s['batched_uvloop']['rps']:.0f} "
            f"({s['batched_uvloop']['p99_ms']:.1f}) | {s['batched_asyncio']['rps']:.0f} "
            f"({s['batched_asyncio']['p99_ms']:.1f}) | {s['batched_uvloop_over_unbatched']['median']:.2f}x "
            f"| {s['batched_asyncio_over_unbatched']['median']:.2f}x | {s['uvloop_over_asyncio']['median']:.2f}x "
            f"({s['uvloop_over_asyncio']['min']:.2f}-{s['uvloop_over_asyncio']['max']:.2f}) |")
    return "\n".join(lines)


def run(args):
    out = pathlib.Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {"rounds": []}
    if result.get("arguments", {}).get("threads", args.threads) != args.threads:
        raise SystemExit(f"{out} holds rounds with --threads {result['arguments']['threads']}; "
                         "give another --out for another setting")
    result["arguments"] = {"threads": args.threads, "seconds": args.seconds, "clients": args.clients}
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        export_babi_entnet(base)
        with contextlib.ExitStack() as stack:
            ports = {name: stack.enter_context(running_server(_with_rest(server_flags(base, batching, args.threads))
                                                               + extra))
                     for name, (batching, extra) in SERVERS.items()}
            alternated_rounds(result, out, args.rounds, lambda index: {
                api: {name: measure(api, ports[name], args.clients, args.seconds) for name in order(index)}
                for api in APIS}, summarize)
    print(markdown(result))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=6.0, help="measuring time per server and API in a round")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--threads", choices=list(THREADS), default="one_thread_each")
    parser.add_argument("--out", default="bench/results/serving_event_loops.json")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
