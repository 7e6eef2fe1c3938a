"""A gRPC Predict answered in one graph call (`in_graph`): the answers of the Python path, the same errors.

The expected responses are built from the signature called by keyword and
`tf.make_tensor_proto` (TensorFlow's own conversion), not from the server's
code; the errors are those of the same server with `grpc_predict_in_graph=False`.
"""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from keras_relmem.serving import tensors
from keras_relmem.serving.grpc_native import available as native_grpc_available
from keras_relmem.serving.servable import Servable
from keras_relmem.serving.server import ModelServer
from tests.serving.conftest import batch_rows, configs_for, needs_data


class _Mixed(tf.Module):
    """Inputs and outputs of several dtypes, in an order that matters; `b` of 100 or more is refused."""

    def __init__(self):
        super().__init__()
        self.scale = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="b"),
                                  tf.TensorSpec([None, 2], tf.int32, name="a"),
                                  tf.TensorSpec([None], tf.string, name="s")])
    def mixed(self, b, a, s):
        with tf.control_dependencies([tf.debugging.assert_less(b, 100.0, message="b must be under 100")]):
            total = tf.cast(tf.reduce_sum(a, axis=1), tf.float32) * self.scale - b
        return {"total": total, "wide": tf.cast(a, tf.int64) * 10, "label": tf.strings.join([s, "!"]),
                "positive": total > 0}


@pytest.fixture(scope="module")
def mixed_base(tmp_path_factory):
    base = tmp_path_factory.mktemp("mixed")
    module = _Mixed()
    tf.saved_model.save(module, str(base / "mixed" / "1"), signatures={"serving_default": module.mixed})
    return base


A = np.array([[1, 2], [3, 5]], np.int32)
B = np.array([0.5, -4.0], np.float32)
S = np.array([b"x", b"yz"], dtype=object)


def request_of(inputs, output_filter=(), model="mixed"):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(value if isinstance(value, type(request.inputs[alias])) else
                                       tf.make_tensor_proto(value))
    request.output_filter.extend(output_filter)
    return request


def keyword_outputs(path, inputs):
    """The signature called by keyword, each output as `tf.make_tensor_proto` writes it."""
    function = tf.saved_model.load(str(path)).signatures["serving_default"]
    return {alias: tf.make_tensor_proto(value.numpy())
            for alias, value in function(**{k: tf.constant(v) for k, v in inputs.items()}).items()}


def same_tensor(got, want):
    assert got.dtype == want.dtype
    assert [d.size for d in got.tensor_shape.dim] == [d.size for d in want.tensor_shape.dim]
    np.testing.assert_array_equal(tf.make_ndarray(got), tf.make_ndarray(want))


def test_the_in_graph_predict_answers_as_the_keyword_call(mixed_base):
    path = mixed_base / "mixed" / "1"
    servable = Servable("mixed", 1, path)
    inputs = {"a": A, "b": B, "s": S}
    want = keyword_outputs(path, inputs)
    # By hand from _Mixed.mixed, so that swapped inputs or outputs cannot pass.
    np.testing.assert_allclose(tf.make_ndarray(want["total"]), [5.5, 20.0])
    got = servable.predict_in_graph("serving_default", request_of(inputs))
    assert sorted(got) == sorted(want)
    for alias, serialized in got.items():
        same_tensor(tensor_pb2.TensorProto.FromString(serialized), want[alias])
    only = servable.predict_in_graph("serving_default", request_of(inputs), ("label",))
    assert list(only) == ["label"]


def test_servables_built_without_it_and_signatures_called_by_keyword_have_none(mixed_base):
    path = mixed_base / "mixed" / "1"
    request = request_of({"a": A, "b": B, "s": S})
    assert Servable("mixed", 1, path, predict_in_graph=False).predict_in_graph("serving_default", request) is None
    assert Servable("mixed", 1, path, flat_call=False).predict_in_graph("serving_default", request) is None


def _strings_short_of_the_shape():
    proto = tf.make_tensor_proto(S)
    proto.tensor_shape.dim[0].size = 3
    return proto


# Requests the in-graph path must leave to the Python one: (label, inputs, answered by the Python path).
DECLINED = [
    ("a float where an int is expected", {"a": A.astype(np.float32), "b": B, "s": S}, False),
    ("a rank the signature does not take", {"a": A[0], "b": B, "s": S}, False),
    ("an unknown input", {"a": A, "b": B, "s": S, "extra": B}, False),
    ("a missing input", {"a": A, "b": B}, False),
    ("fewer strings than the shape holds", {"a": A, "b": B, "s": _strings_short_of_the_shape()}, True),
    ("numbers in float_val, not tensor_content",
     {"a": A, "b": tf.make_tensor_proto(B.tolist(), dtype=tf.float32), "s": S}, True),
    ("a value the model refuses", {"a": A, "b": np.array([0.5, 100.0], np.float32), "s": S}, False),
]


@pytest.mark.parametrize("label, inputs, answered", DECLINED, ids=[d[0] for d in DECLINED])
def test_requests_it_declines_are_answered_or_refused_as_without_it(mixed_base, label, inputs, answered):
    servers = [ModelServer(configs_for(mixed_base, ["mixed"]), port=0, rest_api_port=0, poll_seconds=0,
                           grpc_predict_in_graph=flag).start() for flag in (True, False)]
    try:
        results = []
        for server in servers:
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
                try:
                    results.append(stub.Predict(request_of(inputs), timeout=30))
                except grpc.RpcError as error:
                    results.append((error.code(), error.details()))
        with_it, without_it = results
        assert isinstance(with_it, predict_pb2.PredictResponse) == answered, with_it
        if answered:
            assert sorted(with_it.outputs) == sorted(without_it.outputs)
            for alias in with_it.outputs:
                same_tensor(with_it.outputs[alias], without_it.outputs[alias])
        else:
            assert with_it == without_it
            assert with_it[0] == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        for server in servers:
            server.stop(0)


def test_the_server_answers_in_graph_unless_told_not_to_or_batching(mixed_base):
    inputs = {"a": A, "b": B, "s": S}
    settings = [({}, []), ({"grpc_native": False}, []), ({"grpc_asyncio": True}, []),
                ({"grpc_predict_in_graph": False}, [2]),
                ({"batching": {"max_batch_size": 4, "batch_timeout_micros": 1000}, "grpc_asyncio": False,
                  "grpc_native": False}, [2])]
    if native_grpc_available():
        settings.append(({"grpc_native": True}, []))
    for options, python_calls in settings:
        server = ModelServer(configs_for(mixed_base, ["mixed"]), port=0, rest_api_port=0, poll_seconds=0,
                             **options).start()
        try:
            with batch_rows(server.manager.get("mixed")) as rows, \
                    grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
                response = stub.Predict(request_of(inputs, ["total"]), timeout=30)
            assert rows == python_calls, options
            assert list(response.outputs) == ["total"]
            np.testing.assert_allclose(tf.make_ndarray(response.outputs["total"]), [5.5, 20.0])
            assert (response.model_spec.name, response.model_spec.version.value) == ("mixed", 1)
            assert response.model_spec.signature_name == "serving_default"
        finally:
            server.stop(0)


@needs_data
def test_babi_and_lm_exports_answer_in_graph_as_in_python(exports):
    babi_request = request_of({"story": np.array([["Mary went to the kitchen.", "John went home."]], dtype=object),
                               "question": np.array(["Where is Mary?"], dtype=object)}, model="babi")
    babi_request.model_spec.signature_name = "answer"
    next_word = request_of({"prefix": np.array(["the company said"], dtype=object)}, model="lm")
    next_word.model_spec.signature_name = "next_word"
    distribution = request_of({"ids": np.array([[1, 2, 3]], np.int32)}, model="lm")
    distribution.model_spec.signature_name = "distribution"
    for name, request in (("babi", babi_request), ("lm", next_word), ("lm", distribution)):
        servable = Servable(name, 1, exports.base / name / "1")
        key, _ = servable.signature(request.model_spec.signature_name)
        got = servable.predict_in_graph(key, request)
        inputs = {alias: tensors.to_array(proto) for alias, proto in request.inputs.items()}
        want = servable.call(key, servable.check_inputs(key, inputs))
        assert got is not None and sorted(got) == sorted(want)
        for alias, serialized in got.items():
            same_tensor(tensor_pb2.TensorProto.FromString(serialized), tf.make_tensor_proto(want[alias]))


def test_a_signature_it_cannot_trace_is_answered_the_python_way(mixed_base, monkeypatch):
    from keras_relmem.serving import servable as servable_module

    def fails(*args):
        raise RuntimeError("cannot trace this one")

    monkeypatch.setattr(servable_module, "InGraphPredict", fails)
    servable = Servable("mixed", 1, mixed_base / "mixed" / "1")
    assert servable.predict_in_graph("serving_default", request_of({"a": A, "b": B, "s": S})) is None
    got = servable.call("serving_default", servable.check_inputs("serving_default", {"a": A, "b": B, "s": S}))
    np.testing.assert_allclose(got["total"], [5.5, 20.0])
