"""Classify and Regress on a SavedModel whose signatures have those methods (a TF1-style export)."""

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2, prediction_service_pb2_grpc, regression_pb2

from keras_relmem.serving.server import ModelServer
from tests.serving.conftest import configs_for

WEIGHTS = np.array([[1.0, -1.0, 0.5], [0.5, 2.0, -1.0]], "float32")  # (features, classes)
LABELS = [b"red", b"green", b"blue"]


def _export(path):
    """x (2 floats in a tf.Example) -> class scores softmax(x W), and a regression sum(x)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([2], tf.float32)})
        scores = tf.nn.softmax(tf.matmul(features["x"], tf.constant(WEIGHTS)))
        classes = tf.tile(tf.constant([LABELS]), [tf.shape(serialized)[0], 1])
        total = tf.reduce_sum(features["x"], axis=1)
        info = v1.saved_model.utils.build_tensor_info
        classify = v1.saved_model.signature_def_utils.build_signature_def(
            inputs={"inputs": info(serialized)},
            outputs={"classes": info(classes), "scores": info(scores)},
            method_name="tensorflow/serving/classify",
        )
        regress = v1.saved_model.signature_def_utils.build_signature_def(
            inputs={"inputs": info(serialized)}, outputs={"outputs": info(total)},
            method_name="tensorflow/serving/regress",
        )
        with v1.Session(graph=graph) as session:
            builder = v1.saved_model.Builder(str(path))
            builder.add_meta_graph_and_variables(
                session, ["serve"], signature_def_map={"serving_default": classify, "sum": regress})
            builder.save()


def _examples(request, rows):
    for row in rows:
        example = request.input.example_list.examples.add()
        example.features.feature["x"].float_list.value.extend(row)


# Unbatched, and batched: on the default gRPC server (native where installed) Classify and Regress, which wait
# for their batch, then run on a pool rather than on the front end's threads.
@pytest.fixture(scope="module", params=[None, {"max_batch_size": 8, "batch_timeout_micros": 1000}],
                ids=["unbatched", "batched"])
def classifier_server(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("classifier")
    _export(base / "colours" / "1")
    server = ModelServer(configs_for(base, ["colours"]), port=0, poll_seconds=0, batching=request.param).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()
    server.stop()


def test_classify(classifier_server):
    rows = [[1.0, 0.0], [0.0, 1.0]]
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "colours"
    _examples(request, rows)
    response = classifier_server.Classify(request, timeout=30)
    logits = np.array(rows, "float32") @ WEIGHTS
    want = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    for got, expected in zip(response.result.classifications, want):
        assert [c.label for c in got.classes] == ["red", "green", "blue"]
        np.testing.assert_allclose([c.score for c in got.classes], expected, rtol=1e-6)


def test_regress_and_method_mismatch(classifier_server):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "colours"
    request.model_spec.signature_name = "sum"
    _examples(request, [[1.0, 2.5], [-1.0, 0.5]])
    response = classifier_server.Regress(request, timeout=30)
    np.testing.assert_allclose([r.value for r in response.result.regressions], [3.5, -0.5])
    request.model_spec.signature_name = ""  # the classify signature
    with pytest.raises(grpc.RpcError) as caught:
        classifier_server.Regress(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensorflow/serving/regress" in caught.value.details()


def test_classify_without_examples_is_a_clear_error(classifier_server):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "colours"
    with pytest.raises(grpc.RpcError) as caught:
        classifier_server.Classify(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "example_list" in caught.value.details()


def test_classify_and_regress_over_rest(tmp_path):
    import json
    import urllib.error
    import urllib.request

    _export(tmp_path / "colours" / "1")
    server = ModelServer(configs_for(tmp_path, ["colours"]), port=0, rest_api_port=-1, poll_seconds=0).start()

    def post(verb, body):
        request = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}/v1/models/colours:{verb}",
                                         data=json.dumps(body).encode())
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    try:
        status, body = post("classify", {"examples": [{"x": [1.0, 0.0]}, {"x": [0.0, 1.0]}]})
        assert status == 200, body
        logits = np.array([[1.0, 0.0], [0.0, 1.0]], "float32") @ WEIGHTS
        want = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        assert [[label for label, _ in row] for row in body["results"]] == [["red", "green", "blue"]] * 2
        np.testing.assert_allclose([[score for _, score in row] for row in body["results"]], want, rtol=1e-6)
        status, body = post("regress", {"signature_name": "sum", "examples": [{"x": [1.0, 2.5]}]})
        assert status == 200 and body["results"] == [3.5]
        status, body = post("classify", {"examples": [{"x": [1.0, "a"]}]})
        assert status == 400 and "feature x" in body["error"]
        # JSON integers become int64 features (as in TF Serving): the model's error is passed on.
        status, body = post("classify", {"examples": [{"x": [0, 1]}]})
        assert status == 400 and "Data types don't match" in body["error"]
        status, body = post("regress", {"examples": [{"x": [1.0, 2.0]}]})
        assert status == 400 and "tensorflow/serving/regress" in body["error"]
    finally:
        server.stop()
