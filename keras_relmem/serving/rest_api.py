"""TF Serving's REST API over a `ServingCore`, on the standard library's threaded HTTP server.

Routes (as TF Serving's):

- `GET  /v1/models/<name>[/versions/<v> | /labels/<l>]`: version status.
- `GET  /v1/models/<name>[/versions/<v> | /labels/<l>]/metadata`: signatures.
- `POST /v1/models/<name>[/versions/<v> | /labels/<l>]:predict`: the row
  (`"instances"`) or columnar (`"inputs"`) request forms; strings may be
  given as `{"b64": ...}`; answers `"predictions"` or `"outputs"`.
- `POST ...:classify` / `...:regress` with `{"examples": [...]}` for
  signatures with those methods; answers `{"results": ...}`.

Errors answer `{"error": message}` with the HTTP status TF Serving uses for
the gRPC code.
"""

import base64
import http.server
import json
import logging
import re

import grpc
import numpy as np
from google.protobuf import json_format

from keras_relmem.serving.errors import ServingError, invalid

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

        return np.vectorize(convert, otypes=[object])(array).tolist() if array.size else array.tolist()
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
            feature.bytes_list.value.extend(v.encode("utf-8") if isinstance(v, str) else v for v in values)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            feature.int64_list.value.extend(values)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            feature.float_list.value.extend(float(v) for v in values)
        else:
            raise invalid(f"examples[{index}] feature {name}: values must be all numbers or all strings")
    return example


def examples_call(core, match, body):
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
    request.model_spec.signature_name = body.get("signature_name", "")
    for index, features in enumerate(body["examples"]):
        request.input.example_list.examples.add().CopyFrom(_example(index, features))
    if kind == "regress":
        return {"results": [r.value for r in regress(core, request).result.regressions]}
    return {
        "results": [
            [[c.label, c.score] for c in result.classes]
            for result in classify(core, request).result.classifications
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


class RestHandler(http.server.BaseHTTPRequestHandler):
    """One HTTP request; `server.core` and `server.max_request_bytes` come from `RestServer`."""

    protocol_version = "HTTP/1.1"
    server_version = "keras-relmem-serving"

    def log_message(self, format, *args):  # route through logging, not stderr
        log.debug("%s - %s", self.address_string(), format % args)

    def _send(self, status, payload):
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _route(self):
        match = _ROUTE.match(self.path.split("?", 1)[0])
        if not match:
            raise ServingError(
                grpc.StatusCode.NOT_FOUND,
                f"Malformed request: {self.command} {self.path} (expected /v1/models/<name>"
                "[/versions/<v>][/metadata|:predict])",
            )
        return match

    def _handle(self, action):
        try:
            self._send(200, action())
        except ServingError as error:
            self._send(error.http_status, {"error": error.message})
        except Exception as error:  # never let a request take the server down
            log.exception("REST %s %s failed", self.command, self.path)
            self._send(500, {"error": f"{type(error).__name__}: {error}"})

    def do_GET(self):
        def action():
            match = self._route()
            if match["verb"]:
                raise invalid(f"{match['verb']} needs POST")
            core = self.server.core
            name, version, label = match["name"], match["version"], match["label"]
            if match["metadata"]:
                servable, signature_map = core.metadata(name, version, label)
                return {
                    "model_spec": {"name": servable.name, "signature_name": "", "version": str(servable.version)},
                    "metadata": {
                        "signature_def": json_format.MessageToDict(
                            signature_map, preserving_proto_field_name=True
                        )
                    },
                }
            if label:
                version = core.manager.get(name, None, label).version
            return status_json(core.manager.status(name, version))

        self._handle(action)

    def do_POST(self):
        def action():
            match = self._route()
            header = self.headers.get("Content-Length")
            if header is None:
                self.close_connection = True
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   "the request needs a Content-Length header (chunked bodies are not read)",
                                   http_status=411)
            try:
                length = int(header)
                if length < 0:
                    raise ValueError(header)
            except ValueError:
                self.close_connection = True
                raise invalid(f"Content-Length {header!r} is not a byte count") from None
            if length > self.server.max_request_bytes:
                # Drain the body in chunks (never held in memory) so the
                # client can read the answer, then close the connection.
                remaining = length
                while remaining > 0:
                    chunk = self.rfile.read(min(remaining, 1 << 20))
                    if not chunk:
                        break
                    remaining -= len(chunk)
                self.close_connection = True
                raise ServingError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"request of {length} bytes is larger than the server's maximum of "
                    f"{self.server.max_request_bytes} bytes (--max_request_bytes)",
                    http_status=413,
                )
            raw = self.rfile.read(length)
            if not match["verb"]:
                raise invalid(f"POST {self.path}: add :predict, :classify or :regress")
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise invalid(f"JSON Parse error: {error}") from error
            except RecursionError:
                raise invalid("JSON Parse error: nested too deeply") from None
            core = self.server.core
            if match["verb"] in ("classify", "regress"):
                return examples_call(core, match, body)
            signature_name, payload, row_format = parse_predict(body)
            servable = core.manager.get(match["name"], match["version"], match["label"])
            key, _ = servable.signature(signature_name)
            inputs = columns(payload, row_format, list(servable.input_specs[key]))
            _, _, outputs = core.predict_on(servable, key, inputs, exact_dtypes=False)
            return predict_response(outputs, row_format)

        self._handle(action)


class RestServer(http.server.ThreadingHTTPServer):
    """The REST front end (one thread per connection).

    Args:
        address: `(host, port)`.
        core: the `ServingCore`.
        max_request_bytes: larger bodies are refused with 413.

    Example:

    ```python
    rest = RestServer(("127.0.0.1", 8501), core, 64 << 20)
    threading.Thread(target=rest.serve_forever, daemon=True).start()
    ```
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, core, max_request_bytes):
        super().__init__(address, RestHandler)
        self.core = core
        self.max_request_bytes = max_request_bytes
