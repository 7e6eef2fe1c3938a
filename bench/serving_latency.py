"""Serving latency and throughput: our server (gRPC and REST), with and without batching, vs in-process calls.

Exports a bAbI EntNet model (task 1 sizes; weights do not change the cost),
starts `serving/server.py` in its own process, and measures, in one run:

1. sequential batch-1 `answer` requests (text in, top answers out), p50:
   the in-process signature call, gRPC, and REST on a keep-alive connection;
2. for 1, 8 and 32 concurrent clients (threads of this process, each with
   its own channel), requests/s and p50/p99 latency without and with
   `--enable_batching`, once with TensorFlow's default thread pools and once
   with one intra-op and one inter-op thread (`--tensorflow_*_parallelism 1`);
   the same server flags on both sides of each comparison;
3. optionally (`--baseline-script`), the same sequential and 32-client
   figures for another server script, e.g. an older checkout's
   `serving/server.py`, so a speed-up is old vs new in one run;
4. where Debian's `nghttp2-client` and `wrk` are installed (`bench.native_load`),
   parts 1 and 2 again with native clients (h2load for gRPC, wrk for REST)
   instead of this process's Python threads, under `native_clients`: the same
   server, the same in-process floor measured in the same stretch, so the
   clients' own cost is told apart from the server's; beside the batching
   server, the same server on grpc's synchronous server
   (`--grpc_native=false --grpc_asyncio=false`), on grpc's asyncio server
   (`--grpc_asyncio=true`) and on asyncio's own event loop
   (`--event_loop=asyncio`).

Every server runs with the server's defaults, so gRPC is on the native
front end where its package is installed (batched or not) and on grpc's
Python servers where not; `grpc_servers` in the results says which.
`--server-flag` gives every server of the run a flag more: with
`--server-flag=--grpc_native=true` the whole run is on the native gRPC front
end (sequential, unbatched and batched alike), with
`--server-flag=--grpc_native=false` on grpc's Python servers.

Prints a table and writes `bench/results/serving_latency.json`:

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_latency --seconds 8

On CPU the clients share the machine's cores with the server, as they would
on a single serving host.
"""

import argparse
import contextlib
import http.client
import json
import os
import pathlib
import signal
import tempfile
import threading
import time

import numpy as np

from bench import native_load
from bench.serving import export_babi_entnet, free_port, save_and_report, start_server
from keras_relmem.testing import soak

STORY = ["Mary went to the kitchen.", "John moved to the garden.", "Mary travelled to the office.",
         "Sandra journeyed to the hallway.", "John went back to the bedroom."]
QUESTION = "Where is Mary?"
# `tensorflow_default` passes no thread flag: the server's own default (TensorFlow's choice, but an inter-op pool a
# core smaller since `server.default_inter_op_threads`; the name is the one earlier results were recorded under).
THREADS = {"tensorflow_default": [], "one_thread_each": ["--tensorflow_intra_op_parallelism", "1",
                                                         "--tensorflow_inter_op_parallelism", "1"]}


def measure(make_call, clients, seconds):
    """Latencies (s) of calls from `clients` threads for `seconds`, and the requests/s.

    `make_call()` is run once per thread and returns that thread's `call()`
    (each client its own connection, as separate client programs would have).
    """
    latencies, lock, stop = [], threading.Lock(), threading.Event()
    calls = [make_call() for _ in range(clients)]
    for call in calls:  # warm-up (tracing, connections)
        call()

    def worker(call):
        mine = []
        while not stop.is_set():
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
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    return np.array(latencies), len(latencies) / elapsed


def sequential_p50(call, count=300):
    """p50 ms of `count` back-to-back calls (after 10 unmeasured ones)."""
    return soak.sequential_latency(call, count) * 1e3


def grpc_call(port):
    from keras_relmem.serving.client import ServingClient

    client = ServingClient(f"127.0.0.1:{port}")
    return lambda: client.answer("babi", STORY, QUESTION)


# The server flag that sends every REST request to a worker thread (the REST path before lone clients were
# answered on the event loop's thread), measured beside the default in one run.
HAND_OFF = ["--rest_api_inline_max_bytes", "0"]
# The flags that put gRPC on grpc's synchronous Python server with batching on (before `grpc_aio`). (Until the
# native front end batched, `--grpc_asyncio=false` alone; it now leaves gRPC native where installed.)
SYNC_GRPC = ["--grpc_native=false", "--grpc_asyncio=false"]
# The flag that puts gRPC on grpc's asyncio server with batching on (the default before the native front end
# answered a batched Predict later).
ASYNCIO_GRPC = ["--grpc_asyncio=true"]
# The flag that runs REST and gRPC's asyncio server on asyncio's own event loop (before uvloop).
ASYNCIO_LOOP = ["--event_loop=asyncio"]
# The further batching servers the native part measures: (label, flags, REST measured too, how the results page
# names it). gRPC's server does not change REST, so the other gRPC servers are measured over gRPC only.
OTHER_BATCHED_SERVERS = (
    ("batched_python_grpc", SYNC_GRPC, False,
     "on grpc's synchronous server (`--grpc_native=false --grpc_asyncio=false`)"),
    ("batched_asyncio_grpc", ASYNCIO_GRPC, False, "on grpc's asyncio server (`--grpc_asyncio=true`)"),
    ("batched_asyncio_loop", ASYNCIO_LOOP, True, "on asyncio's own event loop (`--event_loop=asyncio`)"),
)
# A label earlier runs recorded, and how their pages name it: `--grpc_asyncio=false` was grpc's synchronous
# server until gRPC went native by default, and the native front end (each Predict waiting for its batch on the
# thread that took it) in the runs that record `grpc_servers`.
LEGACY_SYNC_GRPC = "batched_sync_grpc"


def _other_batched(result):
    """`(label, how the page names it)` of the further batching servers a result may hold."""
    legacy = ("with `--grpc_asyncio=false` (there the native front end, each Predict waiting for its batch on the "
              "thread that took it)" if "grpc_servers" in result
              else "on the synchronous gRPC server (`--grpc_asyncio=false`)")
    return [(LEGACY_SYNC_GRPC, legacy)] + [(label, text) for label, _, _, text in OTHER_BATCHED_SERVERS]


def rest_body():
    """The REST `:predict` body of the benchmark's one question (the Python and the native clients send it)."""
    return json.dumps({"signature_name": "answer", "instances": [{"story": STORY, "question": QUESTION}]})


def servable_call(base, flat_call):
    """The server's own call of the `answer` signature (`Servable.call` on checked inputs), in this process."""
    from keras_relmem.serving.servable import Servable

    servable = Servable("babi", 1, base / "babi" / "1", flat_call=flat_call)
    checked = servable.check_inputs("answer", {"story": np.array([STORY], dtype=object),
                                               "question": np.array([QUESTION], dtype=object)})
    return lambda: servable.call("answer", checked, ("top_answers", "top_probabilities"))


def grpc_message():
    """The serialized `PredictRequest` of the benchmark's one question (what the native gRPC client sends)."""
    return native_load.predict_request(
        "babi", {"story": np.array([STORY], dtype=object), "question": np.array([QUESTION], dtype=object)},
        "answer", ("top_answers", "top_probabilities"))


def rest_call(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = rest_body()

    def call():
        connection.request("POST", "/v1/models/babi:predict", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"REST answered {response.status}")
    return call


def grpc_servers(flags):
    """The gRPC server (`server.grpc_server_kind`) this checkout's servers run, unbatched and batched, given the
    run's extra `flags`: resolved here, where the same packages are installed as in the servers' processes."""
    from keras_relmem.serving.server import build_parser, grpc_server_kind

    parsed = build_parser().parse_args(["--model_base_path", ".", *flags])
    return {label: grpc_server_kind(parsed.grpc_native, parsed.grpc_asyncio, batching)
            for label, batching in (("unbatched", False), ("batched", True))}


def server_flags(base, batching, threads, num_batch_threads=1):
    flags = ["--model_name", "babi", "--model_base_path", str(base / "babi"), *THREADS[threads]]
    if batching:
        flags += ["--enable_batching", "--max_batch_size", "32", "--batch_timeout_micros", "2000",
                  "--grpc_max_threads", "64"]
        if num_batch_threads != 1:  # only in TF Serving's batching parameters file
            parameters = base / f"batching_{num_batch_threads}_threads.txt"
            parameters.write_text(f"num_batch_threads {{ value: {num_batch_threads} }}\n")
            flags += ["--batching_parameters_file", str(parameters)]
    return flags


def batched_runs(args):
    """`(label, num_batch_threads)` of the batched servers: "batched" is the first --num-batch-threads."""
    first, *others = args.num_batch_threads
    return [("batched", first)] + [(f"batched_{n}_threads", n) for n in others]


def stats(latencies, rate):
    p50, p99 = np.percentile(latencies, [50, 99]) * 1000
    return {"rps": float(rate), "p50_ms": float(p50), "p99_ms": float(p99), "requests": len(latencies)}


def sequential_summary(seq):
    """Part 1's figures from `{client: [p50 ms of each repeat]}`: the runs, their medians and the ratios."""
    p50 = {name: float(np.median(v)) for name, v in seq.items()}
    flat = ({"servable_call_keyword_over_flat": p50["servable_call_keyword"] / p50["servable_call"]}
            if "servable_call_keyword" in p50 else {})
    return {"sequential_p50_ms_runs": seq, "sequential_p50_ms": p50, **flat,
            "grpc_over_in_process": p50["grpc"] / p50["in_process"],
            "rest_over_in_process": p50["rest_keep_alive"] / p50["in_process"],
            **({"rest_handed_off_over_in_process": p50["rest_keep_alive_handed_off"] / p50["in_process"]}
               if "rest_keep_alive_handed_off" in p50 else {})}


def client_rows(table, others=()):
    """Part 2's rows from `{clients: {label: stats}}`: the batched and unbatched figures the issue names, the
    ratio, and each of `others` (labels of further batched servers) over the unbatched rate."""
    return {
        clients: {
            "batched_rps": row["batched"]["rps"], "unbatched_rps": row["unbatched"]["rps"],
            "batched_p99_ms": row["batched"]["p99_ms"], "unbatched_p99_ms": row["unbatched"]["p99_ms"],
            "batched_over_unbatched": row["batched"]["rps"] / row["unbatched"]["rps"],
            **{f"{label}_over_unbatched": row[label]["rps"] / row["unbatched"]["rps"] for label in others},
            **row,
        } for clients, row in table.items()
    }


def run(args):
    with run_flags(args.server_flags):
        return _run(args)


def _run(args):
    import tensorflow as tf

    result = {"arguments": vars(args), "model": "bAbI EntNet, task 1 sizes, `answer` signature (text in)",
              "grpc_servers": grpc_servers(args.server_flags)}
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        export_babi_entnet(base)
        answer = tf.saved_model.load(str(base / "babi" / "1")).signatures["answer"]

        def in_process():
            # The signature on tensors built once: the model's own cost, the floor any server adds to.
            story, question = tf.constant([STORY]), tf.constant([QUESTION])
            return lambda: answer(story=story, question=question)

        # 1. Sequential batch-1, our server and in-process alternating in one stretch; beside the server's
        # REST, the same server handing every REST request to a worker thread (the path before 1.1), and the
        # server's own signature call in this process, flat (`FlatCall`) and by keyword (before 1.2).
        with sequential_servers(base) as (ports, handing_off_ports):
            seq = {"in_process": [], "grpc": [], "rest_keep_alive": [], "rest_keep_alive_handed_off": [],
                   "servable_call": [], "servable_call_keyword": []}
            calls = {"in_process": in_process(), "grpc": grpc_call(ports["grpc"]),
                     "rest_keep_alive": rest_call(ports["rest"]),
                     "rest_keep_alive_handed_off": rest_call(handing_off_ports["rest"]),
                     "servable_call": servable_call(base, flat_call=True),
                     "servable_call_keyword": servable_call(base, flat_call=False)}
            for _ in range(args.repeats):
                for name, call in calls.items():
                    seq[name].append(sequential_p50(call))
        result.update(sequential_summary(seq))

        # 2. Throughput with and without batching, per thread setting.
        for threads in THREADS:
            table = {str(c): {} for c in args.clients}
            for clients in args.clients:
                latencies, rate = measure(in_process, clients, args.seconds)
                table[str(clients)]["in_process"] = stats(latencies, rate)
            for label, num_batch_threads in [("unbatched", None)] + batched_runs(args):
                flags = server_flags(base, num_batch_threads is not None, threads, num_batch_threads or 1)
                with running_server(flags) as ports:
                    for clients in args.clients:
                        latencies, rate = measure(lambda p=ports["grpc"]: grpc_call(p), clients, args.seconds)
                        table[str(clients)][label] = stats(latencies, rate)
            result[f"clients_{threads}"] = client_rows(table, [label for label, _ in batched_runs(args)[1:]])
        # The headline: the setting a batching server is run with (see docs/serving.md).
        result["clients"] = result["clients_one_thread_each"]
        if "32" in result["clients"]:
            best_unbatched = max(result[f"clients_{t}"]["32"]["unbatched_rps"] for t in THREADS)
            result["batched_32_over_best_unbatched_32"] = result["clients"]["32"]["batched_rps"] / best_unbatched

        # 4. Native clients (C programs, each client its own connection), where installed.
        if args.native and native_load.available():
            result["native_clients"] = native_figures(args, base, in_process)

        # 3. Another server script, old vs new in this run.
        if args.baseline_script:
            result["baseline"] = {"script": args.baseline_script}
            for label, script in (("baseline", args.baseline_script), ("this", None)):
                with running_server(
                        _with_rest(server_flags(base, False, "tensorflow_default")), script=script) as ports:
                    call = grpc_call(ports["grpc"])
                    rest = rest_call(ports["rest"])
                    result["baseline"][label] = {
                        "grpc_p50_ms": float(np.median([sequential_p50(call) for _ in range(args.repeats)])),
                        "rest_keep_alive_p50_ms": float(np.median([sequential_p50(rest) for _ in range(args.repeats)])),
                    }
                    if args.native and native_load.available():
                        result["baseline"][label].update(native_sequential(args, ports))
                with running_server(_with_rest(server_flags(base, True, "tensorflow_default")), script=script) as ports:
                    latencies, rate = measure(lambda p=ports["grpc"]: grpc_call(p), 32, args.seconds)
                    result["baseline"][label]["batched_32"] = stats(latencies, rate)
                    if args.native and native_load.available():
                        result["baseline"][label]["rest_batched_32_wrk"] = wrk_stats(ports["rest"], rest_body(), 32,
                                                                                     args.seconds)
    return result


def native_figures(args, base, in_process):
    """Parts 1 and 2 with h2load (gRPC) and wrk (REST) as the clients; `in_process()` gives the floor's call."""
    message = grpc_message()
    body = rest_body()
    figures = {"tools": "h2load (nghttp2) for gRPC, wrk for REST"}
    with sequential_servers(base) as (ports, handing_off_ports):
        native_load.check_grpc_body(ports["grpc"], message)
        seq = {"in_process": [], "grpc": [], "rest_keep_alive": [], "rest_keep_alive_handed_off": []}
        floor = in_process()
        for _ in range(args.repeats):  # alternated in one stretch, as in part 1
            seq["in_process"].append(sequential_p50(floor))
            seq["grpc"].append(h2load_p50(ports["grpc"], message))
            for name, rest_port in (("rest_keep_alive", ports["rest"]),
                                    ("rest_keep_alive_handed_off", handing_off_ports["rest"])):
                seq[name].append(wrk_p50(rest_port, body, args.seconds))
    figures.update(sequential_summary(seq))
    for threads in THREADS:
        table = {str(c): {} for c in args.clients}
        rest_table = {str(c): {} for c in args.clients}
        for label, batching in (("unbatched", False), ("batched", True)):
            with running_server(_with_rest(server_flags(base, batching, threads))) as ports:
                for clients in args.clients:
                    rate, latencies = native_load.h2load_grpc(ports["grpc"], message, clients, seconds=args.seconds)
                    table[str(clients)][label] = stats(latencies, rate)
                    rest_table[str(clients)][label] = wrk_stats(ports["rest"], body, clients, args.seconds)
        # The batching server as it was before a change, beside the default one (`OTHER_BATCHED_SERVERS`).
        for label, flags, rest, _ in OTHER_BATCHED_SERVERS:
            with running_server((_with_rest(server_flags(base, True, threads)) if rest
                                 else server_flags(base, True, threads)) + flags) as ports:
                for clients in args.clients:
                    rate, latencies = native_load.h2load_grpc(ports["grpc"], message, clients, seconds=args.seconds)
                    table[str(clients)][label] = stats(latencies, rate)
                    if rest:
                        rest_table[str(clients)][label] = wrk_stats(ports["rest"], body, clients, args.seconds)
        figures[f"clients_{threads}"] = client_rows(table, [label for label, *_ in OTHER_BATCHED_SERVERS])
        figures[f"rest_clients_{threads}"] = client_rows(
            rest_table, [label for label, _, rest, _ in OTHER_BATCHED_SERVERS if rest])
    figures["clients"] = figures["clients_one_thread_each"]
    figures["rest_clients"] = figures["rest_clients_one_thread_each"]
    return figures


def native_sequential(args, ports):
    """Sequential batch-1 p50 ms with one h2load (gRPC) and one wrk (REST) connection, medians of the repeats."""
    message, body = grpc_message(), rest_body()
    grpc_runs, rest_runs = [], []
    for _ in range(args.repeats):  # alternated, as in part 1
        grpc_runs.append(h2load_p50(ports["grpc"], message))
        rest_runs.append(wrk_p50(ports["rest"], body, args.seconds))
    return {"grpc_h2load_p50_ms": float(np.median(grpc_runs)), "rest_wrk_p50_ms": float(np.median(rest_runs))}


def h2load_p50(port, message, path=native_load.PREDICT):
    """p50 ms of 300 back-to-back `message`s to the gRPC method `path` on one h2load connection (after 10
    unmeasured ones)."""
    _, latencies = native_load.h2load_grpc(port, message, 1, requests=310, path=path)
    return float(np.percentile(latencies[10:], 50) * 1e3)


def wrk_p50(port, body, seconds):
    """p50 ms of `body` POSTed back-to-back on one wrk connection for a quarter of `seconds` (at least 1 s)."""
    _, percentiles = native_load.wrk_rest(port, body, 1, max(1, round(seconds / 4)))
    return percentiles["p50_ms"]


def wrk_stats(port, body, clients, seconds):
    """`stats`' figures (without a request count) for `clients` wrk connections POSTing `body` for `seconds`."""
    rate, percentiles = native_load.wrk_rest(port, body, clients, max(1, round(seconds)))
    return {"rps": rate, **percentiles}


@contextlib.contextmanager
def sequential_servers(base):
    """Part 1's two unbatched servers with REST, the default one and one handing every REST request to a worker
    (`HAND_OFF`), running while the block runs; yields the ports of each."""
    with running_server(_with_rest(server_flags(base, False, "tensorflow_default"))) as ports:
        with running_server(_with_rest(server_flags(base, False, "tensorflow_default")) + HAND_OFF) as handing_off:
            yield ports, handing_off


# Flags every server of a run gets (`--server-flag`), set by `run_flags` for the run's duration.
_RUN_FLAGS = []


@contextlib.contextmanager
def run_flags(flags):
    """Give every server `running_server` starts while the block runs `flags` more (a bench's `--server-flag`s)."""
    _RUN_FLAGS[:] = flags
    try:
        yield
    finally:
        _RUN_FLAGS.clear()


@contextlib.contextmanager
def running_server(flags, script=None):
    """`start_server(flags, script=script)`'s ports while the block runs (with the run's `--server-flag`s); the
    server stops after it."""
    process, ports = start_server(flags + _RUN_FLAGS, script=script)
    try:
        yield ports
    finally:
        _stop(process)


def _with_rest(flags):
    return flags + ["--rest_api_port", str(free_port())]


def _stop(process):
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def _handed_off(figures):
    """The REST figure of the server handing every request to a worker, where the run measured it."""
    if "rest_handed_off_over_in_process" not in figures:
        return ""
    return (f"; REST handed to a worker thread {figures['sequential_p50_ms']['rest_keep_alive_handed_off']:.2f} "
            f"({figures['rest_handed_off_over_in_process']:.2f}x)")


def markdown(result):
    """The figures as a Markdown list and table (the results page and the terminal show the same)."""
    p50 = result["sequential_p50_ms"]
    lines = [f"- sequential batch-1 `answer`, p50 ms: in-process {p50['in_process']:.2f}, gRPC {p50['grpc']:.2f} "
             f"({result['grpc_over_in_process']:.2f}x), REST keep-alive {p50['rest_keep_alive']:.2f} "
             f"({result['rest_over_in_process']:.2f}x){_handed_off(result)}"]
    if "grpc_servers" in result:
        servers = result["grpc_servers"]
        lines.append(f"- gRPC servers: {servers['unbatched']} unbatched, {servers['batched']} batched")
    if "servable_call_keyword_over_flat" in result:
        lines.append(f"- the server's signature call in this process, p50 ms: flat {p50['servable_call']:.3f}, by "
                     f"keyword {p50['servable_call_keyword']:.3f} ({result['servable_call_keyword_over_flat']:.2f}x)")
    for threads in THREADS:
        lines += ["", f"Concurrent clients, TensorFlow threads: {threads.replace('_', ' ')}", "",
                  "| clients | in-process req/s | unbatched req/s | p99 ms | batched req/s | p99 ms "
                  "| batched / unbatched |",
                  "|---|---|---|---|---|---|---|"]
        for clients, row in result[f"clients_{threads}"].items():
            lines.append(f"| {clients} | {row['in_process']['rps']:.0f} | {row['unbatched_rps']:.0f} | "
                         f"{row['unbatched_p99_ms']:.1f} | {row['batched_rps']:.0f} | {row['batched_p99_ms']:.1f} | "
                         f"{row['batched_over_unbatched']:.2f}x |")
        extra = [(clients, row, label) for clients, row in result[f"clients_{threads}"].items()
                 for label in row if label.startswith("batched_") and label.endswith("_threads")]
        if extra:
            lines.append("")
        for clients, row, label in extra:
            lines.append(f"- {clients} clients, batched with num_batch_threads {label.split('_')[1]}: "
                         f"{row[label]['rps']:.0f} req/s, p99 {row[label]['p99_ms']:.1f} ms, "
                         f"{row[label + '_over_unbatched']:.2f}x unbatched")
    if "batched_32_over_best_unbatched_32" in result:
        lines += ["", f"- 32 clients, batched (one thread each) over the faster unbatched setting: "
                      f"{result['batched_32_over_best_unbatched_32']:.2f}x"]
    if "native_clients" in result:
        native = result["native_clients"]
        p50 = native["sequential_p50_ms"]
        lines += ["", f"Native clients ({native['tools']}), the same server:", "",
                  f"- sequential batch-1 `answer`, p50 ms: in-process {p50['in_process']:.2f}, gRPC {p50['grpc']:.2f} "
                  f"({native['grpc_over_in_process']:.2f}x), REST keep-alive {p50['rest_keep_alive']:.2f} "
                  f"({native['rest_over_in_process']:.2f}x){_handed_off(native)}"]
        for threads in THREADS:
            for api, key in (("gRPC", "clients"), ("REST", "rest_clients")):
                if f"{key}_{threads}" not in native:  # runs from before REST was measured here
                    continue
                lines += ["", f"{api}, TensorFlow threads: {threads.replace('_', ' ')}", "",
                          "| clients | unbatched req/s | p99 ms | batched req/s | p99 ms | batched / unbatched |",
                          "|---|---|---|---|---|---|"]
                for clients, row in native[f"{key}_{threads}"].items():
                    lines.append(f"| {clients} | {row['unbatched_rps']:.0f} | {row['unbatched_p99_ms']:.1f} | "
                                 f"{row['batched_rps']:.0f} | {row['batched_p99_ms']:.1f} | "
                                 f"{row['batched_over_unbatched']:.2f}x |")
                others = [(clients, row[label], text) for clients, row in native[f"{key}_{threads}"].items()
                          for label, text in _other_batched(result) if label in row]
                lines += [""] if others else []
                lines += [f"- {clients} clients, batched {text}: {row['rps']:.0f} req/s, p99 {row['p99_ms']:.1f} ms"
                          for clients, row, text in others]
    if "baseline" in result:
        old, new = result["baseline"]["baseline"], result["baseline"]["this"]
        lines += [f"- old vs new server in this run: gRPC p50 {old['grpc_p50_ms']:.2f} -> {new['grpc_p50_ms']:.2f} ms, "
                  f"REST keep-alive {old['rest_keep_alive_p50_ms']:.2f} -> {new['rest_keep_alive_p50_ms']:.2f} ms, "
                  f"32 batched clients (default threads) {old['batched_32']['rps']:.0f} -> "
                  f"{new['batched_32']['rps']:.0f} req/s"]
        if "grpc_h2load_p50_ms" in new and "grpc_h2load_p50_ms" in old:
            lines += [f"- old vs new server in this run, native clients: gRPC (h2load) p50 "
                      f"{old['grpc_h2load_p50_ms']:.2f} -> {new['grpc_h2load_p50_ms']:.2f} ms, REST (wrk) "
                      f"{old['rest_wrk_p50_ms']:.2f} -> {new['rest_wrk_p50_ms']:.2f} ms"]
        if "rest_batched_32_wrk" in new:
            lines += [f"- old vs new server in this run, 32 batched wrk REST clients (default threads): "
                      f"{old['rest_batched_32_wrk']['rps']:.0f} -> {new['rest_batched_32_wrk']['rps']:.0f} req/s"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measuring time per concurrent setting")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--repeats", type=int, default=3,
                        help="sequential p50s per path, alternated; the median is kept")
    parser.add_argument("--baseline-script", help="another serving/server.py to measure beside this one")
    parser.add_argument("--num-batch-threads", type=int, nargs="+", default=[1],
                        help="batching servers' num_batch_threads (TF Serving's batching parameter), each measured "
                             "in this run; the first gives the table's batched column (default 1)")
    parser.add_argument("--no-native", dest="native", action="store_false",
                        help="leave out the native clients (h2load, wrk), which run where they are installed")
    parser.add_argument("--server-flag", action="append", default=[], dest="server_flags",
                        help="a flag for every server of the run, e.g. --server-flag=--grpc_native=true")
    parser.add_argument("--out", default="bench/results/serving_latency.json")
    args = parser.parse_args(argv)
    if args.server_flags and args.baseline_script:
        parser.error("--server-flag and --baseline-script: the other checkout's server may not know the flags")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return save_and_report(run(args), args.out, markdown)


if __name__ == "__main__":
    main()
