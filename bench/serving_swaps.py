"""Version swaps under load, repeated: versions built on the served graph functions against full loads.

Runs `bench.serving_soak` `--runs` times for each of four settings, each run
in a process of its own:

- `retrained`: the new versions are exports of the same code with other
  weights, each exported by a process of its own (as a retrained model
  arrives); `copy`: they are copies of version 1 (as the soak's earlier runs);
- `reuse`: the server's default, a version with the served version's program
  runs on its graph functions (`keras_relmem.serving.reuse`); `full`:
  `--reuse_graph_functions=false`, every version loaded in full as before.

The runs go round the four settings in turn, so a drift of the machine
touches them alike. `--baseline-script` soaks each setting with another
server script too (an older checkout's `serving/server.py`, running that
checkout's package), just before this checkout's: old against new in one
run. Each run's whole soak result is kept under `--workdir`
as it finishes (a rerun skips the runs already there), and the summary, per
run and per setting, is written to `--out`: each swap's slowest request over
the run's steady p99 (the serving issue's bound is 2x), how long the version
took to serve, and the failures; and, where the soak read the server's log,
the slowest request in flight while each version loaded.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_swaps --runs 3 \\
        --out bench/results/serving_swaps.json
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys

from bench.serving import save_and_report

BOUND = 2.0  # the serving issue's bound on a swap's slowest request, over the steady p99

SETTINGS = {
    "retrained_reuse": ["--swap-versions", "retrained"],
    "retrained_full": ["--swap-versions", "retrained", "--server-flag=--reuse_graph_functions=false"],
    "copy_reuse": ["--swap-versions", "copy"],
    "copy_full": ["--swap-versions", "copy", "--server-flag=--reuse_graph_functions=false"],
}


def summary(soak):
    """The swap figures of one soak result."""
    load = soak["load"]
    steady = load["steady_p99_ms"]
    swaps = {}
    for event in load["swaps"]:
        if "available_after_s" not in event:
            continue
        key = "with_warm_up" if "with warm-up" in event["event"] else "without_warm_up"
        swaps[key] = {"slowest_ms": event["slowest_ms"], "over_steady_p99": event["slowest_ms"] / steady,
                      "available_after_s": event["available_after_s"], "requests": event["requests"]}
        if "loading" in event:  # soaks since the server's load spans were read from its log
            swaps[key]["loading"] = {**event["loading"], "over_steady_p99": event["loading"]["slowest_ms"] / steady}
    return {
        "steady_p99_ms": steady,
        "steady_slowest_ms": load["steady_slowest_ms"],
        "swaps": swaps,
        "worst_over_steady_p99": max(s["over_steady_p99"] for s in swaps.values()),
        "good_requests": load["good_requests"],
        "good_failed": load["good_failed"],
        "bad_5xx_or_dropped": sum(load["bad_5xx_or_dropped"].values()),
        "loads_reusing_graph_functions": soak.get("loads_reusing_graph_functions", 0),
        **({"slow_sockets_slowest_ms": load["slow_sockets"]["slowest_ms"]}
           if "slowest_ms" in load.get("slow_sockets", {}) else {}),
    }


def _spread(values):
    return {"best": min(values), "median": statistics.median(values), "worst": max(values)}


def run_once(setting, path, arguments):
    """One soak of `setting`, whose soak arguments are `arguments`, into `path`, in a process of its own."""
    command = [sys.executable, "-m", "bench.serving_soak", *arguments, "--out", str(path)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=pathlib.Path(__file__).resolve().parents[1])


def settings_to_run(settings, baseline_script=None):
    """`{name: soak arguments}` in the order a round runs them: with a baseline, each setting's baseline soak
    (`baseline_<setting>`, the other server script) just before its soak of this checkout's server."""
    runs = {}
    for setting in settings:
        if baseline_script:
            runs[f"baseline_{setting}"] = [*SETTINGS[setting], "--server-script", str(baseline_script)]
        runs[setting] = SETTINGS[setting]
    return runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="soak runs per setting")
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--baseline-script", default=None,
                        help="another server script (an older checkout's serving/server.py): each setting is "
                             "soaked with it too, alternated with this checkout's, as baseline_<setting>")
    parser.add_argument("--workdir", default="runs/serving_swaps", help="each run's soak result, kept for reruns")
    parser.add_argument("--out", default="bench/results/serving_swaps.json")
    args = parser.parse_args(argv)

    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    result = {"arguments": vars(args), "settings": {}}
    runs = settings_to_run(args.settings, args.baseline_script)
    for run in range(1, args.runs + 1):
        for setting, arguments in runs.items():
            path = workdir / f"{setting}_{run}.json"
            if not path.is_file():
                print(f"soak {setting}, run {run} of {args.runs}", flush=True)
                run_once(setting, path, arguments)
            entry = result["settings"].setdefault(setting, {"command": " ".join(arguments), "runs": []})
            entry["runs"].append(summary(json.loads(path.read_text())))
    for entry in result["settings"].values():
        worst = [r["worst_over_steady_p99"] for r in entry["runs"]]
        entry["worst_over_steady_p99"] = _spread(worst)
        entry["runs_within_2x"] = sum(w <= BOUND for w in worst)
        # The same bound for the requests in flight while the versions loaded, over the runs whose soak read
        # the server's log (a workdir may hold older ones too).
        timed = [r for r in entry["runs"] if all("loading" in s for s in r["swaps"].values())]
        if timed:
            loading = [max(s["loading"]["over_steady_p99"] for s in r["swaps"].values()) for r in timed]
            entry["loading_over_steady_p99"] = _spread(loading)
            entry["runs_within_2x_while_loading"] = sum(w <= BOUND for w in loading)
            # How many swaps' slowest request was one in flight during the load (the rest came after it).
            swaps = [s for r in timed for s in r["swaps"].values()]
            entry["swaps_slowest_while_loading"] = sum(s["loading"]["slowest_ms"] >= s["slowest_ms"] for s in swaps)
            entry["swaps"] = len(swaps)
        entry["good_failed"] = sum(r["good_failed"] for r in entry["runs"])
        entry["bad_5xx_or_dropped"] = sum(r["bad_5xx_or_dropped"] for r in entry["runs"])
    return save_and_report(result, args.out, markdown)


def markdown(result):
    """One row per setting and run: each swap's slowest request over the steady p99, and the failures."""
    lines = ["| setting | run | steady p99 ms | swap without warm-up records | swap with them | "
             "reused loads | good failed |", "|---|---|---|---|---|---|---|"]
    for setting, entry in result["settings"].items():
        for index, run in enumerate(entry["runs"], start=1):
            cells = []
            for key in ("without_warm_up", "with_warm_up"):
                swap = run["swaps"].get(key)
                loading = (f"; while loading {swap['loading']['slowest_ms']:.1f} ms "
                           f"({swap['loading']['over_steady_p99']:.2f}x)" if swap and "loading" in swap else "")
                cells.append(f"{swap['slowest_ms']:.1f} ms ({swap['over_steady_p99']:.2f}x), serving after "
                             f"{swap['available_after_s']:.2f} s{loading}" if swap else "-")
            lines.append(f"| {setting} | {index} | {run['steady_p99_ms']:.1f} | {cells[0]} | {cells[1]} | "
                         f"{run['loads_reusing_graph_functions']} | {run['good_failed']} of {run['good_requests']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
