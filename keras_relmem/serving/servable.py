"""One loaded SavedModel version: its signatures, their metadata, input checks and runs.

The server never imports the code that built a model: it loads the SavedModel
with `tf.saved_model.load` and calls its signatures, as TF Serving does.
"""

import copy
import logging
import pathlib

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import message
from tensorflow.python.util import deprecation

from keras_relmem.serving import reuse, saved_model_file, tensors
from keras_relmem.serving.errors import ServingError, invalid
from keras_relmem.serving.in_graph import InGraphPredict

log = logging.getLogger("keras_relmem.serving")

WARMUP_FILE = ("assets.extra", "tf_serving_warmup_requests")
MAX_WARMUP_RECORDS = 1000  # TF Serving refuses files with more
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
        flat_call: call signatures as their graph functions (`FlatCall`, the
            default) rather than by keyword; both answer the same.
        donors: served versions of the same model, newest first. When one
            has the same program (signatures, graph functions, tables and
            constants; `keras_relmem.serving.reuse`), this version runs on
            its graph functions with its own variables instead of being
            loaded in full; `reused_version` then says which one.
        load_in_full: False raises `reuse.NotReusable` where no donor
            serves, instead of loading the version in full.
        predict_in_graph: also build each flat signature's gRPC Predict as
            one graph call (`in_graph`, the default; `predict_in_graph`
            answers with it). A version built on a donor's graph functions
            has it when the donor does.

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

    def __init__(self, name, version, path, flat_call=True, donors=(), load_in_full=True, predict_in_graph=True):
        self.name = name
        self.version = int(version)
        self.path = str(path)
        meta_graph, functions = saved_model_file.read_serve_graph(path)
        self.program = reuse.Program(path, meta_graph, functions)
        self.signature_defs = {
            key: sig for key, sig in meta_graph.signature_def.items() if not key.startswith("__")
        }
        self.reused_version = None
        for donor in donors:
            try:
                self._run_on(donor)
            except reuse.NotReusable as why:
                log.info("Version %d of %s does not reuse version %d's graph functions: %s",
                         self.version, name, donor.version, why)
                continue
            except Exception as error:  # a SavedModel the checks do not expect: a full load still serves it
                log.warning("Version %d of %s could not be checked against version %d: %s: %s",
                            self.version, name, donor.version, type(error).__name__, _first_line(error))
                continue
            self.reused_version = donor.version
            return
        if not load_in_full:
            raise reuse.NotReusable(f"no served version of {name} has version {self.version}'s program")
        self._model = tf.saved_model.load(self.path, tags=["serve"])
        self._functions = dict(self._model.signatures)
        self.input_specs = {}
        self._flat_calls = {}
        for key, function in self._functions.items():
            _, kwargs = function.structured_input_signature
            self.input_specs[key] = dict(kwargs)
            self._flat_calls[key] = FlatCall.of(function) if flat_call else None
            if predict_in_graph and self._flat_calls[key] is not None:
                self._flat_calls[key].in_graph = _in_graph_predict(self._flat_calls[key], self.input_specs[key])
        self.program.prepare(self._functions)

    def _run_on(self, donor):
        """Serve this version with `donor`'s graph functions and this version's variables (`reuse`).

        Raises:
            reuse.NotReusable: when anything but the variables' values differs.
        """
        if any(flat is None for flat in donor._flat_calls.values()):
            raise reuse.NotReusable("the served version's signatures are called by keyword")
        captures, self._variables = reuse.reused_captures(
            self.program, donor.program, {key: flat.captures for key, flat in donor._flat_calls.items()})
        # The first full load owns the functions and the shared tables: keep it alive, not the donor.
        self._model = donor._model
        # Names only: the donor's keyword signatures would compute with the donor's variables.
        self._functions = dict.fromkeys(donor._functions)
        self.input_specs = donor.input_specs
        self._flat_calls = {key: flat.with_captures(captures[key]) for key, flat in donor._flat_calls.items()}

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
        self.warm_up_in_graph()
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
        self.warm_up_in_graph()
        return answered

    def warm_up_in_graph(self):
        """Call each signature's in-graph Predict once on generated inputs: its first call optimises its graph
        (as long as the signature's own first call), which must not fall on a request. A call the model
        refuses still did that."""
        from tensorflow_serving.apis import predict_pb2

        for key, flat in self._flat_calls.items():
            if flat is None or flat.in_graph is None:
                continue
            request = predict_pb2.PredictRequest()
            for alias, spec in self.input_specs[key].items():
                tensors.fill_proto(request.inputs[alias], generated_input(spec))
            try:
                flat.in_graph(request, flat.captures)
            except tf.errors.OpError as error:
                log.info("warm-up of %s version %d: signature %s's in-graph Predict refused generated inputs (%s)",
                         self.name, self.version, key, _first_line(error))

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

    def predict_in_graph(self, key, request, output_filter=()):
        """`{output alias: serialized TensorProto}` of a `PredictRequest` answered in one graph call (`in_graph`),
        or None when it is not: the signature has no in-graph Predict, the request's inputs are not what the
        signature takes, or the model refused them. The caller then answers it the Python way (`check_inputs`,
        `call`), which says what is wrong. `output_filter` must have passed `check_outputs`.
        """
        flat = self._flat_calls.get(key)
        in_graph = flat.in_graph if flat is not None else None
        if in_graph is None or not in_graph.accepts(request):
            return None
        try:
            outputs = in_graph(request, flat.captures)
        except tf.errors.OpError:
            return None
        return select_outputs(outputs, output_filter)

    def call(self, key, checked, output_filter=()):
        """Run signature `key` on inputs `check_inputs` returned; `{output alias: np.ndarray}`."""
        flat_call = self._flat_calls[key]
        try:
            # Tensors, not arrays: the signature's own conversion of NumPy inputs costs more.
            specs = self.input_specs[key]
            tensors_in = {alias: tf.constant(value, dtype=specs[alias].dtype) for alias, value in checked.items()}
            outputs = flat_call(tensors_in) if flat_call is not None else self._functions[key](**tensors_in)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as error:
            raise invalid(f"{key}: {_first_line(error)}") from error
        except tf.errors.OpError as error:
            raise ServingError(grpc.StatusCode.INTERNAL, f"{key}: {_first_line(error)}") from error
        names = output_filter or outputs.keys()
        return {alias: outputs[alias].numpy() for alias in names}


class FlatCall:
    """A signature called as its graph function: tensors in a fixed order, a list of tensors out.

    Calling a signature by keyword (`signature(story=..., question=...)`)
    binds the keywords to its function type, gathers the captured variables,
    checks for a gradient tape and packs the outputs into a dict: about 0.1 ms
    of Python per call on a CPU, an eighth of a small model's own time. A
    server has already checked names, dtypes and shapes (`check_inputs`), so
    it calls the graph function under the signature directly with the inputs
    in the graph's order and the captures gathered once at load, which is
    what the keyword call does after its checks.

    Args:
        function: the signature (a concrete function of a loaded SavedModel).
        input_aliases: the input names in the graph function's argument order.
        output_aliases: the output names in the order the graph function returns them.

    Example:

    ```python
    flat = FlatCall.of(tf.saved_model.load(path).signatures["answer"])
    outputs = flat({"story": tf.constant([["Mary went home."]]), "question": tf.constant(["Where is Mary?"])})
    ```
    """

    def __init__(self, function, input_aliases, output_aliases):
        self.graph_function = function.inference_fn
        # Resource handles of the model's variables: they live as long as the loaded model does.
        self.captures = list(function.captured_inputs)
        self.input_aliases = tuple(input_aliases)
        self.output_aliases = tuple(output_aliases)
        self.in_graph = None  # the signature's `InGraphPredict`, when the servable builds one

    @classmethod
    def of(cls, function):
        """The flat call of `function`, or None when its inputs or outputs are not plain named tensors (the
        keyword call then serves it)."""
        try:
            args, kwargs = function.structured_input_signature
            specs = tf.nest.flatten(kwargs)  # a dict flattens in sorted key order, as the graph's arguments
            placeholders = [t.name.split(":")[0] for t in function.inputs[:len(specs)]]
            count = len(function.inference_fn.function_type.flat_outputs)
            # Where each output alias sits in the returned list, as the keyword call packs it.
            positions = function.function_type.pack_output(list(range(count)))
        except (AttributeError, TypeError, ValueError):
            return None
        aliases = sorted(kwargs)
        plain = (not args and all(isinstance(spec, tf.TensorSpec) for spec in specs)
                 and [spec.name for spec in specs] == aliases == placeholders
                 and isinstance(positions, dict) and sorted(positions.values()) == list(range(count)))
        if not plain:
            return None
        return cls(function, aliases, sorted(positions, key=positions.get))

    def with_captures(self, captures):
        """The same graph function called with other captures (another version's variables, in the same order)."""
        flat = copy.copy(self)
        flat.captures = list(captures)
        return flat

    def __call__(self, tensors_in):
        """`{output alias: tf.Tensor}` for `{input alias: tf.Tensor}` (every alias, dtypes as the signature's)."""
        flat = self.graph_function.call_flat(*[tensors_in[alias] for alias in self.input_aliases],
                                              *self.captures)
        return dict(zip(self.output_aliases, flat))


def _in_graph_predict(flat, input_specs):
    """The signature's `InGraphPredict`, or None (logged) when it cannot be built: the Python path serves it."""
    try:
        return InGraphPredict(flat, input_specs)
    except Exception as error:  # an optimisation only: whatever tracing raises, the version still loads
        log.info("The signature with inputs %s is answered in Python only: %s", ", ".join(flat.input_aliases),
                 _first_line(error))
        return None


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
    return line.split("\t [[")[0].split(" [[")[0].strip()


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
