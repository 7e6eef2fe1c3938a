"""Many version swaps in a row under the soak's load: how often a swap keeps within the serving issue's bound.

The soak (`bench.serving_soak`) swaps a version in twice a run; this bench
swaps `--swaps` times a run, every `--gap` seconds, under the soak's mixed
load (`--threads` clients, 40% bad requests). The new versions are exports of
the bAbI model's code with other weights, each from a process of its own (so
the server runs them on the served graph functions), with and without warm-up
records in turn. Per swap it takes the slowest request in flight while the
server loaded the version (the load's span from the server's log) over the
run's steady p99 (the requests outside every load and the half second after
it); the issue's bound is 2x. The first swap after the server starts is
reported apart, as it is the soak's first swap.

With `--baseline-script` (another checkout's `serving/server.py`, running that
checkout's package) each run is made with that server too, just before this
checkout's: old against new in one run. The exports are made once under
`--workdir`, each run's result is kept there as it finishes, and a rerun
continues.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_swap_series --runs 6 --swaps 6 \\
        --baseline-script <a checkout of the old server>/serving/server.py \\
        --out bench/results/serving_swap_series.json
"""

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.serving import save_and_report  # noqa: E402
from bench.serving_soak import (  # noqa: E402
    export_models,
    export_retrained,
    in_flight_during,
    load_spans,
    reused_loads,
    start_with_models,
    wait_for_version,
)
from bench.serving_swaps import BOUND, _spread  # noqa: E402
from keras_relmem.testing import soak  # noqa: E402

AFTER_LOAD_S = 0.5  # kept out of the steady figures after each load, with the load itself
SETTLE_S = 2.0  # load before the first swap


def make_exports(workdir):
    """babi (version 1), lm, and two retrained babi exports under `workdir/exports`, made once."""
    exports = pathlib.Path(workdir) / "exports"
    shapes_path = exports / "shapes.json"
    if not shapes_path.is_file():
        shutil.rmtree(exports, ignore_errors=True)
        shapes = export_models(exports / "base")
        for seed in (2, 3):
            export_retrained(exports / f"retrained-{seed}", seed)
        shapes_path.write_text(json.dumps(dataclasses.asdict(shapes)))
    shapes = soak.Shapes(**json.loads(shapes_path.read_text()))
    return shapes, exports / "base", [exports / f"retrained-{seed}" / "babi" / "1" for seed in (2, 3)]


def one_run(shapes, base_export, sources, swaps, gap, threads, script=None, server_flags=()):
    """Start a server on a copy of the exports, swap `swaps` versions in under load, and measure each swap."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="swap-series-"))
    try:
        for model in ("babi", "lm"):
            shutil.copytree(base_export / model, work / model)
        log_path = work / "server.stderr"
        process, grpc_port, rest_port = start_with_models(work, log_path, server_flags, script=script)
        try:
            status_client = soak.Client("127.0.0.1", grpc_port, rest_port)
            recorder, stop = soak.LoadRecorder(), threading.Event()
            clients = [soak.Client("127.0.0.1", grpc_port, rest_port) for _ in range(threads)]
            workers = [threading.Thread(target=soak.load_worker, args=(client, shapes, recorder, stop, seed, 0.4))
                       for seed, client in enumerate(clients)]
            began, began_wall = time.perf_counter(), time.time()  # the server's log is stamped with the wall clock
            for worker in workers:
                worker.start()
            time.sleep(SETTLE_S)
            arrivals = {}
            for index in range(swaps):
                version, warm = index + 2, index % 2 == 1
                staging = work / "babi" / f".{version}"
                shutil.copytree(sources[index % len(sources)], staging)
                if not warm:
                    (staging / "assets.extra" / "tf_serving_warmup_requests").unlink()
                arrivals[version] = warm
                os.rename(staging, work / "babi" / str(version))  # appears whole, as a deployment does
                wait_for_version(status_client, version)
                time.sleep(gap)
            stop.set()
            for worker in workers:
                worker.join()
            for client in [status_client, *clients]:
                client.close()
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        text = log_path.read_text()
        latencies = recorder.since(began)
        return measure(latencies, load_spans(text, "babi", began_wall), arrivals, {
            "good_requests": len(latencies), "good_failed": len(recorder.good_failures),
            "bad_5xx_or_dropped": sum(recorder.bad_5xx.values()),
            "loads_reusing_graph_functions": reused_loads(text),
        })
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(latencies, spans, arrivals, counts):
    """Each swap's slowest request in flight during its load over the steady p99 of the requests outside the loads.

    Args:
        latencies: `(sent s, took s)` of every good request.
        spans: `{version: (load start s, load end s)}` from the server's log (`load_spans`).
        arrivals: `{version: whether it had warm-up records}`, in the order they arrived.
        counts: the run's request counts, copied into the result.
    """
    loads = [spans[v] for v in arrivals if v in spans]
    apart = [(start, end + AFTER_LOAD_S) for start, end in loads]
    steady = [s for t, s in latencies if t >= SETTLE_S / 2 and not any(a <= t + s and t <= b for a, b in apart)]
    steady_p99 = soak.percentile(steady, 99) * 1e3
    swaps = []
    for version, warm in arrivals.items():
        if version not in spans:
            swaps.append({"version": version, "warm_up_records": warm, "loaded": False})
            continue
        found = in_flight_during(latencies, *spans[version])
        swaps.append({"version": version, "warm_up_records": warm, "loaded": True, "load_ms": found["ms"],
                      "in_flight": found["requests"], "slowest_ms": found["slowest_ms"],
                      "over_steady_p99": found["slowest_ms"] / steady_p99})
    return {"steady_p99_ms": steady_p99, "steady_requests": len(steady), "swaps": swaps, **counts}


def summarise(runs):
    """Per server: the swaps within the bound, the spread of their ratios and load times, the first swaps apart."""
    swaps = [s for run in runs for s in run["swaps"] if s["loaded"]]
    ratios = [s["over_steady_p99"] for s in swaps]
    first = [run["swaps"][0]["over_steady_p99"] for run in runs if run["swaps"] and run["swaps"][0]["loaded"]]
    load_ms = sorted(s["load_ms"] for s in swaps)
    return {
        "runs": len(runs),
        "swaps": len(swaps),
        "swaps_not_loaded": sum(not s["loaded"] for run in runs for s in run["swaps"]),
        "within_2x": sum(r <= BOUND for r in ratios),
        "over_steady_p99": _spread(ratios),
        "first_swaps": len(first),
        "first_swaps_within_2x": sum(r <= BOUND for r in first),
        "first_swap_over_steady_p99": _spread(first),
        "later_swaps_within_2x": sum(r <= BOUND for r in ratios) - sum(r <= BOUND for r in first),
        "load_ms": {"median": statistics.median(load_ms), "p90": soak.percentile(load_ms, 90), "worst": load_ms[-1]},
        "steady_p99_ms": _spread([run["steady_p99_ms"] for run in runs]),
        "good_failed": sum(run["good_failed"] for run in runs),
        "bad_5xx_or_dropped": sum(run["bad_5xx_or_dropped"] for run in runs),
        "loads_reusing_graph_functions": sum(run["loads_reusing_graph_functions"] for run in runs),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6, help="runs per server")
    parser.add_argument("--swaps", type=int, default=6, help="versions swapped in per run")
    parser.add_argument("--gap", type=float, default=1.5, help="seconds between a version serving and the next")
    parser.add_argument("--threads", type=int, default=8, help="load clients")
    parser.add_argument("--baseline-script", default=None,
                        help="another server script (an older checkout's serving/server.py) to run alternately")
    parser.add_argument("--server-flag", action="append", default=[], dest="server_flags",
                        help="a flag for this checkout's server (not the baseline's), e.g. "
                             "--server-flag=--grpc_native=true")
    parser.add_argument("--workdir", default="runs/serving_swap_series", help="exports and each run's result")
    parser.add_argument("--out", default="bench/results/serving_swap_series.json")
    args = parser.parse_args(argv)

    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    servers = {**({"baseline": args.baseline_script} if args.baseline_script else {}), "this": None}
    shapes = base_export = sources = None
    runs = {label: [] for label in servers}
    for run in range(1, args.runs + 1):
        for label, script in servers.items():
            path = workdir / f"{label}_{run}.json"
            if not path.is_file():
                if shapes is None:
                    shapes, base_export, sources = make_exports(workdir)
                print(f"{label} server, run {run} of {args.runs}", flush=True)
                result = one_run(shapes, base_export, sources, args.swaps, args.gap, args.threads, script,
                                 args.server_flags if label == "this" else ())
                path.write_text(json.dumps(result, indent=1))
            runs[label].append(json.loads(path.read_text()))
    result = {"arguments": vars(args), "servers": {label: {"summary": summarise(r), "runs": r}
                                                   for label, r in runs.items()}}
    return save_and_report(result, args.out, markdown)


def markdown(result):
    """One row per server: swaps within 2x, their spread, the first swaps apart, load times and failures."""
    lines = ["| server | swaps within 2x | slowest in flight over steady p99 (best / median / worst) | "
             "first swap within 2x | load ms (median / p90) | steady p99 ms (median) | good failed | bad 5xx |",
             "|---|---|---|---|---|---|---|---|"]
    for label, entry in result["servers"].items():
        s = entry["summary"]
        spread = s["over_steady_p99"]
        lines.append(
            f"| {label} | {s['within_2x']} of {s['swaps']} | {spread['best']:.2f} / {spread['median']:.2f} / "
            f"{spread['worst']:.2f} | {s['first_swaps_within_2x']} of {s['first_swaps']} | "
            f"{s['load_ms']['median']:.0f} / {s['load_ms']['p90']:.0f} | {s['steady_p99_ms']['median']:.1f} | "
            f"{s['good_failed']} | {s['bad_5xx_or_dropped']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
