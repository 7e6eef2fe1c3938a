"""Where a batch-1 request's time goes: our server's stages, per API, against the in-process call.

Starts `ModelServer` in this process (gRPC and REST) on an exported bAbI
EntNet (task 1 sizes), wraps each stage of the server's path in a timer,
and sends sequential `answer` requests (text in, top answers out) from a
client in another process, as `bench.serving_latency` does. For each API it
reports the p50 of:

- the client's round trip;
- the server's handler (gRPC `Predict`; REST: the whole aiohttp handler and
  the part on a worker thread);
- `ServingCore.predict_on` (checks, then the model), `Servable.call` (tensors
  in, the signature, arrays out), `Servable.predict_in_graph` (a gRPC
  Predict answered in one graph call) and the graph function alone (the
  signature's, or the in-graph Predict's, which holds it);
- what is left: transport and client (round trip minus handler), and the
  handler outside the model (handler minus the signature function).

Beside them: the signature called in this process as a caller in the
server's place would (arrays in, tensors built), and a gRPC health check's
round trip (the transport's floor: a call that does no model work). Where
the native gRPC front end is installed, a second server on it
(`--grpc_native=true`) is profiled alike, as the API `grpc_native`.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_profile --requests 1000

Writes `bench/results/serving_profile.json`. The stages are timed with
`time.perf_counter` around the methods, which adds about a microsecond each.
"""

import argparse
import collections
import functools
import inspect
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.serving import REPO, export_babi_entnet, save_and_report
from bench.serving_latency import QUESTION, STORY, sequential_p50

CLIENT = """
import json, sys
from grpc_health.v1 import health_pb2, health_pb2_grpc
from bench.serving_latency import grpc_call, rest_call, sequential_p50
grpc_port, rest_port, count, native_port = (int(a) for a in sys.argv[1:5])
import grpc

def health_check(port):
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    return lambda: health.Check(health_pb2.HealthCheckRequest(service="babi"), timeout=10)

calls = {"grpc": grpc_call(grpc_port), "rest": rest_call(rest_port), "grpc_health_check": health_check(grpc_port)}
if native_port:
    calls.update({"grpc_native": grpc_call(native_port), "grpc_native_health_check": health_check(native_port)})
result = {}
for name, call in calls.items():
    print("START", name, flush=True)
    sys.stdin.readline()
    result[name] = sequential_p50(call, count)
    print("DONE", name, flush=True)
    sys.stdin.readline()
print("RESULT", json.dumps(result), flush=True)
"""


class Timers:
    """Per-stage durations of the requests of one phase (an API)."""

    def __init__(self):
        self.phase = None
        self.times = collections.defaultdict(lambda: collections.defaultdict(list))

    def wrap(self, owner, name, label):
        """Replace `owner.name` (a function or coroutine function) by a timed one."""
        original = getattr(owner, name)
        if inspect.iscoroutinefunction(original):
            @functools.wraps(original)
            async def timed(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    self._add(label, started)
        else:
            @functools.wraps(original)
            def timed(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    self._add(label, started)
        setattr(owner, name, timed)

    def _add(self, label, started):
        if self.phase is not None:
            self.times[self.phase][label].append(time.perf_counter() - started)

    def p50s(self, phase):
        return {label: float(np.percentile(values, 50) * 1e3) for label, values in self.times[phase].items()}


def _time_signature(servable, timers):
    """Time `servable`'s `answer` graph function alone (the call the server makes: flat when it can, and the
    in-graph Predict's function, which holds the signature's, when a gRPC Predict is answered in graph)."""
    flat = servable._flat_calls.get("answer")
    if flat is None:  # called by keyword
        signature = servable._functions["answer"]

        def signature_alone(*args, **kwargs):
            started = time.perf_counter()
            try:
                return signature(*args, **kwargs)
            finally:
                timers._add("signature_function", started)

        servable._functions["answer"] = signature_alone
        return
    flat.graph_function = _TimedGraphFunction(flat.graph_function, timers)
    if flat.in_graph is not None:
        flat.in_graph._function = _TimedGraphFunction(flat.in_graph._function, timers)


class _TimedGraphFunction:
    """A graph function whose `call_flat` is timed as the `signature_function` stage."""

    def __init__(self, function, timers):
        self._function, self._timers = function, timers

    def call_flat(self, *args):
        started = time.perf_counter()
        try:
            return self._function.call_flat(*args)
        finally:
            self._timers._add("signature_function", started)


def run(args):
    import tensorflow as tf

    from keras_relmem.serving import core, grpc_api, rest_api, servable
    from keras_relmem.serving.grpc_native import available as native_grpc_available
    from keras_relmem.serving.server import ModelServer, freeze_startup_heap

    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        export_babi_entnet(base)
        answer = tf.saved_model.load(str(base / "babi" / "1")).signatures["answer"]
        in_process = sequential_p50(lambda: answer(story=tf.constant([STORY]), question=tf.constant([QUESTION])),
                                    args.requests)
        timers = Timers()
        timers.wrap(grpc_api.PredictionService, "Predict", "handler")
        timers.wrap(rest_api.RestServer, "_handle", "handler")
        timers.wrap(rest_api.RestServer, "_post", "handler_worker_thread")
        timers.wrap(core.ServingCore, "predict_on", "predict_on")
        timers.wrap(servable.Servable, "call", "servable_call")
        timers.wrap(servable.Servable, "predict_in_graph", "servable_predict_in_graph")
        from tensorflow_serving.config import model_server_config_pb2

        configs = [model_server_config_pb2.ModelConfig(name="babi", base_path=str(base / "babi"),
                                                        model_platform="tensorflow")]
        freeze_startup_heap()
        server = ModelServer(configs, port=0, rest_api_port=-1, poll_seconds=-1)
        # Where the native gRPC front end is installed, a second server on it, profiled alike.
        native = (ModelServer(configs, port=0, poll_seconds=-1, grpc_native=True)
                  if native_grpc_available() else None)
        for running in (server, native) if native else (server,):
            running.manager.poll()
            running.start()
            _time_signature(running.manager.get("babi"), timers)
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(server.port), str(server.rest_port), str(args.requests),
             str(native.port if native else 0)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        round_trips = None
        try:
            for line in client.stdout:
                words = line.split(maxsplit=1)
                if words[0] == "START":
                    timers.phase = words[1].strip()
                elif words[0] == "DONE":
                    timers.phase = None
                elif words[0] == "RESULT":
                    round_trips = json.loads(words[1])
                    break
                client.stdin.write("\n")
                client.stdin.flush()
        finally:
            client.wait(timeout=120)
            server.stop()
            if native:
                native.stop()
    if round_trips is None:
        raise RuntimeError(f"the client process ended (exit code {client.returncode}) without its round trips")
    result = {"arguments": vars(args), "in_process_ms": in_process,
              "grpc_health_check_ms": round_trips["grpc_health_check"], "apis": {}}
    if "grpc_native_health_check" in round_trips:
        result["grpc_native_health_check_ms"] = round_trips["grpc_native_health_check"]
    for api in [api for api in APIS if api in round_trips]:
        stages = timers.p50s(api)
        stages["round_trip"] = round_trips[api]
        stages["transport_and_client"] = stages["round_trip"] - stages["handler"]
        stages["handler_outside_the_model"] = stages["handler"] - stages["signature_function"]
        stages["over_in_process"] = stages["round_trip"] / in_process
        result["apis"][api] = stages
    return result


APIS = ("grpc", "rest", "grpc_native")
NAMES = {"grpc": "gRPC", "rest": "REST", "grpc_native": "gRPC, native"}
ORDER = ["round_trip", "handler", "handler_worker_thread", "predict_on", "servable_call", "servable_predict_in_graph",
         "signature_function",
         "transport_and_client", "handler_outside_the_model"]


def markdown(result):
    apis = [api for api in APIS if api in result["apis"]]
    native = (f"; on the native front end {result['grpc_native_health_check_ms']:.3f} ms"
              if "grpc_native_health_check_ms" in result else "")
    lines = [f"- in-process signature call p50 {result['in_process_ms']:.3f} ms; a gRPC health check's round "
             f"trip {result['grpc_health_check_ms']:.3f} ms{native}", "",
             "| stage (p50 ms) | " + " | ".join(NAMES[api] for api in apis) + " |", "|---" * (len(apis) + 1) + "|"]
    for stage in [stage for stage in ORDER if any(stage in result["apis"][api] for api in apis)]:
        cells = [f"{result['apis'][api][stage]:.3f}" if stage in result["apis"][api] else "" for api in apis]
        lines.append(f"| {stage.replace('_', ' ')} | " + " | ".join(cells) + " |")
    lines.append("| round trip / in-process | "
                 + " | ".join(f"{result['apis'][api]['over_in_process']:.2f}x" for api in apis) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="sequential requests per API")
    parser.add_argument("--out", default="bench/results/serving_profile.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return save_and_report(run(args), args.out, markdown)


if __name__ == "__main__":
    main()
