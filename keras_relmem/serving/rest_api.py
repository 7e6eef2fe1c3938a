"""TF Serving's REST API over a `ServingCore`, on aiohttp's HTTP server.

Routes (as TF Serving's):

- `GET  /v1/models/<name>[/versions/<v> | /labels/<l>]`: version status.
- `GET  /v1/models/<name>[/versions/<v> | /labels/<l>]/metadata`: signatures.
- `POST /v1/models/<name>[/versions/<v> | /labels/<l>]:predict`: the row
  (`"instances"`) or columnar (`"inputs"`) request forms; strings may be
  given as `{"b64": ...}`; answers `"predictions"` or `"outputs"`.
- `POST ...:classify` / `...:regress` with `{"examples": [...]}` for
  signatures with those methods; answers `{"results": ...}`.

Errors answer `{"error": message}` with the HTTP status TF Serving uses for
the gRPC code. With `--monitoring_config_file`, Prometheus metrics are served
at the configured path (see `keras_relmem.serving.metrics`).
"""

import asyncio
import base64
import concurrent.futures
import json
import logging
import os
import re
import threading

import grpc
import numpy as np
import prometheus_client
from aiohttp import web
from google.protobuf import json_format

from keras_relmem.serving.errors import ServingError, invalid
from keras_relmem.serving.event_loops import new_event_loop
from keras_relmem.serving.event_loops import resolve as resolve_event_loop
from keras_relmem.serving.metrics import RequestRecord

log = logging.getLogger("keras_relmem.serving")

# A batched answer with more values than this is encoded as JSON on a worker thread, not on the event loop.
_INLINE_OUTPUT_VALUES = 1 << 14

_ROUTE = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>\d+)|/labels/(?P<label>[^/:]+))?"
    r"(?:(?P<metadata>/metadata)|:(?P<verb>predict|classify|regress))?/?$"
)


def _decode_b64(value):
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (ValueError, TypeError) as error:
                raise invalid(f"cannot base64-decode {value['b64'][:40]!r}: {error}") from error
        raise invalid(f'unexpected object {json.dumps(value)[:80]}: only {{"b64": ...}} objects are allowed in values')
    if isinstance(value, list):
        return [_decode_b64(v) for v in value]
    return value


def _array(name, value):
    value = _decode_b64(value)
    try:
        array = np.array(value)
    except ValueError as error:
        raise invalid(f"input {name}: the lists are not rectangular ({error})") from error
    if array.dtype == object and array.size and not all(isinstance(v, (bytes, str)) for v in array.flat):
        raise invalid(f"input {name}: mixed value types")
    if array.dtype.kind == "S" or (array.dtype == object):
        array = array.astype(object)
    return array


def _jsonable(alias, array):
    if array.dtype == object or array.dtype.kind == "S":
        def convert(item):
            if alias.endswith("_bytes"):
                return {"b64": base64.b64encode(item).decode("ascii")}
            try:
                return item.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(item).decode("ascii")}

        converted = np.empty(array.size, dtype=object)
        converted[:] = [convert(item) for item in array.ravel().tolist()]
        return converted.reshape(array.shape).tolist()
    return array.tolist()


def parse_predict(body):
    """A REST predict body (parsed JSON) -> (signature_name, payload, row_format)."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object with \"instances\" or \"inputs\"")
    signature_name = body.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise invalid("signature_name must be a string")
    if ("instances" in body) == ("inputs" in body):
        raise invalid("give exactly one of \"instances\" (row format) or \"inputs\" (columnar format)")
    return signature_name, body.get("instances", body.get("inputs")), "instances" in body


def columns(payload, row_format, input_names):
    """The request's values as one array per input alias."""
    if row_format:
        if not isinstance(payload, list) or not payload:
            raise invalid("\"instances\" must be a non-empty list")
        if all(isinstance(row, dict) and not set(row) == {"b64"} for row in payload):
            names = set(payload[0])
            for index, row in enumerate(payload):
                if set(row) != names:
                    raise invalid(
                        f"instances[{index}] has inputs {sorted(row)}; instances[0] has {sorted(names)}"
                    )
            return {name: _array(name, [row[name] for row in payload]) for name in names}
        if len(input_names) != 1:
            raise invalid(
                f"instances must be objects naming the inputs {sorted(input_names)} "
                "(the signature has more than one input)"
            )
        (name,) = input_names
        return {name: _array(name, payload)}
    if isinstance(payload, dict) and set(payload) != {"b64"}:
        return {name: _array(name, value) for name, value in payload.items()}
    if len(input_names) != 1:
        raise invalid(f"\"inputs\" must be an object naming the inputs {sorted(input_names)}")
    (name,) = input_names
    return {name: _array(name, payload)}


def predict_response(outputs, row_format):
    if row_format:
        aliases = sorted(outputs)
        converted = {alias: _jsonable(alias, outputs[alias]) for alias in aliases}
        rows = {len(v) if isinstance(v, list) else None for v in converted.values()}
        if len(aliases) == 1:
            return {"predictions": converted[aliases[0]]}
        if len(rows) != 1 or None in rows:
            raise invalid("outputs do not share a batch size: use the columnar \"inputs\" form")
        count = rows.pop()
        return {"predictions": [{a: converted[a][i] for a in aliases} for i in range(count)]}
    if len(outputs) == 1:
        ((alias, value),) = outputs.items()
        return {"outputs": _jsonable(alias, value)}
    return {"outputs": {alias: _jsonable(alias, value) for alias, value in outputs.items()}}


def _example(index, features):
    """One JSON example (`{"name": value or list}`) as a `tf.train.Example`."""
    from tensorflow.core.example import example_pb2

    if not isinstance(features, dict):
        raise invalid(f"examples[{index}] must be an object of feature name -> value(s)")
    example = example_pb2.Example()
    for name, value in features.items():
        values = _decode_b64(value if isinstance(value, list) else [value])
        feature = example.features.feature[name]
        if all(isinstance(v, (bytes, str)) for v in values):
            try:
                feature.bytes_list.value.extend(v.encode("utf-8") if isinstance(v, str) else v for v in values)
            except UnicodeEncodeError as error:
                raise invalid(f"examples[{index}] feature {name}: a string is not valid Unicode "
                              f"({error.reason} at character {error.start})") from None
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            feature.int64_list.value.extend(values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            feature.float_list.value.extend(float(v) for v in values)
        else:
            raise invalid(f"examples[{index}] feature {name}: values must be all numbers or all strings")
    return example


def examples_call(core, match, body, record=None):
    """`:classify` / `:regress` with `{"signature_name", "examples": [...]}` as TF Serving's REST API."""
    from tensorflow_serving.apis import classification_pb2, regression_pb2

    from keras_relmem.serving.grpc_api import classify, regress

    if not isinstance(body, dict) or not isinstance(body.get("examples"), list) or not body["examples"]:
        raise invalid('the request body must be {"examples": [{feature: value, ...}, ...]}')
    if "context" in body:
        raise ServingError(grpc.StatusCode.UNIMPLEMENTED, "\"context\" (example_list_with_context) is not supported")
    kind = match["verb"]
    request = (classification_pb2.ClassificationRequest if kind == "classify" else regression_pb2.RegressionRequest)()
    request.model_spec.name = match["name"]
    if match["version"]:
        request.model_spec.version.value = int(match["version"])
    if match["label"]:
        request.model_spec.version_label = match["label"]
    signature_name = body.get("signature_name", "")
    if not isinstance(signature_name, str):
        raise invalid("signature_name must be a string")
    request.model_spec.signature_name = signature_name
    for index, features in enumerate(body["examples"]):
        request.input.example_list.examples.add().CopyFrom(_example(index, features))
    if kind == "regress":
        return {"results": [r.value for r in regress(core, request, record).result.regressions]}
    return {
        "results": [
            [[c.label, c.score] for c in result.classes]
            for result in classify(core, request, record).result.classifications
        ]
    }


def status_json(entries):
    return {
        "model_version_status": [
            {
                "version": str(version),
                "state": state,
                "status": {"error_code": "UNKNOWN" if error else "OK", "error_message": error},
            }
            for version, state, error in entries
        ]
    }


_OPEN, _CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def json_depth(raw):
    """How deeply a JSON text nests arrays and objects, read off the bytes without parsing them.

    Brackets inside strings do not count; a quote preceded by an odd run of
    backslashes is inside its string. NumPy makes this a few passes over the
    bytes, so a body can be refused before `json.loads` and the recursive
    conversions after it spend time (or stack) on it.

    Example:

    ```python
    >>> json_depth(b'{"instances": [[1, 2], [3, "[[["]]}')
    3

    ```
    """
    codes = np.frombuffer(raw, np.uint8)
    if not codes.size:
        return 0
    index = np.arange(codes.size)
    backslash = codes == ord("\\")
    # For each position, the index of the last byte that is not a backslash.
    last_plain = np.maximum.accumulate(np.where(backslash, -1, index))
    quotes = np.flatnonzero(codes == ord('"'))
    run = np.where(quotes > 0, (quotes - 1) - last_plain[np.maximum(quotes - 1, 0)], 0)
    real = quotes[run % 2 == 0]
    toggles = np.zeros(codes.size, np.int8)
    toggles[real] = 1
    in_string = np.cumsum(toggles, dtype=np.int64) % 2 == 1
    step = np.isin(codes, _OPEN).astype(np.int8) - np.isin(codes, _CLOSE).astype(np.int8)
    step[in_string] = 0
    return int(max(np.cumsum(step, dtype=np.int64).max(), 0))


class _OneLineDebug(logging.Filter):
    """aiohttp logs each malformed HTTP request (already answered 400) with a traceback: one debug line instead."""

    def filter(self, record):
        if not log.isEnabledFor(logging.DEBUG):
            return False
        error = record.exc_info[1] if record.exc_info else None
        record.msg, record.args = f"{record.getMessage()}: {error!r}".replace("\n", " "), ()
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


_http_log = logging.getLogger("keras_relmem.serving.http")
_http_log.addFilter(_OneLineDebug())


def _error_body(error):
    return {"error": error.message}


class RestServer:
    """TF Serving's REST API over a `ServingCore`, on aiohttp's HTTP server.

    aiohttp reads HTTP/1.1 properly where the standard library's server did
    not (an unread body is drained before the next request on a keep-alive
    connection, Nagle is off so keep-alive answers are not held back) and
    closes connections idle, or stuck in their headers, for `timeout`
    seconds. One event-loop thread holds every connection; model work runs on
    `num_threads` worker threads, and at most `max_queued` more requests wait
    for one (more get 503), so threads stay bounded whatever the load.

    Limits answered before parsing gets expensive: a body over
    `max_json_bytes` gets 413 without being read, JSON nested deeper than
    `max_json_depth` gets 400 without being parsed, a body not received
    within `timeout` gets 408, and an answer not ready within `timeout` gets
    504 (DEADLINE_EXCEEDED, as `--rest_api_timeout_in_ms`).

    Args:
        address: `(host, port)`; port 0 picks a free one (see `server_address`).
        core: the `ServingCore`.
        max_request_bytes: the server-wide request cap (`--max_request_bytes`);
            REST bodies are also capped at `max_json_bytes`, whichever is lower.
        max_json_bytes: largest JSON body accepted (default 16 MiB).
        max_json_depth: deepest nesting of JSON arrays/objects accepted.
        timeout: seconds for a request to arrive and be answered, and for an
            idle keep-alive connection to be closed.
        num_threads: worker threads for model work (default 4 per CPU, as
            `--rest_api_num_threads`).
        max_queued: requests allowed to wait for a worker (default 16 per thread).
        metrics: a `ServingMetrics` to count requests in, or None.
        metrics_path: the route serving `metrics` in Prometheus' format, or None.
        inline_max_bytes: a request body up to this size is answered on the
            event-loop thread, without the hand-off to a worker and back, when
            it is the only request in flight on the only open connection (a
            lone client, which waits for this answer anyway); 0 always hands
            off. Such a request is not cut off at `timeout`. With batching on,
            a `:predict` body up to this size also joins its batch from the
            event loop instead of holding a worker thread while it waits.
        event_loop: "auto", "uvloop" or "asyncio" (`event_loops.resolve`; ValueError for
            an unknown one or uvloop missing).

    Example:

    ```python
    rest = RestServer(("127.0.0.1", 8501), core, 64 << 20).start()
    ...
    rest.stop()
    ```
    """

    def __init__(self, address, core, max_request_bytes=64 << 20, *, max_json_bytes=16 << 20, max_json_depth=64,
                 timeout=30.0, num_threads=None, max_queued=None, metrics=None, metrics_path=None,
                 inline_max_bytes=64 << 10, event_loop="auto"):
        self.core = core
        self.event_loop = resolve_event_loop(event_loop)
        self.max_body_bytes = min(max_request_bytes, max_json_bytes)
        self.max_json_depth = max_json_depth
        self.timeout = timeout
        self.num_threads = num_threads or 4 * (os.cpu_count() or 1)
        self.max_queued = 16 * self.num_threads if max_queued is None else max_queued
        self.metrics = metrics
        self.metrics_path = metrics_path
        self._address = address
        self.server_address = None
        self._executor = concurrent.futures.ThreadPoolExecutor(self.num_threads, thread_name_prefix="rest-worker")
        self._loop = None
        self._thread = None
        self._runner = None
        self._slots = None
        self._server = None
        self._waiting = 0
        self._in_flight = 0
        self.inline_max_bytes = inline_max_bytes

    # Life cycle -------------------------------------------------------------

    def start(self):
        """Bind and serve on a background thread; returns self once the port is open.

        Raises:
            OSError: the address cannot be bound.
        """
        ready = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="rest", daemon=True)
        self._thread.start()
        self.server_address = ready.result()
        return self

    def _serve(self, ready):
        self._loop = new_event_loop(self.event_loop)
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._open(ready))
        except BaseException as error:  # report a failed bind to start()
            if not ready.done():
                ready.set_exception(error)
            return
        self._loop.run_forever()
        # Whatever is left (connections the cleanup did not wait for) is cancelled, not leaked.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _open(self, ready):
        self._slots = asyncio.Semaphore(self.num_threads)
        self._server = server = web.Server(
            self._handle,
            keepalive_timeout=self.timeout,
            # Bad HTTP (not JSON) is answered 400 by aiohttp; keep its log quiet.
            access_log=None,
            logger=_http_log,
            lingering_time=min(self.timeout, 10.0),
        )
        # In-flight requests get `timeout` to finish when the server stops.
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=self.timeout)
        await self._runner.setup()
        host, port = self._address
        site = web.TCPSite(self._runner, host, port, reuse_address=True, reuse_port=False)
        try:
            await site.start()
        except OSError as error:
            await self._runner.cleanup()
            raise OSError(f"cannot bind REST to {host}:{port}: {error}") from error
        ready.set_result(self._runner.addresses[0][:2])

    def stop(self):
        """Stop accepting, finish what is in flight (up to `timeout`), close every connection."""
        if self._loop is not None and self._loop.is_running():
            closing = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            try:
                closing.result(timeout=self.timeout + 5)
            except (concurrent.futures.TimeoutError, RuntimeError) as error:
                log.warning("REST shutdown did not finish cleanly: %r", error)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=self.timeout + 5)
        self._executor.shutdown(wait=False, cancel_futures=True)

    # Requests ---------------------------------------------------------------

    async def _handle(self, request):
        if self.metrics_path and request.path == self.metrics_path:
            if request.method != "GET":
                return self._json(405, {"error": f"{request.method} {self.metrics_path}: use GET"})
            body = await self._loop.run_in_executor(self._executor, self.metrics.exposition)
            return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
        match = _ROUTE.match(request.path)
        api = (match["verb"] or ("metadata" if match["metadata"] else "status")) if match else "unknown"
        record = RequestRecord("REST", api, self.metrics)
        if match:
            record.model = match["name"]
        phase = "reading the request"
        try:
            async with asyncio.timeout(self.timeout):
                if not match:
                    raise ServingError(
                        grpc.StatusCode.NOT_FOUND,
                        f"Malformed request: {request.method} {request.path_qs} (expected /v1/models/<name>"
                        "[/versions/<v>][/metadata|:predict])",
                    )
                if request.method == "POST":
                    raw = await self._read_body(request)
                    phase = "answering"
                    payload = await self._answer_post(match, raw, record)
                elif request.method == "GET":
                    phase = "answering"
                    payload = await self._run(self._get, match, record, size=0)
                else:
                    raise ServingError(grpc.StatusCode.UNIMPLEMENTED,
                                       f"{request.method} is not supported: use GET or POST", http_status=405)
            record.finish("OK")
            return self._json(200, payload)
        except ServingError as error:
            record.finish(error.code.name)
            return self._json(error.http_status, _error_body(error), close=error.close_connection)
        except TimeoutError:
            record.finish("DEADLINE_EXCEEDED")
            if phase == "reading the request":
                return self._json(408, {"error": f"the request body did not arrive within {self.timeout:g} s"},
                                  close=True)
            return self._json(504, {"error": f"Deadline Exceeded: no answer within {self.timeout:g} s "
                                             "(--rest_api_timeout_in_ms)"})
        except Exception as error:  # never let a request take the server down
            log.error("REST %s %s failed: %s: %s", request.method, request.path, type(error).__name__, error)
            log.debug("REST failure", exc_info=True)
            record.finish("INTERNAL")
            return self._json(500, {"error": f"{type(error).__name__}: {error}"})

    @staticmethod
    def _json(status, payload, close=False):
        response = web.Response(
            body=json.dumps(payload).encode("utf-8"), status=status, content_type="application/json"
        )
        if close:
            response.force_close()
        return response

    async def _read_body(self, request):
        """The body, refused with 411/413 before any of it is held when its size is wrong."""
        chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
        length = request.content_length
        if length is None and not chunked:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               "the request needs a Content-Length header (or chunked transfer encoding)",
                               http_status=411, close_connection=True)
        too_large = ServingError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"request of {length if length is not None else 'more than ' + str(self.max_body_bytes)} bytes is "
            f"larger than the server's maximum of {self.max_body_bytes} bytes for a REST body "
            "(--rest_api_max_json_bytes, --max_request_bytes)",
            http_status=413, close_connection=True,
        )
        if length is not None and length > self.max_body_bytes:
            raise too_large
        chunks, size = [], 0
        while True:
            chunk = await request.content.readany()
            if not chunk:
                break
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def _run(self, function, *args, size):
        """`function(*args)` on a worker thread (waiting for a free one, 503 when too many already wait), or
        here on the event loop's thread for a small request (`size` bytes) of a lone client."""
        small = self.inline_max_bytes > 0 and size <= self.inline_max_bytes
        if small and self._in_flight == 0 and len(self._server.connections) <= 1:
            # One connection and nothing running: no other request can wait behind this one, so it skips the
            # hand-off to a worker and back (two thread wake-ups; see docs/serving.md for what that saves).
            return function(*args)
        return await self._hand_off(function, *args)

    async def _hand_off(self, function, *args):
        """`function(*args)` on a worker thread, waiting for a free one (503 when too many already wait)."""
        if self._waiting >= self.max_queued:
            raise ServingError(grpc.StatusCode.UNAVAILABLE,
                               f"server busy: {self._waiting} requests are waiting for a worker")
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        self._in_flight += 1
        future = self._loop.run_in_executor(self._executor, function, *args)

        def done(_):  # the slot frees when the work ends, not when a timed-out caller stops waiting
            self._in_flight -= 1
            self._slots.release()

        future.add_done_callback(done)
        return await asyncio.shield(future)

    def _get(self, match, record):
        if match["verb"]:
            raise invalid(f"{match['verb']} needs POST")
        core = self.core
        name, version, label = match["name"], match["version"], match["label"]
        if match["metadata"]:
            servable, signature_map = core.metadata(name, version, label)
            record.served_by(servable, "")
            return {
                "model_spec": {"name": servable.name, "signature_name": "", "version": str(servable.version)},
                "metadata": {
                    "signature_def": json_format.MessageToDict(signature_map, preserving_proto_field_name=True)
                },
            }
        if label:
            version = core.manager.get(name, None, label).version
        return status_json(core.manager.status(name, version))

    async def _answer_post(self, match, raw, record):
        """A POST's answer. With batching on, a small `:predict` joins its batch from the event loop (parsed and
        checked here, then awaited while the batch forms on the batcher's thread), so concurrent clients do not
        each hold a worker thread that waits for the batch; anything else runs as `_run` decides."""
        batchable = (self.core is not None and self.core.batching and match["verb"] == "predict"
                     and 0 < self.inline_max_bytes and len(raw) <= self.inline_max_bytes)
        if not batchable:
            return await self._run(self._post, match, raw, record, size=len(raw))
        servable, key, inputs, row_format = self._predict_inputs(match, self._parse_body(match, raw), record)
        key, checked, future = self.core.batch_future(servable, key, inputs, exact_dtypes=False, loop=self._loop)
        if future is None:  # a request that runs alone (larger than a batch): on a worker like any other

            def alone():
                return predict_response(servable.call(key, checked), row_format)

            return await self._hand_off(alone)
        # Shielded: a request that times out leaves its rows to the batch rather than cancelling them.
        outputs = await asyncio.shield(future)
        if sum(np.size(value) for value in outputs.values()) > _INLINE_OUTPUT_VALUES:
            return await self._hand_off(predict_response, outputs, row_format)  # big JSON: not on the loop
        return predict_response(outputs, row_format)

    def _parse_body(self, match, raw):
        """The POST body as JSON, refused (400) when nested deeper than `max_json_depth` or malformed."""
        if not match["verb"]:
            raise invalid(f"POST {match.string}: add :predict, :classify or :regress")
        # A text cannot nest deeper than it has opening brackets: the exact scan only when that bound is over.
        depth = json_depth(raw) if raw.count(b"[") + raw.count(b"{") > self.max_json_depth else 0
        if depth > self.max_json_depth:
            raise invalid(f"JSON Parse error: nested too deeply ({depth} levels; at most {self.max_json_depth})")
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise invalid(f"JSON Parse error: {error}") from error
        except RecursionError:
            raise invalid("JSON Parse error: nested too deeply") from None

    def _predict_inputs(self, match, body, record):
        """`(servable, signature key, inputs, row_format)` of a parsed `:predict` body."""
        signature_name, payload, row_format = parse_predict(body)
        servable = self.core.manager.get(match["name"], match["version"], match["label"])
        key, _ = servable.signature(signature_name)
        record.served_by(servable, key)
        return servable, key, columns(payload, row_format, list(servable.input_specs[key])), row_format

    def _post(self, match, raw, record):
        body = self._parse_body(match, raw)
        if match["verb"] in ("classify", "regress"):
            return examples_call(self.core, match, body, record)
        servable, key, inputs, row_format = self._predict_inputs(match, body, record)
        _, _, outputs = self.core.predict_on(servable, key, inputs, exact_dtypes=False)
        return predict_response(outputs, row_format)
