"""Load from native clients: `h2load` (nghttp2) for gRPC and `wrk` for REST, beside the Python clients.

The Python clients of `bench.serving_latency` are threads of one process: on
two cores their own gRPC and HTTP work, under one interpreter lock, is part
of every figure they give, and 32 of them may saturate before the server
does. These clients are C programs, as TF Serving's own load tests use, so
what they measure is closer to the server's own cost. Both kinds are
recorded side by side; neither replaces the other.

gRPC goes through h2load as the HTTP/2 request it is: a POST to
`/tensorflow.serving.PredictionService/Predict` whose body is the
length-prefixed `PredictRequest` (`grpc_frame`), with `content-type:
application/grpc`. h2load reads neither the response nor the trailers, so
the same bytes are first sent once through a gRPC channel and the answer
checked (`check_grpc_body`). Per-request times come from h2load's
`--log-file` and wrk's latency distribution.

Needs Debian's `nghttp2-client` and `wrk` (`available()` says whether they are
installed); the benches skip this part without them.
"""

import pathlib
import re
import shutil
import struct
import subprocess
import tempfile

import numpy as np

PREDICT = "/tensorflow.serving.PredictionService/Predict"


def available():
    """Whether both native clients are installed."""
    return shutil.which("h2load") is not None and shutil.which("wrk") is not None


def predict_request(model, inputs, signature, output_filter=()):
    """A serialized `PredictRequest` (what `ServingClient.predict` sends) for `{alias: array}` inputs."""
    from keras_relmem.serving.client import predict_request as request

    return request(model, inputs, signature, output_filter=output_filter).SerializeToString()


def grpc_frame(message):
    """gRPC's length-prefixed message: a 0 byte (not compressed), the big-endian length, the bytes."""
    return b"\x00" + struct.pack(">I", len(message)) + message


def check_grpc_body(port, message):
    """Send `message` once through a gRPC channel and return the `PredictResponse`'s output names (raises on
    any gRPC error), so that what h2load sends is known to be answered."""
    import grpc
    from tensorflow_serving.apis import predict_pb2

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        raw = channel.unary_unary(PREDICT)(message, timeout=30)
    response = predict_pb2.PredictResponse.FromString(raw)
    return sorted(response.outputs)


def h2load_grpc(port, message, clients, seconds=None, requests=None, warm_up_seconds=1.0, path=PREDICT):
    """Requests/s and per-request latencies (s) of `clients` h2load connections, one stream each.

    Runs for `seconds` (after `warm_up_seconds`) or `requests` in all; `path` is the gRPC method
    (`/package.Service/Method`) whose serialized request `message` is. Raises when any response is
    not HTTP 200.
    """
    with tempfile.TemporaryDirectory() as tmp:
        body, log = pathlib.Path(tmp) / "body", pathlib.Path(tmp) / "log"
        body.write_bytes(grpc_frame(message))
        command = ["h2load", f"http://127.0.0.1:{port}{path}", "-d", str(body), "-c", str(clients), "-m", "1",
                   "-H", "content-type: application/grpc", "-H", "te: trailers", "--log-file", str(log)]
        if seconds is not None:
            command += ["-D", f"{seconds:g}", "--warm-up-time", f"{warm_up_seconds:g}"]
        else:
            command += ["-n", str(requests)]
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
        return parse_h2load(out, log.read_text())


def parse_h2load(out, log):
    """(requests/s, latencies in s) from h2load's output and its `--log-file` (start time in µs, HTTP status,
    µs to the end of the response, tab-separated). Raises when a status is not 200 or a figure is missing."""
    rows = [line.split("\t") for line in log.splitlines() if line.strip()]
    statuses = {row[1] for row in rows}
    if not rows or statuses != {"200"}:
        raise RuntimeError(f"h2load got HTTP statuses {sorted(statuses)}: {out[-2000:]}")
    match = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out)
    if match is None:
        raise RuntimeError(f"no request rate in h2load's output: {out[-2000:]}")
    return float(match.group(1)), np.array([int(row[2]) for row in rows]) / 1e6


def wrk_rest(port, body, clients, seconds, path="/v1/models/babi:predict"):
    """Requests/s and latency percentiles (ms: p50, p99) of `clients` keep-alive wrk connections POSTing `body`
    (GETting `path` when `body` is None).

    Raises when any response is not 2xx.
    """
    with tempfile.TemporaryDirectory() as tmp:
        command = ["wrk", "-t", str(min(clients, 2)), "-c", str(clients), "-d", f"{seconds}s", "--latency"]
        if body is not None:
            script = pathlib.Path(tmp) / "post.lua"
            script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                              f"wrk.body = [==[{body}]==]\n")
            command += ["-s", str(script)]
        command.append(f"http://127.0.0.1:{port}{path}")
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    return parse_wrk(out)


def parse_wrk(out):
    """(requests/s, {"p50_ms", "p99_ms"}) from the output of `wrk --latency`. Raises on non-2xx answers, socket
    errors or a missing figure."""
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk got errors: {out[-2000:]}")
    percentiles = {int(p): float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit] for p, value, unit in
                   re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)}
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if rate is None or not {50, 99} <= set(percentiles):
        raise RuntimeError(f"no rate or percentiles in wrk's output: {out[-2000:]}")
    return float(rate.group(1)), {"p50_ms": percentiles[50], "p99_ms": percentiles[99]}
