"""Serving latency and throughput: our server (gRPC), with and without batching, vs in-process calls.

Exports a bAbI EntNet model (task 1 sizes; weights do not change the cost),
starts `serving/server.py` in its own process, and for 1 and 32 concurrent
clients sends single-question `answer` requests (text in, top-3 answers out)
for a fixed time. Prints p50/p99 latency (ms) and requests/s per setting.

    KERAS_RELMEM_DATA=../shared/data python -m bench.serving_latency --seconds 10

On CPU the clients share the machine's cores with the server, as they would
on a single serving host.
"""

import argparse
import os
import pathlib
import signal
import tempfile
import threading
import time

import numpy as np

from bench.serving import export_babi_entnet, start_server

STORY = ["Mary went to the kitchen.", "John moved to the garden.", "Mary travelled to the office.",
         "Sandra journeyed to the hallway.", "John went back to the bedroom."]


def measure(call, clients, seconds):
    """Latencies (s) of `call()` from `clients` threads for `seconds`, and the requests/s."""
    latencies, lock, stop = [], threading.Lock(), threading.Event()

    def worker():
        mine = []
        while not stop.is_set():
            start = time.perf_counter()
            call()
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    for _ in range(3):  # warm-up (tracing, connections)
        call()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    return np.array(latencies), len(latencies) / elapsed


def server_flags(base, batching):
    flags = ["--model_name", "babi", "--model_base_path", str(base / "babi")]
    if batching:
        flags += ["--enable_batching", "--max_batch_size", "32", "--batch_timeout_micros", "2000",
                  "--grpc_max_threads", "64"]
    return flags


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring time per setting")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from keras_relmem.serving.client import ServingClient

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        _, path = export_babi_entnet(base)
        answer = tf.saved_model.load(str(path)).signatures["answer"]
        story, question = tf.constant([STORY]), tf.constant(["Where is Mary?"])
        for clients in args.clients:
            latencies, rate = measure(lambda: answer(story=story, question=question), clients, args.seconds)
            rows.append(("in-process", clients, latencies, rate))
        for batching in (False, True):
            process, ports = start_server(server_flags(base, batching))
            port = ports["grpc"]
            try:
                client = ServingClient(f"127.0.0.1:{port}")
                for clients in args.clients:
                    latencies, rate = measure(
                        lambda client=client: client.answer("babi", STORY, "Where is Mary?"), clients, args.seconds)
                    rows.append(("server, batching" if batching else "server", clients, latencies, rate))
                client.close()
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
    print(f"{'setting':<20} {'clients':>7} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}")
    for name, clients, latencies, rate in rows:
        p50, p99 = np.percentile(latencies, [50, 99]) * 1000
        print(f"{name:<20} {clients:>7} {p50:>8.2f} {p99:>8.2f} {rate:>8.1f}")


if __name__ == "__main__":
    main()
