"""What each API costs before the model: the cheapest call of gRPC and of REST beside a batch-1 `answer`, alternated.

The serving issue asks a sequential batch-1 request to take at most 1.3x the
in-process signature call over gRPC (1.4x over REST). That leaves 0.3x the
model's own time for everything else: the client, the transport, the server's
threads, parsing and answering. This bench measures how much of that the API
takes when the server does (nearly) nothing, on one unbatched server with
REST and TensorFlow's default threads (as `bench.serving_latency`'s sequential
part), with the native clients, one connection each:

- `in_process`: the `answer` signature called in this process (the floor);
- `grpc_health`: a gRPC health check (`grpc.health.v1.Health/Check`, the
  cheapest method the gRPC port answers; h2load) on grpc's Python server
  (`--grpc_native=false`: the default is the native front end where it is
  installed);
- `rest_status`: `GET /v1/models/babi`, the model's status (wrk);
- `grpc_predict` and `rest_predict`: the batch-1 `answer` request
  (h2load, wrk), as in `bench.serving_latency`;
- `grpc_native_health` and `grpc_native_predict`: the same two gRPC calls to
  a second server, on the native gRPC front end (`--grpc_native=true`), where
  the `keras-relmem-native` package is installed;
- `grpc_python_predict` and `grpc_native_python_predict`: the batch-1
  `answer` to two more servers like those, converting the request's tensors
  in Python (`--grpc_predict_in_graph=false`, the path before the in-graph
  Predict), so that old and new are measured side by side.

Each round measures all five in an order rotated from round to round, and is
written to `--out` as it finishes; a rerun goes on from the rounds already
there. The summary gives the medians, each predict over in-process, the
budget the 1.3x and 1.4x bounds leave (0.3 and 0.4 times in-process), and
the share of it the API's cheapest call already takes.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_floors --rounds 10 \\
        --out bench/results/serving_floors.json

`--server-flag=F` gives every server of the run a flag more (as
`bench.serving_latency`'s), e.g. `--server-flag=--tensorflow_inter_op_parallelism=1`.

Needs Debian's `nghttp2-client` and `wrk` (`bench.native_load`).
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
    QUESTION,
    STORY,
    _with_rest,
    grpc_message,
    h2load_p50,
    rest_body,
    run_flags,
    running_server,
    sequential_p50,
    server_flags,
)
from keras_relmem.serving.grpc_native import available as native_grpc_available

HEALTH = "/grpc.health.v1.Health/Check"
STATUS = "/v1/models/babi"
PATHS = ("in_process", "grpc_health", "rest_status", "grpc_predict", "rest_predict")
NATIVE_PATHS = ("grpc_native_health", "grpc_native_predict")
PYTHON_PATHS = ("grpc_python_predict", "grpc_native_python_predict")
# The bounds the serving issue sets for sequential batch-1 requests over the in-process call.
BOUNDS = {"grpc": 1.3, "rest": 1.4, "grpc_native": 1.3, "grpc_python": 1.3, "grpc_native_python": 1.3}
# Each API's row: its name, the cheapest call's path.
APIS = (("grpc", "grpc_health"), ("rest", "rest_status"), ("grpc_native", "grpc_native_health"),
        ("grpc_python", "grpc_health"), ("grpc_native_python", "grpc_native_health"))
NAMES = {"grpc": "gRPC, Python server", "rest": "REST", "grpc_native": "gRPC, native front end",
         "grpc_python": "gRPC, Python server, tensors converted in Python",
         "grpc_native_python": "gRPC, native front end, tensors converted in Python"}
# The server flag of the Python conversion of a Predict's tensors, the path before the in-graph Predict.
PYTHON_CONVERSION = ["--grpc_predict_in_graph=false"]


def health_message():
    """The serialized `HealthCheckRequest` for the model `babi` (what h2load sends to `HEALTH`)."""
    from grpc_health.v1 import health_pb2

    return health_pb2.HealthCheckRequest(service="babi").SerializeToString()


def check_health(port):
    """The health check h2load sends, once through a gRPC channel: h2load reads no gRPC status, so this makes
    sure the server answers it SERVING rather than with an error."""
    import grpc
    from grpc_health.v1 import health_pb2

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        raw = channel.unary_unary(HEALTH)(health_message(), timeout=30)
    status = health_pb2.HealthCheckResponse.FromString(raw).status
    if status != health_pb2.HealthCheckResponse.SERVING:
        raise RuntimeError(f"the health check answered {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}")


def wrk_p50(port, body, seconds, path="/v1/models/babi:predict"):
    """p50 ms of one wrk connection sending `body` to `path` back-to-back (GETs when `body` is None)."""
    return native_load.wrk_rest(port, body, 1, seconds, path=path)[1]["p50_ms"]


def summarize(rounds):
    """Medians over rounds of each path's p50 (ms), and what they leave of the issue's bounds."""
    paths = [path for path in PATHS + NATIVE_PATHS + PYTHON_PATHS if all(path in r for r in rounds)]
    p50 = {path: statistics.median(r[path] for r in rounds) for path in paths}
    floor = p50["in_process"]
    result = {"p50_ms": p50, "rounds": len(rounds)}
    for api, cheapest in APIS:
        if cheapest not in p50 or f"{api}_predict" not in p50:
            continue
        budget = (BOUNDS[api] - 1) * floor
        result[api] = {
            "predict_over_in_process": p50[f"{api}_predict"] / floor,
            "bound": BOUNDS[api],
            "budget_ms": budget,  # what the bound leaves above the model's own time
            "cheapest_call_ms": p50[cheapest],
            "cheapest_call_share_of_budget": p50[cheapest] / budget,
            "left_after_cheapest_call_ms": budget - p50[cheapest],
            # Above the model and the API's cheapest call: the request's own parsing, checking, answering, and
            # the model's call made from the server's threads rather than alone.
            "rest_of_predict_ms": p50[f"{api}_predict"] - floor - p50[cheapest],
            "rounds_within_bound": sum(r[f"{api}_predict"] / r["in_process"] <= BOUNDS[api] for r in rounds),
        }
    return result


def markdown(result):
    s = result["summary"]
    p50 = s["p50_ms"]
    lines = [f"Sequential p50 ms, medians of {s['rounds']} rounds: in-process {p50['in_process']:.3f}", "",
             "| API | cheapest call ms | batch-1 `answer` ms | over in-process | bound | budget ms "
             "| cheapest call's share of it | rest of the request ms |",
             "|---|---|---|---|---|---|---|---|"]
    for api, cheapest in APIS:
        if api not in s:
            continue
        row = s[api]
        lines.append(f"| {NAMES[api]} | {p50[cheapest]:.3f} | {p50[api + '_predict']:.3f} | "
                     f"{row['predict_over_in_process']:.2f}x | {row['bound']:.1f}x | {row['budget_ms']:.3f} | "
                     f"{row['cheapest_call_share_of_budget']:.0%} | {row['rest_of_predict_ms']:.3f} |")
    return "\n".join(lines)


def run(args):
    with run_flags(args.server_flags):
        return _run(args)


def _run(args):
    import tensorflow as tf

    out = pathlib.Path(args.out)
    result = json.loads(out.read_text()) if out.exists() else {"rounds": []}
    if result["rounds"] and result.get("arguments", {}).get("server_flags", []) != args.server_flags:
        raise SystemExit(f"{out} has rounds with the server flags {result['arguments'].get('server_flags', [])}: "
                         f"give those, or another --out")
    result["arguments"] = {"rounds": args.rounds, "wrk_seconds": args.wrk_seconds, "server_flags": args.server_flags}
    if len(result["rounds"]) >= args.rounds:  # every round is there: only the summary is made again
        result["summary"] = summarize(result["rounds"])
        out.write_text(json.dumps(result, indent=1))
        print(markdown(result))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        export_babi_entnet(base)
        answer = tf.saved_model.load(str(base / "babi" / "1")).signatures["answer"]
        story, question = tf.constant([STORY]), tf.constant([QUESTION])
        with contextlib.ExitStack() as servers:
            unbatched = server_flags(base, False, "tensorflow_default")
            # The rows "grpc" and "grpc_python" are grpc's Python server, named, since the default is the
            # native front end where it is installed.
            python_grpc, native_grpc = unbatched + ["--grpc_native=false"], unbatched + ["--grpc_native=true"]
            ports = servers.enter_context(running_server(_with_rest(python_grpc)))
            native_ports = (servers.enter_context(running_server(native_grpc))
                            if native_grpc_available() else None)
            python_ports = servers.enter_context(running_server(python_grpc + PYTHON_CONVERSION))
            native_python_ports = (servers.enter_context(running_server(native_grpc + PYTHON_CONVERSION))
                                   if native_ports else None)
            measures = {
                "in_process": lambda: sequential_p50(lambda: answer(story=story, question=question)),
                "grpc_health": lambda: h2load_p50(ports["grpc"], health_message(), path=HEALTH),
                "rest_status": lambda: wrk_p50(ports["rest"], None, args.wrk_seconds, STATUS),
                "grpc_predict": lambda: h2load_p50(ports["grpc"], grpc_message()),
                "rest_predict": lambda: wrk_p50(ports["rest"], rest_body(), args.wrk_seconds),
                "grpc_python_predict": lambda: h2load_p50(python_ports["grpc"], grpc_message()),
            }
            for grpc_ports in [p for p in (ports, native_ports, python_ports, native_python_ports) if p]:
                native_load.check_grpc_body(grpc_ports["grpc"], grpc_message())
                check_health(grpc_ports["grpc"])
            if native_ports:
                measures["grpc_native_health"] = lambda: h2load_p50(native_ports["grpc"], health_message(),
                                                                    path=HEALTH)
                measures["grpc_native_predict"] = lambda: h2load_p50(native_ports["grpc"], grpc_message())
                measures["grpc_native_python_predict"] = lambda: h2load_p50(native_python_ports["grpc"],
                                                                           grpc_message())
            paths = tuple(measures)
            for measure in measures.values():  # once unrecorded: tracing, connections, the caches of both sides
                measure()
            alternated_rounds(result, out, args.rounds,
                              lambda index: {path: float(measures[path]()) for path in rotated(paths, index)},
                              summarize)
    print(markdown(result))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--wrk-seconds", type=int, default=2, help="seconds of each wrk measurement")
    parser.add_argument("--out", default="bench/results/serving_floors.json")
    parser.add_argument("--server-flag", action="append", default=[], dest="server_flags",
                        help="a flag for every server of the run, e.g. --server-flag=--grpc_max_threads=8")
    if not native_load.available():
        parser.error("needs Debian's nghttp2-client (h2load) and wrk")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
