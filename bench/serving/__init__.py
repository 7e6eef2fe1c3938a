"""Serving latency, throughput and one request's memory: our server (gRPC and REST) vs the in-process call.

Exports a bAbI EntNet model (task 1 sizes; weights do not change the cost),
starts `serving/server.py` in its own process, and measures, in one run:

1. sequential batch-1 `answer` requests (text in, top answers out), p50: the
   in-process signature call, gRPC, and REST on a keep-alive connection;
2. for each `--clients` count (threads of this process, each with its own
   connection), requests/s and p50/p99 latency without and with
   `--enable_batching`;
3. with `--rows N`, one gRPC `answer` request of N rows: its seconds and the
   server's peak resident memory, at the default `--max_rows_per_call` and at
   each `--max-rows` value given (what the default was chosen by).

The clients are Python threads sharing the machine's cores with the server, as
they would on a single serving host; a speed claim is a ratio of figures of one
run. Prints a table and writes `bench/serving/results/serving_one_path.json`:

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving --seconds 8 --rows 300000

The helpers here (`export_babi_entnet`, `start_server`, `free_port`) are the soak's too (`bench.serving.soak`).
"""

import argparse
import contextlib
import http.client
import json
import os
import pathlib
import queue
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
STORY = ["Mary went to the kitchen.", "John moved to the garden.", "Mary travelled to the office.",
         "Sandra journeyed to the hallway.", "John went back to the bedroom."]
QUESTION = "Where is Mary?"


def export_babi_entnet(base, name="babi"):
    """Export an untrained bAbI EntNet (task 1 sizes: the weights do not change the cost) as `base/name/1`.

    Returns `(data, path)`: the task's `BabiData` (vocabularies and shapes) and the version folder.
    """
    from keras_relmem import export
    from keras_relmem.data import babi
    from keras_relmem.models import babi_qa

    data = babi.load_babi([1])
    model = babi_qa.build_babi_model("entnet", len(data.vocab), len(data.answer_vocab), data.story_length,
                                     data.sentence_length, data.query_length)
    return data, export.export_babi(model, data, base, name=name)


def free_port():
    """A port nobody listens on now, for `--rest_api_port` (whose 0 means no REST, not "pick one")."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(flags, log_path=None, python_options=(), timeout=600.0, script=None):
    """Start `serving/server.py --port 0 FLAGS...`; returns `(process, ports)` once it prints its ports.

    Args:
        flags: the server's other command-line flags, as `tensorflow_model_server` takes them.
        log_path: file for the server's stderr (its log), or None to drop it (a file, not a pipe: a pipe
            nobody reads blocks the server's logging once it holds 64 KiB).
        python_options: interpreter options before the script, e.g. `("-X", "faulthandler")`.
        timeout: seconds to wait for the ports; a server still silent then is killed and reported.
        script: the server script to run (default this checkout's `serving/server.py`); another
            checkout's, to measure an old server beside the new one in one run (it imports that
            checkout's package).

    `ports` maps "grpc" and "rest" to the port numbers (0 for REST when it is off).
    """
    env = None
    if script is not None:
        root = str(pathlib.Path(script).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    with open(log_path, "w") if log_path is not None else contextlib.nullcontext(subprocess.DEVNULL) as log:
        process = subprocess.Popen([sys.executable, *python_options, str(script or REPO / "serving" / "server.py"),
                                    "--port", "0", *flags], stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    # A reader thread, so that a server that hangs before printing cannot hang us; it goes on draining stdout.
    lines = queue.Queue()

    def drain():
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + timeout
    problem = f"the server did not print its ports within {timeout:g} s"
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            problem = "the server exited before it served"
            break
        if line.startswith("SERVING"):
            return process, {key: int(value) for key, value in (part.split("=") for part in line.split()[1:])}
    process.kill()
    process.wait()
    tail = pathlib.Path(log_path).read_text()[-2000:] if log_path is not None else "(its log was not kept)"
    raise RuntimeError(f"{problem}; its log ends:\n{tail}")


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def p50_ms(call, count=200):
    """p50 ms of `count` back-to-back calls (after unmeasured warm-up ones)."""
    from keras_relmem.testing import soak

    return soak.sequential_latency(call, count) * 1e3


def measure(make_call, clients, seconds):
    """`{"requests_per_s", "p50_ms", "p99_ms"}` of `clients` threads calling for `seconds`, each its own
    connection (`make_call()` once per thread)."""
    calls = [make_call() for _ in range(clients)]
    for call in calls:
        call()
    latencies, lock, done = [], threading.Lock(), threading.Event()

    def worker(call):
        mine = []
        while not done.is_set():
            start = time.perf_counter()
            call()
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(call,)) for call in calls]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    done.set()
    for thread in threads:
        thread.join()
    rate = len(latencies) / (time.perf_counter() - began)
    return {"requests_per_s": round(rate, 1), "p50_ms": round(float(np.percentile(latencies, 50)) * 1e3, 3),
            "p99_ms": round(float(np.percentile(latencies, 99)) * 1e3, 3)}


def grpc_call(port):
    from keras_relmem.serving.client import ServingClient

    client = ServingClient(f"127.0.0.1:{port}")
    return lambda: client.answer("babi", STORY, QUESTION)


def rest_call(port):
    body = json.dumps({"signature_name": "answer", "instances": [{"story": STORY, "question": QUESTION}]})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call():
        connection.request("POST", "/v1/models/babi:predict", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"REST answered {response.status}: {response.read()[:200]!r}")
        response.read()

    return call


def big_request(port, pid, rows):
    """`{"seconds", "peak_rss_gb", "status"}` of one gRPC `answer` request of `rows` rows."""
    import grpc

    from keras_relmem.serving.client import ServingClient

    story = np.array([STORY[:2]] * rows, dtype=object)
    question = np.array([QUESTION] * rows, dtype=object)
    peak, done = [0], threading.Event()

    def watch():
        while not done.is_set():
            status = pathlib.Path(f"/proc/{pid}/status").read_text()
            peak[0] = max(peak[0], int(status.split("VmRSS:")[1].split()[0]))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    began, status = time.perf_counter(), "OK"
    try:
        with ServingClient(f"127.0.0.1:{port}", timeout=3600) as client:
            client.predict("babi", {"story": story, "question": question}, signature="answer",
                           output_filter=("top_answers",))
    except grpc.RpcError as error:
        status = f"{error.code().name}: {error.details()[:200]}"
    done.set()
    watcher.join()
    return {"seconds": round(time.perf_counter() - began, 1), "peak_rss_gb": round(peak[0] / 1e6, 2),
            "status": status}


def run(args, workdir):
    import tensorflow as tf

    data, path = export_babi_entnet(workdir)
    signature = tf.saved_model.load(str(path)).signatures["answer"]
    story, question = tf.constant([STORY]), tf.constant([QUESTION])
    result = {"command": "python -m bench.serving " + " ".join(args.argv), "clients": args.clients,
              "seconds": args.seconds, "in_process_p50_ms": round(p50_ms(lambda: signature(story=story,
                                                                                           question=question)), 3)}
    model = ["--model_name", "babi", "--model_base_path", str(path.parent)]
    for batching in (False, True):
        flags = [*model, "--rest_api_port", str(free_port())] + (["--enable_batching"] if batching else [])
        process, ports = start_server(flags, workdir / "server.log")
        try:
            label = "batched" if batching else "unbatched"
            if not batching:
                result["sequential_p50_ms"] = {"grpc": round(p50_ms(grpc_call(ports["grpc"])), 3),
                                               "rest": round(p50_ms(rest_call(ports["rest"])), 3)}
            result[label] = {}
            for api, make in (("grpc", grpc_call), ("rest", rest_call)):
                port = ports[api]
                result[label][api] = {str(n): measure(lambda m=make, p=port: m(p), n, args.seconds)
                                      for n in args.clients}
        finally:
            stop(process)
    if args.rows:
        result["large_request"] = {"rows": args.rows}
        for max_rows in [None, *args.max_rows]:
            flags = model + ([] if max_rows is None else ["--max_rows_per_call", str(max_rows)])
            process, ports = start_server(flags, workdir / "server.log")
            try:
                result["large_request"][str(max_rows or "default")] = big_request(ports["grpc"], process.pid,
                                                                                  args.rows)
            finally:
                stop(process)
    return result


def markdown(result):
    lines = [f"in-process `answer` p50 {result['in_process_p50_ms']} ms; sequential gRPC "
             f"{result['sequential_p50_ms']['grpc']} ms, REST {result['sequential_p50_ms']['rest']} ms", "",
             "| clients | API | unbatched req/s (p50/p99 ms) | batched req/s (p50/p99 ms) |", "|---|---|---|---|"]
    for n in result["clients"]:
        for api in ("grpc", "rest"):
            cells = [result[label][api][str(n)] for label in ("unbatched", "batched")]
            lines.append(f"| {n} | {api} | " + " | ".join(
                f"{c['requests_per_s']} ({c['p50_ms']}/{c['p99_ms']})" for c in cells) + " |")
    for key, value in result.get("large_request", {}).items():
        if key != "rows":
            lines.append(f"\n{result['large_request']['rows']} rows at --max_rows_per_call {key}: "
                         f"{value['seconds']} s, server peak {value['peak_rss_gb']} GB, {value['status']}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per concurrent measurement")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rows", type=int, default=0, help="also send one request of this many rows")
    parser.add_argument("--max-rows", type=int, nargs="*", default=[], help="--max_rows_per_call values to compare")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "serving_one_path.json"))
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    with tempfile.TemporaryDirectory() as workdir:
        result = run(args, pathlib.Path(workdir))
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
