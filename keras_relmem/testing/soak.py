"""Good and bad requests for a running server: the bad-kind catalogue and a mixed-load soak.

`python -m bench.serving.soak` runs the soak against a server process; the tests run
the catalogue once against an in-process server. Both need a bAbI model served
as `babi` (signatures `serving_default` on ids and `answer` on text) and a
language model served as `lm` (`serving_default` on ids, `next_word` on text),
as `keras_relmem.export` writes them.
"""

import collections
import dataclasses
import heapq
import http.client
import json
import random
import socket
import threading
import time

import grpc
import numpy as np

STORY = ["Mary went to the kitchen.", "John moved to the garden.", "Mary travelled to the office."]


@dataclasses.dataclass
class Shapes:
    """What the catalogue needs to know of the served models.

    Attributes:
        story_length, sentence_length, query_length: the bAbI id signature's K, S, Q.
        vocab_size: the bAbI word vocabulary's size (ids must be below it).
        lm_vocab_size: the language model's vocabulary size.
    """

    story_length: int
    sentence_length: int
    query_length: int
    vocab_size: int
    lm_vocab_size: int

    def ids(self, value=0):
        return (np.full((1, self.story_length, self.sentence_length), value, np.int32),
                np.full((1, self.query_length), value if value else 1, np.int32))


@dataclasses.dataclass
class RestCall:
    """One REST request. `raw` (bytes) is sent as is on a fresh socket instead of through http.client."""

    kind: str
    method: str = "POST"
    path: str = "/v1/models/babi:predict"
    body: bytes = None
    raw: bytes = None
    expect: int = 200


@dataclasses.dataclass
class GrpcCall:
    """One gRPC request: `method` of PredictionService with `request`, expecting the status code `expect`."""

    kind: str
    method: str
    request: object
    expect: grpc.StatusCode = grpc.StatusCode.OK


def _json(value):
    return json.dumps(value).encode("utf-8")


def good_rest_calls(shapes):
    story, query = shapes.ids()
    return [
        RestCall("rest answer", body=_json({"signature_name": "answer",
                                             "instances": [{"story": STORY, "question": "Where is Mary?"}]})),
        RestCall("rest ids", body=_json({"inputs": {"story": story.tolist(), "query": query.tolist()}})),
        RestCall("rest next_word", path="/v1/models/lm:predict",
                 body=_json({"signature_name": "next_word", "instances": ["the company"]})),
        RestCall("rest status", method="GET", path="/v1/models/babi"),
    ]


def bad_rest_calls(shapes, max_json_bytes):
    """The REST bad kinds, each with the HTTP status TF Serving answers it with."""
    story, query = shapes.ids()
    ids = {"story": story.tolist(), "query": query.tolist()}
    deep = b"[" * 900 + b"]" * 900
    post = "POST /v1/models/babi:predict HTTP/1.1\r\nHost: x\r\n"
    follow = b"GET /v1/models/babi HTTP/1.1\r\nHost: x\r\n\r\n"
    return [
        RestCall("unknown model", path="/v1/models/nope:predict", body=_json({"instances": [1]}), expect=404),
        RestCall("unknown version", path="/v1/models/babi/versions/999:predict", body=_json({"inputs": ids}),
                 expect=404),
        RestCall("unknown label", path="/v1/models/babi/labels/canary:predict", body=_json({"inputs": ids}),
                 expect=400),
        RestCall("unknown signature", body=_json({"signature_name": "x", "inputs": ids}), expect=400),
        RestCall("malformed JSON", body=b'{"instances": [', expect=400),
        RestCall("invalid UTF-8", body=b'{"instances": ["\xff\xfe"]}', expect=400),
        RestCall("JSON null", body=b"null", expect=400),
        RestCall("both forms", body=_json({"instances": [], "inputs": {}}), expect=400),
        RestCall("empty instances", body=_json({"signature_name": "answer", "instances": []}), expect=400),
        RestCall("wrong input name", body=_json({"signature_name": "answer",
                                                 "inputs": {"story": [["a"]], "qestion": ["b"]}}), expect=400),
        RestCall("ragged lists", body=_json({"signature_name": "answer",
                                             "inputs": {"story": [["a"], ["b", "c"]], "question": ["q", "r"]}}),
                 expect=400),
        RestCall("wrong shape", body=_json({"inputs": {"story": [[[0] * shapes.sentence_length]],
                                                       "query": ids["query"]}}), expect=400),
        RestCall("text for ids", body=_json({"inputs": {"story": [[["x"] * shapes.sentence_length]
                                                                  * shapes.story_length], "query": ids["query"]}}),
                 expect=400),
        RestCall("floats for ids", body=_json({"inputs": {"story": (story + 0.5).tolist(), "query": ids["query"]}}),
                 expect=400),
        RestCall("huge integer", body=_json({"inputs": {"story": ids["story"], "query": [[2 ** 70] * 1]}}),
                 expect=400),
        RestCall("negative ids", body=_json({"inputs": {"story": (story - 1).tolist(), "query": ids["query"]}}),
                 expect=400),
        RestCall("ids past vocabulary", body=_json({"inputs": {"story": ids["story"],
                                                               "query": (query * 0 + shapes.vocab_size).tolist()}}),
                 expect=400),
        RestCall("lm negative ids", path="/v1/models/lm:predict", body=_json({"inputs": [[1, -3]]}), expect=400),
        RestCall("lone surrogate", body=b'{"signature_name": "answer", "instances": '
                                        b'[{"story": ["\\ud800"], "question": "q"}]}', expect=400),
        RestCall("bad base64", path="/v1/models/lm:predict",
                 body=_json({"signature_name": "next_word", "instances": [{"b64": "***"}]}), expect=400),
        RestCall("nested 900 deep", body=deep, expect=400),
        RestCall("nested 100000 deep", body=b"[" * 100000 + b"]" * 100000, expect=400),
        RestCall("classify on a predict signature", path="/v1/models/babi:classify",
                 body=_json({"examples": [{"x": 1}]}), expect=400),
        RestCall("GET on :predict", method="GET", path="/v1/models/babi:predict", expect=400),
        RestCall("PUT", method="PUT", path="/v1/models/babi:predict", body=b"{}", expect=405),
        RestCall("bad path", path="/v2/whatever", body=_json({"instances": [1]}), expect=404),
        RestCall("metadata of unknown model", method="GET", path="/v1/models/nope/metadata", expect=404),
        RestCall("declared too large", raw=(post + f"Content-Length: {max_json_bytes + 1}\r\n\r\n").encode(),
                 expect=413),
        RestCall("no Content-Length", raw=(post + "\r\n").encode(), expect=411),
        RestCall("bad Content-Length", raw=(post + "Content-Length: -5\r\n\r\n").encode(), expect=400),
        RestCall("body smuggled to an unknown route",
                 raw=f"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: {len(follow)}\r\n\r\n".encode() + follow,
                 expect=404),
    ]


def predict_request(model, signature, inputs, version=None):
    """The client's request (`keras_relmem.serving.client.predict_request`), good or bad as the soak wants it."""
    from keras_relmem.serving.client import predict_request as request

    return request(model, inputs, signature, version)


def good_grpc_calls(shapes):
    story, query = shapes.ids()
    return [
        GrpcCall("grpc ids", "Predict", predict_request("babi", "", {"story": story, "query": query})),
        GrpcCall("grpc answer", "Predict", predict_request(
            "babi", "answer", {"story": np.array([STORY], object), "question": np.array(["Where is Mary?"], object)})),
        GrpcCall("grpc next_word", "Predict", predict_request(
            "lm", "next_word", {"prefix": np.array(["the company"], object)})),
    ]


def bad_grpc_calls(shapes, max_request_bytes, oversized=True):
    """The gRPC bad kinds, each with TF Serving's status code (`oversized=False` leaves out the one request
    larger than `max_request_bytes`, whose building alone copies that many bytes several times)."""
    from tensorflow_serving.apis import classification_pb2, get_model_metadata_pb2

    story, query = shapes.ids()
    code = grpc.StatusCode
    metadata = get_model_metadata_pb2.GetModelMetadataRequest()
    metadata.model_spec.name = "babi"
    metadata.metadata_field.append("nonsense")
    classify = classification_pb2.ClassificationRequest()
    classify.model_spec.name = "babi"
    classify.input.example_list.examples.add()
    rows = max_request_bytes // (4 * shapes.story_length * shapes.sentence_length) + 1
    calls = [
        GrpcCall("grpc unknown model", "Predict", predict_request("nope", "", {"story": story, "query": query}),
                 code.NOT_FOUND),
        GrpcCall("grpc empty model name", "Predict", predict_request("", "", {"story": story}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc unknown version", "Predict",
                 predict_request("babi", "", {"story": story, "query": query}, version=999), code.NOT_FOUND),
        GrpcCall("grpc unknown signature", "Predict", predict_request("babi", "x", {"story": story, "query": query}),
                 code.FAILED_PRECONDITION),
        GrpcCall("grpc wrong input name", "Predict", predict_request("babi", "", {"story": story, "qury": query}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc missing input", "Predict", predict_request("babi", "", {"story": story}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc wrong dtype", "Predict",
                 predict_request("babi", "", {"story": story.astype("float32"), "query": query}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc wrong shape", "Predict", predict_request("babi", "", {"story": story[:, :1], "query": query}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc strings for ids", "Predict",
                 predict_request("babi", "", {"story": np.array([["a"]], object), "query": query}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc negative ids", "Predict", predict_request("babi", "", {"story": story - 1, "query": query}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc ids past vocabulary", "Predict",
                 predict_request("babi", "", {"story": story, "query": query * 0 + shapes.vocab_size}),
                 code.INVALID_ARGUMENT),
        GrpcCall("grpc lm negative ids", "Predict",
                 predict_request("lm", "", {"ids": np.array([[1, -2]], np.int32)}), code.INVALID_ARGUMENT),
        GrpcCall("grpc metadata field", "GetModelMetadata", metadata, code.INVALID_ARGUMENT),
        GrpcCall("grpc classify on a predict signature", "Classify", classify, code.INVALID_ARGUMENT),
    ]
    if oversized:
        calls.insert(-2, GrpcCall("grpc oversized", "Predict", predict_request("babi", "", {
            "story": np.zeros((rows, shapes.story_length, shapes.sentence_length), np.int32),
            "query": np.zeros((rows, shapes.query_length), np.int32)}), code.RESOURCE_EXHAUSTED))
    return calls


class Client:
    """Sends `RestCall`s and `GrpcCall`s to one server; one per thread (it keeps a keep-alive connection).

    Args:
        host: the server's address.
        grpc_port, rest_port: its ports.
        timeout: seconds per request.
    """

    def __init__(self, host, grpc_port, rest_port, timeout=30.0):
        from tensorflow_serving.apis import prediction_service_pb2_grpc

        self.host, self.rest_port, self.timeout = host, rest_port, timeout
        self._channel = grpc.insecure_channel(f"{host}:{grpc_port}",
                                              options=[("grpc.max_send_message_length", -1)])
        self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._kept = None
        self.stale_retries = 0  # requests resent because the server had closed an idle keep-alive connection

    def close(self):
        self._channel.close()
        if self._kept is not None:
            self._kept.close()

    def rest(self, call, keep_alive=True):
        """`(HTTP status, body bytes)`; a connection error is reported as status 0."""
        if call.raw is not None:
            return self._raw(call)
        reused = keep_alive and self._kept is not None
        if keep_alive:
            if self._kept is None:
                self._kept = http.client.HTTPConnection(self.host, self.rest_port, timeout=self.timeout)
            connection = self._kept
        else:
            connection = http.client.HTTPConnection(self.host, self.rest_port, timeout=self.timeout)
        try:
            connection.request(call.method, call.path, body=call.body,
                               headers={"Content-Type": "application/json"} if call.body is not None else {})
            response = connection.getresponse()
            body = response.read()
            if response.will_close or not keep_alive:
                connection.close()
                if keep_alive:
                    self._kept = None
            return response.status, body
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            if keep_alive:
                self._kept = None
            if reused and isinstance(error, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
                # The server closed the idle connection as this request went out (its keep-alive
                # timeout): HTTP clients such as urllib3 retry on a new connection, and so do we.
                self.stale_retries += 1
                return self.rest(call, keep_alive)
            return 0, repr(error).encode()

    def _raw(self, call):
        """Send `call.raw` on a fresh socket; the status of the first answer, and whether a second came."""
        with socket.create_connection((self.host, self.rest_port), timeout=self.timeout) as sock:
            sock.sendall(call.raw)
            data = b""
            deadline = time.monotonic() + self.timeout
            while b"\r\n\r\n" not in data and time.monotonic() < deadline:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            if not data.startswith(b"HTTP/1."):
                return 0, data
            status = int(data.split(b" ", 2)[1])
            # A smuggled request must not be answered: wait briefly for a second reply.
            sock.settimeout(0.3)
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            if data.count(b"HTTP/1.1 ") > 1:
                return -1, data  # two answers to one request: a desync
            return status, data

    def grpc(self, call):
        """The `grpc.StatusCode` of the call."""
        try:
            getattr(self._stub, call.method)(call.request, timeout=self.timeout)
            return grpc.StatusCode.OK
        except grpc.RpcError as error:
            return error.code()


def run_catalogue(client, shapes, max_json_bytes, max_request_bytes):
    """Send each bad kind once; `{kind: (expected, got)}` for the kinds answered otherwise than expected."""
    wrong = {}
    for call in bad_rest_calls(shapes, max_json_bytes):
        status, _ = client.rest(call, keep_alive=True)
        if status != call.expect:
            wrong[call.kind] = (call.expect, status)
    for call in bad_grpc_calls(shapes, max_request_bytes):
        code = client.grpc(call)
        if code != call.expect:
            wrong[call.kind] = (call.expect.name, code.name)
    return wrong


class LoadRecorder:
    """Thread-safe tallies of a soak: good latencies by path, codes per bad kind, failures."""

    def __init__(self):
        self._lock = threading.Lock()
        self.latencies = collections.defaultdict(list)  # "rest keep-alive" / "rest fresh" / "grpc" -> [(t, s)]
        self.codes = collections.defaultdict(collections.Counter)
        self.good_failures = []
        self.bad_5xx = collections.Counter()
        self.count = 0
        self.slowest = []  # a min-heap of the 10 slowest good requests: (seconds, started, path, detail)

    def good(self, path, started, seconds, ok, detail):
        with self._lock:
            self.count += 1
            self.latencies[path].append((started, seconds))
            if not ok:
                self.good_failures.append(detail)
            entry = (seconds, started, path, detail)
            if len(self.slowest) < 10:
                heapq.heappush(self.slowest, entry)
            elif entry > self.slowest[0]:
                heapq.heapreplace(self.slowest, entry)

    def since(self, began):
        """Every good request of every path as `(sent s after began, took s)`; `began` is a `time.perf_counter()`."""
        with self._lock:
            return [(started - began, seconds) for path in self.latencies for started, seconds in self.latencies[path]]

    def bad(self, kind, code, expected):
        with self._lock:
            self.count += 1
            self.codes[kind][str(code)] += 1
            if (isinstance(code, int) and (code >= 500 or code <= 0)) or code in ("INTERNAL", "UNKNOWN"):
                self.bad_5xx[kind] += 1


def load_worker(client, shapes, recorder, stop, seed, bad_fraction=0.4, max_json_bytes=16 << 20,
                max_request_bytes=64 << 20):
    """One thread of mixed load until `stop` is set: good and bad requests over gRPC and REST."""
    rng = random.Random(seed)
    good_rest, good_grpc = good_rest_calls(shapes), good_grpc_calls(shapes)
    bad_rest = [c for c in bad_rest_calls(shapes, max_json_bytes) if not c.kind.startswith("nested 100000")]
    # Not the oversized request: building it in every worker, as the load starts, stalled the other workers'
    # timed requests for up to a second (tens of MB copied with the GIL held) and counted against the server.
    bad_grpc = bad_grpc_calls(shapes, max_request_bytes, oversized=False)
    while not stop.is_set():
        bad = rng.random() < bad_fraction
        use_grpc = rng.random() < 0.5
        if bad and use_grpc:
            call = rng.choice(bad_grpc)
            recorder.bad(call.kind, client.grpc(call).name, call.expect.name)
        elif bad:
            call = rng.choice(bad_rest)
            status, _ = client.rest(call, keep_alive=rng.random() < 0.5)
            recorder.bad(call.kind, status, call.expect)
        elif use_grpc:
            call = rng.choice(good_grpc)
            started = time.perf_counter()
            code = client.grpc(call)
            recorder.good("grpc", started, time.perf_counter() - started, code == grpc.StatusCode.OK,
                          f"{call.kind}: {code.name}")
        else:
            call = rng.choice(good_rest)
            keep_alive = rng.random() < 0.5
            started = time.perf_counter()
            status, body = client.rest(call, keep_alive=keep_alive)
            recorder.good("rest keep-alive" if keep_alive else "rest fresh", started, time.perf_counter() - started,
                          status == 200, f"{call.kind}: {status} {body[:200]!r}")


def percentile(values, q):
    return float(np.percentile(values, q)) if len(values) else float("nan")


def sequential_latency(send, count=200):
    """p50 seconds of `count` back-to-back calls of `send()` (after 10 unmeasured ones)."""
    for _ in range(10):
        send()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        send()
        times.append(time.perf_counter() - started)
    return percentile(times, 50)

