"""TF Serving's gRPC services (PredictionService, ModelService) over a `ServingCore`, on grpc's asyncio server.

The request and response messages are the official ones from
`tensorflow-serving-api`, so TF Serving's own clients work unchanged. Each
method is a coroutine on the server's event loop; model work runs through
`ServingCore` (a batch, or a worker thread), so a waiting call holds no thread.
"""

import functools
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
from keras_relmem.serving.errors import ServingError, invalid
from keras_relmem.serving.metrics import RequestRecord
from keras_relmem.serving.servable import CLASSIFY_METHOD, REGRESS_METHOD

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

    The method (a coroutine) gets a `RequestRecord` as its third argument, to say which servable and
    signature answered.
    """

    def decorate(method):
        @functools.wraps(method)
        async def wrapper(self, request, context):
            record = _started(self, api, request)
            try:
                response = await method(self, request, context, record)
            except Exception as error:  # the server must survive anything a request triggers
                await context.abort(*_failed(method.__name__, record, error))
            record.finish("OK")
            return response

        return wrapper

    return decorate


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


def predict_response(servable, key, outputs):
    """The `PredictResponse` of `{alias: np.ndarray}` outputs of `servable`'s signature `key`."""
    response = predict_pb2.PredictResponse()
    _fill_spec(response.model_spec, servable, key)
    for alias, value in outputs.items():
        tensors.fill_proto(response.outputs[alias], value)
    return response


def _timeout(context):
    """Seconds the client gave the call (its deadline), or None."""
    remaining = context.time_remaining()
    return None if remaining is None else max(remaining, 0.0)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """Predict, GetModelMetadata, and Classify/Regress for signatures with those methods.

    Args:
        core: the `ServingCore`.

    Example:

    ```python
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(core), server)
    ```
    """

    def __init__(self, core):
        self.core = core

    @_guarded("predict")
    async def Predict(self, request, context, record):
        name, version, label, signature_name = _spec(request.model_spec)
        servable = self.core.manager.get(name, version, label)
        key, _ = servable.signature(signature_name)
        record.served_by(servable, key)
        inputs = {alias: _to_array(alias, proto) for alias, proto in request.inputs.items()}
        outputs = await self.core.predict(servable, key, inputs, tuple(request.output_filter),
                                          timeout=_timeout(context))
        return await self.core.run(predict_response, servable, key, outputs)

    @_guarded("metadata")
    async def GetModelMetadata(self, request, context, record):
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
    async def Classify(self, request, context, record):
        return await classify(self.core, request, record)

    @_guarded("regress")
    async def Regress(self, request, context, record):
        return await regress(self.core, request, record)

    @_guarded("multi_inference")
    async def MultiInference(self, request, context, record):
        raise ServingError(grpc.StatusCode.UNIMPLEMENTED, "MultiInference is not supported by this server")


async def _examples_run(core, request, method, record=None):
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
    return servable, key, await core.predict(servable, key, {alias: serialized})


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


async def classify(core, request, record=None):
    """A ClassificationRequest -> ClassificationResponse (`classes` and/or `scores` outputs)."""
    servable, key, outputs = await _examples_run(core, request, CLASSIFY_METHOD, record)
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


async def regress(core, request, record=None):
    """A RegressionRequest -> RegressionResponse (the `outputs` output, one value per example)."""
    servable, key, outputs = await _examples_run(core, request, REGRESS_METHOD, record)
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
    async def GetModelStatus(self, request, context, record):
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
    async def HandleReloadConfigRequest(self, request, context, record):
        raise ServingError(
            grpc.StatusCode.UNIMPLEMENTED,
            "HandleReloadConfigRequest is not supported: restart the server with the new --model_config_file",
        )
