"""One loaded SavedModel version: its signatures, their metadata, input checks and runs.

The server never imports the code that built a model: it loads the SavedModel
with `tf.saved_model.load` and calls its signatures, as TF Serving does.
"""

import logging
import pathlib
import time

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import message
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.util import deprecation

from keras_relmem.serving import tensors
from keras_relmem.serving.errors import ServingError, invalid

log = logging.getLogger("keras_relmem.serving")

WARMUP_FILE = ("assets.extra", "tf_serving_warmup_requests")
MAX_WARMUP_RECORDS = 1000  # TF Serving refuses files with more
# Rows one model call takes at most: a larger request runs as slices of this many (TF Serving's large-batch
# splitting). 4096 rows keep the quick start's EntNet under about 1 GB (`bench.serving --rows`).
MAX_ROWS_PER_CALL = 4096
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"


def _shape_text(shape):
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"



def select_outputs(outputs, output_filter):
    """`outputs` (`{alias: value}`) reduced to the aliases of `output_filter` (TF Serving's `output_filter`: all
    of them when it is empty), in its order."""
    return {alias: outputs[alias] for alias in output_filter} if output_filter else outputs

class Servable:
    """A SavedModel version ready to answer.

    Args:
        name: the model name it is served under.
        version: its integer version.
        path: the version directory (`<base_path>/<version>`).
        max_rows: rows one call of the model takes at most; a larger request
            runs as slices of this many rows whose outputs are joined (TF
            Serving's large-batch splitting), so one request's memory is
            bounded (`--max_rows_per_call`).

    Raises:
        Whatever loading raises (missing or corrupt files): the manager
        reports it and keeps the previous version serving.

    Example:

    ```python
    servable = Servable("babi", 1, "exports/babi/1")
    key, _ = servable.signature("answer")
    checked = servable.check_inputs(key, {"story": np.array([[b"Mary went home."]]),
                                          "question": np.array([b"Where is Mary?"])})
    outputs = servable.call(key, checked)
    ```
    """

    def __init__(self, name, version, path, max_rows=MAX_ROWS_PER_CALL):
        self.name = name
        self.version = int(version)
        self.path = str(path)
        self.max_rows = int(max_rows)
        file = pathlib.Path(path, "saved_model.pb")
        try:
            saved_model = saved_model_pb2.SavedModel.FromString(file.read_bytes())
        except message.DecodeError as error:
            raise ValueError(f"{file}: not a SavedModel ({error})") from None
        meta_graph = next((m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags),
                          saved_model.meta_graphs[0])
        self.signature_defs = {
            key: sig for key, sig in meta_graph.signature_def.items() if not key.startswith("__")
        }
        self._model = tf.saved_model.load(self.path, tags=["serve"])
        self._functions = dict(self._model.signatures)
        self.input_specs = {key: dict(function.structured_input_signature[1])
                            for key, function in self._functions.items()}

    def signature(self, signature_name):
        """The `SignatureDef` proto, or NOT_FOUND-style FAILED_PRECONDITION as TF Serving answers."""
        key = signature_name or "serving_default"
        if key not in self.signature_defs or key not in self._functions:
            raise ServingError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f'Serving signature name: "{key}" not found in signature def '
                f"(model {self.name} version {self.version} has: {', '.join(sorted(self.signature_defs))})",
            )
        return key, self.signature_defs[key]

    def check_inputs(self, signature_name, inputs, exact_dtypes=True):
        """Names, dtypes and shapes against the signature; returns the inputs as NumPy arrays.

        `exact_dtypes=False` (JSON, whose numbers carry no dtype) accepts
        numbers that fit the signature's dtype; gRPC's typed tensors must match.
        """
        key, _ = self.signature(signature_name)
        specs = self.input_specs[key]
        unknown = sorted(set(inputs) - set(specs))
        if unknown:
            raise invalid(
                f"input tensor alias not found in signature: {', '.join(unknown)}. "
                f"Inputs expected to be in the set {{{','.join(sorted(specs))}}}."
            )
        missing = sorted(set(specs) - set(inputs))
        if missing:
            raise invalid(
                f"Missing input: {', '.join(missing)}. Signature {key} expects "
                f"{{{','.join(sorted(specs))}}}."
            )
        checked = {}
        for alias, spec in specs.items():
            value = inputs[alias]
            checked[alias] = _check_tensor(alias, value, spec, exact_dtypes)
        return checked

    def warm_up(self):
        """Replay `assets.extra/tf_serving_warmup_requests` as TF Serving does; returns the count.

        Each record is a `PredictionLog` (predict, classify or regress); the
        version becomes AVAILABLE only after they ran, so its first real
        requests do not pay for graph optimisation. A record that fails makes
        the load fail (as in TF Serving): the previous version keeps serving.
        A version without the file is warmed with generated inputs instead
        (`warm_up_generated`), where TF Serving would not warm it at all.

        Raises:
            ValueError: naming the file and the record that failed.
        """
        from tensorflow_serving.apis import prediction_log_pb2

        path = pathlib.Path(self.path, *WARMUP_FILE)
        if not path.is_file():
            return self.warm_up_generated()
        count = 0
        # The record reader, not tf.data: building a dataset costs about 8 ms of a CPU per load.
        with deprecation.silence():
            records = tf.compat.v1.io.tf_record_iterator(str(path))
        try:
            for count, raw in enumerate(records, start=1):
                if count > MAX_WARMUP_RECORDS:
                    raise ValueError(f"{path}: more than {MAX_WARMUP_RECORDS} warm-up records")
                try:
                    self._replay(prediction_log_pb2.PredictionLog.FromString(raw))
                except (ServingError, ValueError, TypeError, message.DecodeError) as error:
                    raise ValueError(f"{path}: warm-up record {count} failed: {error}") from None
        except tf.errors.DataLossError as error:
            raise ValueError(f"{path}: warm-up record {count + 1} is damaged: {_first_line(error)}") from None
        return count

    def warm_up_generated(self):
        """Without warm-up records: call every signature once on inputs made from its input specs.

        Zeros for numbers and empty strings for text, one row (unknown sizes
        become 1), so the first real request does not pay for the version's
        graph optimisation and table initialisation (seconds on a CPU). A
        signature that refuses such inputs (a classify signature needing a
        feature) is skipped: they are guesses, not the model's own examples.

        Returns:
            How many signatures answered.
        """
        answered = 0
        for key, specs in self.input_specs.items():
            inputs = {alias: generated_input(spec) for alias, spec in specs.items()}
            try:
                self.call(key, self.check_inputs(key, inputs))
            except (ServingError, ValueError, TypeError) as error:
                log.info("warm-up of %s version %d: signature %s refused generated inputs (%s)",
                         self.name, self.version, key, error)
                continue
            answered += 1
        return answered

    def _replay(self, record):
        kind = record.WhichOneof("log_type")
        if kind == "predict_log":
            request = record.predict_log.request
            key, _ = self.signature(request.model_spec.signature_name)
            inputs = {alias: tensors.to_array(proto) for alias, proto in request.inputs.items()}
            self.call(key, self.check_inputs(key, inputs), tuple(request.output_filter))
        elif kind in ("classify_log", "regress_log"):
            request = getattr(record, kind).request
            key, signature_def = self.signature(request.model_spec.signature_name)
            examples = request.input.example_list.examples
            serialized = np.array([e.SerializeToString() for e in examples], dtype=object)
            (alias,) = signature_def.inputs.keys()
            self.call(key, self.check_inputs(key, {alias: serialized}))
        else:
            raise ValueError(f"warm-up of {kind or 'an empty log'} is not supported")

    def check_outputs(self, signature_name, output_filter):
        """Every requested output alias exists in the signature (INVALID_ARGUMENT otherwise)."""
        key, signature_def = self.signature(signature_name)
        unknown = sorted(set(output_filter) - set(signature_def.outputs))
        if unknown:
            raise invalid(
                f"output tensor alias not found in signature: {', '.join(unknown)}. "
                f"Outputs expected to be in the set {{{','.join(sorted(signature_def.outputs))}}}."
            )

    def call(self, key, checked, output_filter=(), deadline=None):
        """Run signature `key` on inputs `check_inputs` returned; `{output alias: np.ndarray}`.

        A request of more than `max_rows` rows runs as slices of at most that many (every input's first
        dimension is its rows), and the slices' outputs are joined; `deadline` (a `time.monotonic()`
        time) is checked before each slice, so work past it stops (DEADLINE_EXCEEDED). An out-of-memory
        in the model is RESOURCE_EXHAUSTED with TensorFlow's message, and logged.
        """
        rows = {np.shape(value)[0] if np.ndim(value) else None for value in checked.values()}
        (count,) = rows if len(rows) == 1 else (None,)
        if count is None or count <= self.max_rows:
            return self._call(key, checked, output_filter, deadline)
        parts = [self._call(key, {alias: value[start:start + self.max_rows] for alias, value in checked.items()},
                            output_filter, deadline)
                 for start in range(0, count, self.max_rows)]
        joined = {}
        for alias in parts[0]:
            if any(np.ndim(part[alias]) == 0 or len(part[alias]) != min(self.max_rows, count - i * self.max_rows)
                   for i, part in enumerate(parts)):
                raise ServingError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{key}: {count} rows are more than the {self.max_rows} one call takes, and output {alias} "
                    "has no row per input row to join slices by: send at most that many rows, or raise "
                    "--max_rows_per_call")
            joined[alias] = np.concatenate([part[alias] for part in parts])
        return joined

    def _call(self, key, checked, output_filter, deadline):
        if deadline is not None and time.monotonic() > deadline:
            raise ServingError(grpc.StatusCode.DEADLINE_EXCEEDED, f"{key}: Deadline Exceeded (its work was stopped)")
        try:
            specs = self.input_specs[key]
            tensors_in = {alias: tf.constant(value, dtype=specs[alias].dtype) for alias, value in checked.items()}
            outputs = self._functions[key](**tensors_in)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as error:
            raise invalid(f"{key}: {_first_line(error)}") from error
        except tf.errors.ResourceExhaustedError as error:
            log.error("%s version %d signature %s: out of memory: %s", self.name, self.version, key,
                      _first_line(error))
            raise ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"{key}: {_first_line(error)} (send fewer rows, or lower --max_rows_per_call)"
                               ) from error
        except tf.errors.OpError as error:
            raise ServingError(grpc.StatusCode.INTERNAL, f"{key}: {_first_line(error)}") from error
        names = output_filter or outputs.keys()
        return {alias: outputs[alias].numpy() for alias in names}


def generated_input(spec):
    """An input for `spec` (a `tf.TensorSpec`): zeros or empty strings, unknown sizes 1 (rank unknown: a scalar)."""
    shape = [] if spec.shape.rank is None else [1 if d is None else d for d in spec.shape.as_list()]
    if spec.dtype == tf.string:
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, dtype=spec.dtype.as_numpy_dtype)


def _first_line(error):
    """The line of a TF error that says what is wrong (not the graph-trace boilerplate)."""
    text = (getattr(error, "message", None) or str(error)).strip()
    useful = [
        line.strip() for line in text.splitlines()
        if line.strip()
        and not line.strip().startswith(("Graph execution error", "Detected at node", "File ", "[["))
    ]
    line = useful[-1] if useful else (text.splitlines()[0] if text else type(error).__name__)
    line = line.split("\t [[")[0].split(" [[")[0].strip()
    # an export's own check (tf.debugging.Assert): its message, without the op's wrapping
    if line.startswith("assertion failed: [") and "]" in line:
        line = line[len("assertion failed: ["):].split("]", 1)[0].replace("\\'", "'")
    return line


def _check_tensor(alias, value, spec, exact_dtypes=True):
    """One input against its `tf.TensorSpec`: dtype first (as TF Serving does), then shape."""
    value = np.asarray(value)
    dtype = spec.dtype
    if dtype == tf.string:
        if value.dtype.kind not in "SUO":
            raise invalid(f"Expects arg {alias} to be string but {value.dtype} is provided")
        try:
            if value.dtype.kind == "U":
                value = np.char.encode(value, "utf-8")
            elif value.dtype.kind == "O" and not all(type(item) is bytes for item in value.flat):
                # (gRPC's strings arrive as bytes already: only other items need converting.)
                value = np.vectorize(
                    lambda item: item.encode("utf-8") if isinstance(item, str) else bytes(item),
                    otypes=[object],
                )(value) if value.size else value.astype(object)
        except UnicodeEncodeError as error:
            # JSON's "\ud800" escapes decode to lone surrogates, which UTF-8 cannot hold.
            raise invalid(
                f"input {alias}: a string is not valid Unicode ({error.reason} at character {error.start})"
            ) from None
        except TypeError as error:
            raise invalid(f"input {alias}: expected strings ({error})") from error
    else:
        expected = np.dtype(dtype.as_numpy_dtype)
        if value.dtype != expected:
            if exact_dtypes or not _safe_cast(value, expected):
                raise invalid(
                    f"Expects arg {alias} to be {dtype.name} but {value.dtype} is provided"
                )
            value = value.astype(expected)
    shape = spec.shape
    if shape.rank is not None:
        if value.ndim != shape.rank or any(
            want is not None and want != got for want, got in zip(shape.as_list(), value.shape)
        ):
            raise invalid(
                f"input {alias} has shape {list(value.shape)}; the signature expects "
                f"{_shape_text(shape.as_list())}"
            )
    return value


def _safe_cast(value, expected):
    """JSON numbers arrive as int64/float64: accept them when they fit the signature's dtype."""
    if value.size == 0:
        return True
    if value.dtype.kind in "iub" and expected.kind in "iu":
        info = np.iinfo(expected)
        return bool(value.min() >= info.min and value.max() <= info.max)
    if value.dtype.kind in "iuf" and expected.kind == "f":
        return True
    if value.dtype.kind == "b" and expected.kind == "b":
        return True
    return False
