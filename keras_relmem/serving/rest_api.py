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
import json
import logging
import re

import grpc
import numpy as np
import prometheus_client
from aiohttp import web
from google.protobuf import json_format

from keras_relmem.serving.errors import ServingError, invalid
from keras_relmem.serving.metrics import RequestRecord

log = logging.getLogger("keras_relmem.serving")

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
    if array.dtype.kind == "S" or (array.dtype == object) or array.size == 0:
        # an empty list has no type of its own in JSON: it takes the signature's (a story with no sentences)
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
    if "output_filter" in body:
        raise invalid("output_filter is a field of gRPC's PredictRequest; the REST API returns every output of the "
                      "signature, as TF Serving's does: pick the outputs from the response, or use gRPC")
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


async def examples_call(core, match, body, record=None):
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
        return {"results": [r.value for r in (await regress(core, request, record)).result.regressions]}
    return {
        "results": [
            [[c.label, c.score] for c in result.classes]
            for result in (await classify(core, request, record)).result.classifications
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
    """TF Serving's REST API over a `ServingCore`, on aiohttp's HTTP server, on the server's event loop.

    aiohttp reads HTTP/1.1 properly (an unread body is drained before the
    next request on a keep-alive connection) and closes connections idle, or
    stuck in their headers, for `timeout` seconds. Model work runs through the
    core (its worker threads, or a batch), so threads stay bounded whatever
    the load.

    Limits answered before parsing gets expensive: a body over
    `max_json_bytes` gets 413 without being read, JSON nested deeper than
    `max_json_depth` gets 400 without being parsed, a body not received
    within `timeout` gets 408, and an answer not ready within `timeout` gets
    504 (DEADLINE_EXCEEDED, as `--rest_api_timeout_in_ms`) and its work
    stops (not started, or between its slices; `Servable.call`).

    Args:
        address: `(host, port)`; port 0 picks a free one (see `server_address`).
        core: the `ServingCore`.
        max_request_bytes: the server-wide request cap (`--max_request_bytes`);
            REST bodies are also capped at `max_json_bytes`, whichever is lower.
        max_json_bytes: largest JSON body accepted (default 16 MiB).
        max_json_depth: deepest nesting of JSON arrays/objects accepted.
        timeout: seconds for a request to arrive and be answered, and for an
            idle keep-alive connection to be closed.
        metrics: a `ServingMetrics` to count requests in, or None.
        metrics_path: the route serving `metrics` in Prometheus' format, or None.

    Example:

    ```python
    rest = RestServer(("127.0.0.1", 8501), core, 64 << 20)
    await rest.open()       # on the server's event loop
    ...
    await rest.close()
    ```
    """

    def __init__(self, address, core, max_request_bytes=64 << 20, *, max_json_bytes=16 << 20, max_json_depth=64,
                 timeout=30.0, metrics=None, metrics_path=None):
        self.core = core
        self.max_body_bytes = min(max_request_bytes, max_json_bytes)
        self.max_json_depth = max_json_depth
        self.timeout = timeout
        self.metrics = metrics
        self.metrics_path = metrics_path
        self._address = address
        self.server_address = None
        self._runner = None

    async def open(self):
        """Bind and serve; returns self once the port is open (OSError when it cannot be bound)."""
        server = web.Server(
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
        self.server_address = self._runner.addresses[0][:2]
        return self

    async def close(self):
        """Stop accepting, finish what is in flight (up to `timeout`), close every connection."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request):
        if self.metrics_path and request.path == self.metrics_path:
            if request.method != "GET":
                return self._json(405, {"error": f"{request.method} {self.metrics_path}: use GET"})
            body = await self.core.run(self.metrics.exposition)
            return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
        match = _ROUTE.match(request.path)
        api = (match["verb"] or ("metadata" if match["metadata"] else "status")) if match else "unknown"
        record = RequestRecord("REST", api, self.metrics)
        if match:
            record.model = match["name"]
        phase = "reading the request"
        deadline = asyncio.get_running_loop().time() + self.timeout
        try:
            async with asyncio.timeout_at(deadline):
                if not match:
                    raise ServingError(
                        grpc.StatusCode.NOT_FOUND,
                        f"Malformed request: {request.method} {request.path_qs} (expected /v1/models/<name>"
                        "[/versions/<v>][/metadata|:predict])",
                    )
                if request.method == "POST":
                    raw = await self._read_body(request)
                    phase = "answering"
                    payload = await self._post(match, raw, record, deadline)
                elif request.method == "GET":
                    phase = "answering"
                    payload = self._get(match, record)
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
                                             "(--rest_api_timeout_in_ms); its work was stopped"})
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

    async def _post(self, match, raw, record, deadline):
        # Parsing JSON and making arrays of it take time in proportion to the body: on a worker, not the loop.
        body = await self.core.run(self._parse_body, match, raw)
        if match["verb"] in ("classify", "regress"):
            return await examples_call(self.core, match, body, record)
        signature_name, payload, row_format = parse_predict(body)
        servable = self.core.manager.get(match["name"], match["version"], match["label"])
        key, _ = servable.signature(signature_name)
        record.served_by(servable, key)
        inputs = await self.core.run(columns, payload, row_format, list(servable.input_specs[key]))
        outputs = await self.core.predict(servable, key, inputs, exact_dtypes=False,
                                          timeout=deadline - asyncio.get_running_loop().time())
        return await self.core.run(predict_response, outputs, row_format)
