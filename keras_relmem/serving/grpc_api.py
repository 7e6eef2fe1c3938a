"""TF Serving's gRPC services (PredictionService, ModelService) over a `ServingCore`.

The request and response messages are the official ones from
`tensorflow-serving-api`, so TF Serving's own clients work unchanged.
"""

import functools
import inspect
import logging

import grpc
import numpy as np
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from keras_relmem.serving import tensors
from keras_relmem.serving.batching import ExecutorLoop
from keras_relmem.serving.errors import ServingError, invalid
from keras_relmem.serving.metrics import RequestRecord
from keras_relmem.serving.servable import CLASSIFY_METHOD, REGRESS_METHOD, select_outputs

log = logging.getLogger("keras_relmem.serving")

# tensorflow.error.Code values used in ModelVersionStatus.status.
_OK, _UNKNOWN = 0, 2


def _spec(model_spec):
    """(name, version or None, label or None, signature_name) of a ModelSpec."""
    version = model_spec.version.value if model_spec.HasField("version") else None
    label = model_spec.version_label or None
    if not model_spec.name:
        raise invalid("model_spec.name is empty: name the model to use")
    return model_spec.name, version, label, model_spec.signature_name


def _started(service, api, request):
    """The `RequestRecord` of a call of `api` on `service` (a servicer with a `core`)."""
    record = RequestRecord("GRPC", api, getattr(service.core, "metrics", None))
    spec = getattr(request, "model_spec", None)
    record.model = spec.name if spec is not None else None
    return record


def _failed(name, record, error):
    """`(status code, message)` of a failed call of method `name`, counted and (unless the request's fault)
    logged."""
    if isinstance(error, ServingError):
        record.finish(error.code.name)
        return error.code, error.message
    log.error("%s failed: %s: %s", name, type(error).__name__, error)
    log.debug("%s failure", name, exc_info=True)
    record.finish("INTERNAL")
    return grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}"


def _guarded(api):
    """Turn every failure into a gRPC status (a request can never take the server down) and count it.

    The method gets a `RequestRecord` as its third argument, to say which
    servable and signature answered. A coroutine method (asyncio's server)
    gets a coroutine wrapper, which awaits the abort as that server wants.
    """

    def decorate(method):
        if inspect.iscoroutinefunction(method):
            @functools.wraps(method)
            async def wrapper(self, request, context):
                record = _started(self, api, request)
                try:
                    response = await method(self, request, context, record)
                except Exception as error:  # the server must survive anything a request triggers
                    await context.abort(*_failed(method.__name__, record, error))
                record.finish("OK")
                return response
        else:
            @functools.wraps(method)
            def wrapper(self, request, context):
                record = _started(self, api, request)
                try:
                    response = method(self, request, context, record)
                except Exception as error:  # the server must survive anything a request triggers
                    context.abort(*_failed(method.__name__, record, error))
                record.finish("OK")
                return response

        return wrapper

    return decorate


def _respond(name, record, respond, make):
    """`respond(OK, "", make())`, or `respond` with the status of `make`'s failure (counted in `record`): the end
    of a call of method `name` answered later (`Deferrable`)."""
    try:
        response = make()
    except Exception as error:  # the server must survive anything a request triggers
        respond(*_failed(name, record, error), None)
        return
    record.finish("OK")
    respond(grpc.StatusCode.OK, "", response)


class Deferrable:
    """A unary gRPC method that a server may also call to answer later: `later(request, respond)` returns at once
    and calls `respond(code, details, response)` once, from any thread, when the answer is ready.

    grpc's servers call it as the method it wraps (`method(request, context)`); the native front end
    (`grpc_native.NativeGrpcServer`) calls `later`, so a request waiting for its batch holds no thread.

    Args:
        method: the method, as grpc's servers call it.
        later: `(request, respond) -> None`.

    Example:

    ```python
    service.Predict = Deferrable(service.Predict, service.predict_later)
    service.Predict.later(request, lambda code, details, response: print(code, response))
    ```
    """

    def __init__(self, method, later):
        self._method = method
        self.later = later
        functools.update_wrapper(self, method)

    def __call__(self, request, context):
        return self._method(request, context)


def _to_array(name, proto):
    try:
        return tensors.to_array(proto)
    except Exception as error:
        raise invalid(f"input {name}: cannot read the TensorProto ({error})") from error


def _fill_spec(target, servable, signature_name):
    target.name = servable.name
    target.version.value = servable.version
    if signature_name is not None:
        target.signature_name = signature_name


def predict_inputs(core, request, record):
    """`(servable, signature key, {alias: np.ndarray})` of a `PredictRequest`, recorded as served by them."""
    name, version, label, signature_name = _spec(request.model_spec)
    inputs = {alias: _to_array(alias, proto) for alias, proto in request.inputs.items()}
    servable = core.manager.get(name, version, label)
    key, _ = servable.signature(signature_name)
    record.served_by(servable, key)
    return servable, key, inputs


def predict_in_graph(core, request, record):
    """The `PredictResponse` of a request answered in one graph call (`Servable.predict_in_graph`), or None when
    it must go the Python way (`predict_inputs`). Only unbatched: a batch merges requests in Python."""
    name, version, label, signature_name = _spec(request.model_spec)
    servable = core.manager.get(name, version, label)
    key, _ = servable.signature(signature_name)
    output_filter = tuple(request.output_filter)
    servable.check_outputs(key, output_filter)
    in_graph = getattr(servable, "predict_in_graph", None)  # (a stand-in servable may have none)
    outputs = in_graph(key, request, output_filter) if in_graph is not None else None
    if outputs is None:
        return None
    record.served_by(servable, key)
    response = predict_pb2.PredictResponse()
    _fill_spec(response.model_spec, servable, key)
    for alias, serialized in outputs.items():
        response.outputs[alias].ParseFromString(serialized)
    return response


def predict_response(servable, key, outputs):
    """The `PredictResponse` of `{alias: np.ndarray}` outputs of `servable`'s signature `key`."""
    response = predict_pb2.PredictResponse()
    _fill_spec(response.model_spec, servable, key)
    for alias, value in outputs.items():
        tensors.fill_proto(response.outputs[alias], value)
    return response


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict, GetModelMetadata, and Classify/Regress for signatures with those methods.

    With batching, `Predict` is a `Deferrable`: on the native front end a
    Predict waiting for its batch holds no thread (`predict_later`).

    Args:
        core: the `ServingCore`.
        in_graph: answer a Predict in one graph call where the servable
            can (`Servable.predict_in_graph`), when the core does not batch;
            False always takes the Python path, as before.
        alone: with batching, the executor where `predict_later` runs a
            request too large to batch, and where Classify and Regress (which
            wait for their batch) run, off the front end's threads (None: on
            the thread that took them).

    Example:

    ```python
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(core), server)
    ```
    """

    def __init__(self, core, in_graph=True, alone=None):
        self.core = core
        self._alone = alone
        # Where a batch's answers are made and sent, so that its thread goes on to the next batch meanwhile.
        self._answer_on = ExecutorLoop(alone) if alone is not None else None
        self.in_graph = bool(in_graph) and not core.batching  # a batch merges requests in Python
        if core.batching and not inspect.iscoroutinefunction(self.Predict):  # (asyncio's server awaits its batch)
            self.Predict = Deferrable(self.Predict, self.predict_later)
            if alone is not None:
                for name, api, run in (("Classify", "classify", classify), ("Regress", "regress", regress)):
                    later = functools.partial(self._on_pool, name, api, run)
                    setattr(self, name, Deferrable(getattr(self, name), later))

    @_guarded("predict")
    def Predict(self, request, context, record):
        if self.in_graph:
            response = predict_in_graph(self.core, request, record)
            if response is not None:
                return response
        servable, key, inputs = predict_inputs(self.core, request, record)
        servable, key, outputs = self.core.predict_on(servable, key, inputs, tuple(request.output_filter))
        return predict_response(servable, key, outputs)

    def predict_later(self, request, respond):
        """Predict with batching, answered through `respond(code, details, response)` once the request's batch
        has run, so no thread waits for the batch (`Deferrable`): on the `alone` pool, which takes a batch's
        answers in one task while the batch's thread goes on to the next batch (or on the batch's thread,
        without a pool). A request that runs alone runs on the pool too."""
        record = _started(self, "predict", request)
        try:
            servable, key, inputs = predict_inputs(self.core, request, record)
            output_filter = tuple(request.output_filter)
            servable.check_outputs(key, output_filter)
            key, checked, future = self.core.batch_future(servable, key, inputs, loop=self._answer_on)
        except Exception as error:  # the server must survive anything a request triggers
            respond(*_failed("Predict", record, error), None)
            return
        if future is None:  # it runs alone (too large to batch, or its version is being unloaded)
            alone = functools.partial(_respond, "Predict", record, respond, lambda: predict_response(
                servable, key, servable.call(key, checked, output_filter)))
            if self._alone is None:
                alone()
            else:
                self._alone.submit(alone)
            return

        def batched(done):
            _respond("Predict", record, respond,
                     lambda: predict_response(servable, key, select_outputs(done.result(), output_filter)))

        future.add_done_callback(batched)

    def _on_pool(self, name, api, run, request, respond):
        """Method `name` (`run(core, request, record)`, which waits for its batch) on the `alone` pool."""
        record = _started(self, api, request)
        self._alone.submit(_respond, name, record, respond, lambda: run(self.core, request, record))

    @_guarded("metadata")
    def GetModelMetadata(self, request, context, record):
        name, version, label, _ = _spec(request.model_spec)
        fields = list(request.metadata_field)
        if fields != ["signature_def"]:
            raise invalid(
                f"Metadata field(s) {fields or '(none)'} not supported: request exactly ['signature_def']"
            )
        servable, signature_map = self.core.metadata(name, version, label)
        record.served_by(servable, "")
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        _fill_spec(response.model_spec, servable, None)
        response.metadata["signature_def"].Pack(signature_map)
        return response

    @_guarded("classify")
    def Classify(self, request, context, record):
        return classify(self.core, request, record)

    @_guarded("regress")
    def Regress(self, request, context, record):
        return regress(self.core, request, record)

    @_guarded("multi_inference")
    def MultiInference(self, request, context, record):
        raise ServingError(grpc.StatusCode.UNIMPLEMENTED, "MultiInference is not supported by this server")


def _examples_run(core, request, method, record=None):
    """Run a classify/regress signature on the request's serialized tf.Examples."""
    name, version, label, signature_name = _spec(request.model_spec)
    servable = core.manager.get(name, version, label)
    key, signature_def = servable.signature(signature_name)
    if record is not None:
        record.served_by(servable, key)
    if signature_def.method_name != method:
        raise invalid(
            f"Expected {method.rsplit('/', 1)[1]} signature method_name to be {method}. "
            f"Was: {signature_def.method_name} (signature {key})"
        )
    kind = request.input.WhichOneof("kind")
    if kind == "example_list":
        examples = request.input.example_list.examples
    elif kind == "example_list_with_context":
        raise ServingError(grpc.StatusCode.UNIMPLEMENTED, "example_list_with_context is not supported")
    else:
        raise invalid("Input is empty: give input.example_list.examples")
    serialized = np.array([e.SerializeToString() for e in examples], dtype=object)
    (alias,) = signature_def.inputs.keys()
    _, _, outputs = core.predict_on(servable, key, {alias: serialized})
    return servable, key, outputs


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def classify(core, request, record=None):
    """A ClassificationRequest -> ClassificationResponse (`classes` and/or `scores` outputs)."""
    servable, key, outputs = _examples_run(core, request, CLASSIFY_METHOD, record)
    response = classification_pb2.ClassificationResponse()
    _fill_spec(response.model_spec, servable, key)
    scores, classes = outputs.get("scores"), outputs.get("classes")
    table = scores if scores is not None else classes
    if table is None:
        raise invalid(f"classify signature {key} has neither 'classes' nor 'scores' outputs")
    for row in range(len(table)):
        result = response.result.classifications.add()
        for j in range(len(table[row])):
            item = result.classes.add()
            if classes is not None:
                item.label = _text(classes[row][j])
            if scores is not None:
                item.score = float(scores[row][j])
    return response


def regress(core, request, record=None):
    """A RegressionRequest -> RegressionResponse (the `outputs` output, one value per example)."""
    servable, key, outputs = _examples_run(core, request, REGRESS_METHOD, record)
    response = regression_pb2.RegressionResponse()
    _fill_spec(response.model_spec, servable, key)
    for value in np.reshape(outputs["outputs"], (-1,)):
        response.result.regressions.add().value = float(value)
    return response


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus (HandleReloadConfigRequest answers UNIMPLEMENTED: restart with a new config)."""

    def __init__(self, core):
        self.core = core

    @_guarded("status")
    def GetModelStatus(self, request, context, record):
        spec = request.model_spec
        if not spec.name:
            raise invalid("model_spec.name is empty: name the model to use")
        version = spec.version.value if spec.HasField("version") else None
        response = get_model_status_pb2.GetModelStatusResponse()
        for number, state, error in self.core.manager.status(spec.name, version):
            entry = response.model_version_status.add()
            entry.version = number
            entry.state = get_model_status_pb2.ModelVersionStatus.State.Value(state)
            entry.status.error_code = _UNKNOWN if error else _OK
            entry.status.error_message = error
        return response

    @_guarded("reload_config")
    def HandleReloadConfigRequest(self, request, context, record):
        raise ServingError(
            grpc.StatusCode.UNIMPLEMENTED,
            "HandleReloadConfigRequest is not supported: restart the server with the new --model_config_file",
        )
