"""Soak test of `serving/server.py`: bounded mixed good/bad load, hot swaps, a corrupt version, slow clients.

Exports an (untrained) bAbI EntNet as `babi` and an LSTM language model as
`lm`, starts the server in its own process (REST timeout 5 s, Prometheus on),
then:

1. batch-1 latency, sequentially: in-process signature call vs gRPC, and REST
   on a keep-alive connection vs a fresh connection per request;
2. every bad kind of `keras_relmem.testing.soak` once (expected vs got);
3. `--threads` clients send at least `--requests` mixed requests
   (`--bad-fraction` bad, half gRPC, half REST, REST half keep-alive; the
   load goes on until the server has closed the slow sockets). During the
   load: a new babi version *without* its warm-up file, a corrupt version,
   and a new version *with* warm-up (TF Serving's `assets.extra` requests),
   so the swap latency with and without warm-up is measured side by side;
   then, once the last swap's window has closed, 50 slow-loris sockets that
   must be closed after the timeout (their own stall is reported apart, and
   kept out of the swap windows and the steady figures). Each swap also
   reports the slowest request in flight while the server loaded the
   version, from the server's log. The new versions are copies of version 1
   (`--swap-versions copy`) or exports of the same code with other weights,
   each from a process of its own, as a retrained model arrives
   (`retrained`);
4. the server's RSS, threads and open files sampled every 0.5 s, and after
   the load; then SIGTERM, which must exit 0.

Prints good-request failures, codes per bad kind, p50/p99 per path, swap
latencies, tracebacks on the server's stderr, and writes all of it as JSON.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving.soak --requests 10000 \\
        --out bench/serving/results/serving_soak.json

`--server-flag=--max_rows_per_call=1024` (repeatable) passes a flag to the
server, for a run beside the default.
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.serving import export_babi_entnet, free_port, start_server  # noqa: E402
from keras_relmem.testing import soak  # noqa: E402

TIMEOUT_MS = 5000
AFTER_SWAP_S = 3.0  # a swap's window: from the new version's arrival to this long after it serves


def export_models(base):
    """Export babi (version 1) and lm; returns the catalogue's `Shapes`."""
    from keras_relmem import export
    from keras_relmem.data.vocab import Vocabulary
    from keras_relmem.models import language_model

    data, _ = export_babi_entnet(base)
    words = "<eos> the company said it will sell shares of its stock to a new investor group".split()
    vocab = Vocabulary(words, pad_token=None, oov_token="<unk>")
    export.export_lm(language_model.build_language_model("lstm", len(vocab), embedding_dim=8, units=8), vocab,
                     base, name="lm")
    return soak.Shapes(data.story_length, data.sentence_length, data.query_length, len(data.vocab), len(vocab))


def export_retrained(base, seed):
    """Export the babi model of `export_models` with other weights as `base/babi/1`, from a new Python process.

    A retrained model comes from another process: its functions are traced
    afresh, and its tables are built from vocabulary files in another
    temporary folder.
    """
    code = ("import keras, sys; keras.utils.set_random_seed(int(sys.argv[2])); "
            "from bench.serving import export_babi_entnet; export_babi_entnet(sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(base), str(seed)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=pathlib.Path(__file__).resolve().parents[2])
    return pathlib.Path(base) / "babi" / "1"


def start_with_models(base, stderr_path, server_flags=(), script=None):
    config = base / "models.config"
    config.write_text("model_config_list {\n" + "".join(
        f'  config {{ name: "{n}" base_path: "{base / n}" model_platform: "tensorflow" }}\n' for n in ("babi", "lm")
    ) + "}\n")
    monitoring = base / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }\n')
    process, ports = start_server(
        ["--rest_api_port", str(free_port()), "--model_config_file", str(config), "--file_system_poll_wait_seconds",
         "0.5", "--rest_api_timeout_in_ms", str(TIMEOUT_MS), "--monitoring_config_file", str(monitoring),
         *server_flags],
        log_path=stderr_path, script=script)
    return process, ports["grpc"], ports["rest"]


def process_sample(pid):
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_mb": round(int(fields["VmRSS"].split()[0]) / 1024, 1),
        "threads": int(fields["Threads"]),
        "open_files": len(os.listdir(f"/proc/{pid}/fd")),
    }


def wait_for_version(client, version, seconds=120):
    """Seconds until babi `version` is AVAILABLE, or None if it never is."""
    started = time.monotonic()
    call = soak.RestCall("status", method="GET", path=f"/v1/models/babi/versions/{version}")
    while time.monotonic() - started < seconds:
        status, body = client.rest(call, keep_alive=False)
        if status == 200 and b'"AVAILABLE"' in body:
            return time.monotonic() - started
        if status == 200 and b'"END"' in body:
            return None
        time.sleep(0.05)
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10000, help="mixed requests in the load phase")
    parser.add_argument("--threads", type=int, default=8, help="client threads")
    parser.add_argument("--bad-fraction", type=float, default=0.4)
    parser.add_argument("--slow-sockets", type=int, default=50)
    parser.add_argument("--swap-versions", choices=("copy", "retrained"), default="copy",
                        help="new versions are copies of version 1, or the same code's exports with other weights")
    parser.add_argument("--server-flag", action="append", default=[], dest="server_flags",
                        help="a flag for the server, e.g. --server-flag=--enable_batching")
    parser.add_argument("--server-script", default=None,
                        help="the server script to soak (default this checkout's serving/server.py), e.g. an older "
                             "checkout's, which then runs with that checkout's package")
    parser.add_argument("--out", default="bench/serving/results/serving_soak.json")
    args = parser.parse_args(argv)

    work = pathlib.Path(tempfile.mkdtemp(prefix="serving-soak-"))
    shapes = export_models(work)
    sources = {version: work / "babi" / "1" for version in (2, 4)}
    if args.swap_versions == "retrained":
        sources = {version: export_retrained(work / f"retrained-{version}", version) for version in sources}
    stderr_path = work / "server.stderr"
    process, grpc_port, rest_port = start_with_models(work, stderr_path, args.server_flags, args.server_script)
    result = {"arguments": vars(args), "rest_timeout_ms": TIMEOUT_MS}
    try:
        client = soak.Client("127.0.0.1", grpc_port, rest_port)
        result["idle_before"] = process_sample(process.pid)

        # 1. Sequential batch-1 latency.
        import tensorflow as tf

        signature = tf.saved_model.load(str(work / "babi" / "1")).signatures["serving_default"]
        story, query = shapes.ids()
        in_process = soak.sequential_latency(lambda: signature(story=tf.constant(story), query=tf.constant(query)))
        ids_grpc = soak.good_grpc_calls(shapes)[0]
        ids_rest = soak.good_rest_calls(shapes)[1]
        result["sequential_p50_ms"] = {
            "in_process": in_process * 1e3,
            "grpc": soak.sequential_latency(lambda: client.grpc(ids_grpc)) * 1e3,
            "rest_keep_alive": soak.sequential_latency(lambda: client.rest(ids_rest, keep_alive=True)) * 1e3,
            "rest_fresh_connection": soak.sequential_latency(lambda: client.rest(ids_rest, keep_alive=False)) * 1e3,
        }
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        health = health_pb2_grpc.HealthStub(client._channel)
        # The transport's floor: a gRPC call that does no model work.
        result["sequential_p50_ms"]["grpc_health_check"] = soak.sequential_latency(
            lambda: health.Check(health_pb2.HealthCheckRequest(service="babi"), timeout=10)) * 1e3
        result["grpc_over_in_process"] = result["sequential_p50_ms"]["grpc"] / result["sequential_p50_ms"]["in_process"]

        # 2. The catalogue once.
        catalogue = {}
        for call in soak.bad_rest_calls(shapes, 16 << 20):
            catalogue[call.kind] = {"expected": call.expect, "got": client.rest(call)[0]}
        for call in soak.bad_grpc_calls(shapes, 64 << 20):
            catalogue[call.kind] = {"expected": call.expect.name, "got": client.grpc(call).name}
        result["catalogue"] = catalogue
        result["catalogue_wrong"] = {k: v for k, v in catalogue.items() if v["expected"] != v["got"]}

        # 3. Mixed load with swaps and slow sockets.
        recorder, stop = soak.LoadRecorder(), threading.Event()
        clients = [soak.Client("127.0.0.1", grpc_port, rest_port) for _ in range(args.threads)]
        workers = [threading.Thread(target=soak.load_worker, args=(c, shapes, recorder, stop, seed, args.bad_fraction))
                   for seed, c in enumerate(clients)]
        samples, events = [], []
        began = time.perf_counter()
        began_wall = time.time()  # the server's log is stamped with the wall clock

        def sampler():
            while not stop.is_set():
                samples.append({"t": round(time.perf_counter() - began, 2), **process_sample(process.pid)})
                time.sleep(0.5)

        sampling = threading.Thread(target=sampler)
        sampling.start()
        for worker in workers:
            worker.start()

        def at(fraction):
            while recorder.count < fraction * args.requests:
                time.sleep(0.05)

        def swap(version, warm):
            shutil.copytree(sources[version], work / "babi" / f".{version}")
            if not warm:
                (work / "babi" / f".{version}" / "assets.extra" / "tf_serving_warmup_requests").unlink()
            started = time.perf_counter() - began
            os.rename(work / "babi" / f".{version}", work / "babi" / str(version))
            waited = wait_for_version(client, version)
            events.append({"event": f"version {version} ({'with' if warm else 'without'} warm-up)",
                           "t": started, "available_after_s": waited})

        at(0.2)
        swap(2, warm=False)
        at(0.4)
        corrupt = work / "babi" / "3"
        shutil.copytree(work / "babi" / "1", work / "babi" / ".3")
        (work / "babi" / ".3" / "saved_model.pb").write_bytes(b"not a SavedModel")
        os.rename(work / "babi" / ".3", corrupt)
        events.append({"event": "version 3 (corrupt)", "t": time.perf_counter() - began})
        time.sleep(2)
        at(0.6)
        shutil.rmtree(corrupt)
        swap(4, warm=True)
        # The slow sockets come once the last swap's window has closed: fifty connections opened at once cost
        # the server a stall of their own, which a swap window must not count as the swap's.
        time.sleep(AFTER_SWAP_S)
        slow = []
        slow_began = time.perf_counter() - began
        for index in range(args.slow_sockets):
            sock = socket.create_connection(("127.0.0.1", rest_port))
            # Half stop inside their headers, half inside their body.
            sock.sendall(b"GET /v1/models/babi HTTP/1.1\r\nHost: x\r\n" if index % 2 else
                         b"POST /v1/models/babi:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            slow.append(sock)
        slow_opened = time.monotonic()
        threads_with_slow = process_sample(process.pid)["threads"]
        closed = 0
        for sock in slow:
            sock.settimeout(max(0.1, TIMEOUT_MS / 1000 * 3 - (time.monotonic() - slow_opened)))
            try:
                data = sock.recv(4096)
                closed += 1 if (not data or data.startswith(b"HTTP/1.1 408 ")) else 0
            except OSError:
                pass
            sock.close()
        # From their opening to half a second after the server closed the last: outside the steady figures too.
        slow_window = (slow_began, time.perf_counter() - began + 0.5)
        at(1.0)
        stop.set()
        for worker in workers:
            worker.join()
        sampling.join()
        minutes = (time.perf_counter() - began) / 60
        stale_retries = sum(c.stale_retries for c in clients)
        for c in clients:
            c.close()
        time.sleep(TIMEOUT_MS / 1000 + 1)  # idle keep-alive connections time out
        result["idle_after"] = process_sample(process.pid)

        # Latency per path, and per swap window (`swap_windows`).
        every = recorder.since(began)
        windows = swap_windows(events)
        apart = [*windows.values(), slow_window]
        steady = [s for t, s in every if not any(a <= t <= b for a, b in apart)]
        result["load"] = {
            "requests": recorder.count,
            "minutes": minutes,
            "good_requests": sum(len(v) for v in recorder.latencies.values()),
            "good_failed": len(recorder.good_failures),
            "good_failure_examples": recorder.good_failures[:10],
            "stale_keep_alive_retries": stale_retries,
            "bad_5xx_or_dropped": dict(recorder.bad_5xx),
            "codes_per_bad_kind": {k: dict(v) for k, v in recorder.codes.items()},
            "latency_ms": {path: {"p50": soak.percentile([s for _, s in v], 50) * 1e3,
                                  "p99": soak.percentile([s for _, s in v], 99) * 1e3, "count": len(v)}
                           for path, v in recorder.latencies.items()},
            "steady_p99_ms": soak.percentile(steady, 99) * 1e3,
            # The slowest of the requests outside the swap windows (and the slow sockets' time), beside each
            # window's slowest and count: a window's slowest is the maximum of its requests, which exceeds the
            # p99 even when nothing happens.
            "steady_slowest_ms": max(steady, default=0.0) * 1e3,
            "steady_requests": len(steady),
            "slowest_requests": [{"ms": seconds * 1e3, "sent_at_s": started - began, "path": path, "what": detail}
                                 for seconds, started, path, detail in sorted(recorder.slowest, reverse=True)],
            "swaps": [{**e, **slowest_in(every, *windows[e["event"]])} if e["event"] in windows else e
                      for e in events],
            "slow_sockets": {"opened": len(slow), "closed_by_server": closed,
                             "server_threads_with_them_open": threads_with_slow,
                             "opened_at_s": slow_window[0], **slowest_in(every, *slow_window)},
            "samples": samples,
        }
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            result["sigterm_exit_code"] = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            result["sigterm_exit_code"] = "killed after 60 s"
        text = stderr_path.read_text()
        result["stderr_tracebacks"] = text.count("Traceback")
        result["stderr_lines"] = len(text.splitlines())
        if "load" in result:
            spans = load_spans(text, "babi", began_wall)
            for event in result["load"]["swaps"]:
                version = int(event["event"].split()[1])
                if "slowest_ms" in event and version in spans:
                    event["loading"] = in_flight_during(every, *spans[version])

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=float))
    report(result)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def swap_windows(events):
    """`{event: (start, end)}` of each swap: from the new version's arrival to 3 s after it is available, or to
    the next event if that comes first (so one stall is not counted against two swaps)."""
    starts = sorted(e["t"] for e in events)
    windows = {}
    for e in events:
        if "available_after_s" not in e:
            continue
        later = [t for t in starts if t > e["t"]]
        end = e["t"] + (e["available_after_s"] or 0) + AFTER_SWAP_S
        windows[e["event"]] = (e["t"], min([end] + later))
    return windows


def slowest_in(latencies, start, end):
    """The slowest of `(t, seconds)` latencies with `start <= t <= end`: `slowest_ms`, and `slowest_at_s`, when it
    was sent after `start` (so a swap's worst request is placed in its loading, warm-up or first traffic)."""
    inside = [(s, t) for t, s in latencies if start <= t <= end]
    if not inside:
        return {"slowest_ms": 0.0, "requests": 0}
    seconds, sent = max(inside)
    return {"slowest_ms": seconds * 1e3, "slowest_at_s": sent - start, "requests": len(inside)}


_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \w+ (Loading|Successfully loaded) servable version "
                       r"\{name: (\S+) version: (\d+)\}")


def load_spans(log_text, model, began_wall):
    """`{version: (start s, end s)}`: when the server's log says it began and finished loading each version of
    `model`, in seconds after `began_wall` (a `time.time()`); loads that failed have no end and are left out."""
    starts, spans = {}, {}
    for line in log_text.splitlines():
        found = _LOG_LINE.match(line)
        if not found or found.group(4) != model:
            continue
        stamp = time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")) + int(found.group(2)) / 1e3
        version = int(found.group(5))
        if found.group(3) == "Loading":
            starts[version] = stamp - began_wall
        elif version in starts:
            spans[version] = (starts[version], stamp - began_wall)
    return spans


def in_flight_during(latencies, start, end):
    """The slowest request in flight while the server loaded a version (sent before `end`, answered after
    `start`; the log's stamps are whole milliseconds): `slowest_ms`, `requests` and the load's `ms`."""
    inside = [s for t, s in latencies if t <= end + 1e-3 and t + s >= start - 1e-3]
    return {"ms": (end - start) * 1e3, "slowest_ms": max(inside, default=0.0) * 1e3, "requests": len(inside)}


def markdown(result):
    """The soak's findings as a list: latencies, the bad-request catalogue, the load, swaps, resources, exit."""
    load = result["load"]
    seq = result["sequential_p50_ms"]
    lines = [f"- sequential p50 ms: in-process {seq['in_process']:.2f}, gRPC {seq['grpc']:.2f} "
             f"({result['grpc_over_in_process']:.2f}x; a health check alone {seq['grpc_health_check']:.2f}), "
             f"REST keep-alive {seq['rest_keep_alive']:.2f}, REST fresh {seq['rest_fresh_connection']:.2f}",
             f"- catalogue: {len(result['catalogue'])} bad kinds, answered otherwise than expected: "
             f"{result['catalogue_wrong'] or 'none'}",
             f"- load: {load['requests']} requests in {load['minutes']:.1f} min, {load['good_requests']} good, "
             f"{load['good_failed']} good failed, bad kinds with 5xx/dropped: {load['bad_5xx_or_dropped'] or 'none'}"]
    for path, stats in sorted(load["latency_ms"].items()):
        lines.append(f"  - {path}: p50 {stats['p50']:.2f} ms, p99 {stats['p99']:.2f} ms ({stats['count']} requests)")
    lines.append(f"  - steady p99 {load['steady_p99_ms']:.1f} ms"
                 + (f", slowest {load['steady_slowest_ms']:.1f} ms of {load['steady_requests']} requests "
                    "outside the swap windows and the slow sockets' time" if "steady_slowest_ms" in load else ""))
    for slow in load.get("slowest_requests", [])[:3]:
        lines.append(f"  - slow: {slow['ms']:.1f} ms, sent {slow['sent_at_s']:.2f} s into the load, {slow['path']}, "
                     f"{slow['what'].split(': ')[0]}")
    for event in load["swaps"]:
        lines.append("  - " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                        for k, v in event.items() if k != "loading"))
        if "loading" in event:
            lines.append(f"    - while it loaded ({event['loading']['ms']:.0f} ms): slowest "
                         f"{event['loading']['slowest_ms']:.1f} ms of {event['loading']['requests']} requests")
    rss = [s["rss_mb"] for s in load["samples"]]
    threads = [s["threads"] for s in load["samples"]]
    lines += [f"- server RSS {min(rss):.0f}-{max(rss):.0f} MB, threads {min(threads)}-{max(threads)}; idle before "
              f"{result['idle_before']}, after {result['idle_after']}",
              f"- slow sockets: {load['slow_sockets']}; requests resent on a new connection after the server had "
              f"closed an idle keep-alive one: {load['stale_keep_alive_retries']}",
              f"- SIGTERM exit code {result['sigterm_exit_code']}, tracebacks on stderr {result['stderr_tracebacks']}"]
    return "\n".join(lines)


def report(result):
    print(markdown(result))


if __name__ == "__main__":
    sys.exit(main())
