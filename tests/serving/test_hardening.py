"""The REST front end under bad input and bad clients, warm-up on load, and Prometheus metrics."""

import http.client
import socket
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_relmem.serving.metrics import read_monitoring_config
from keras_relmem.testing import soak
from tests.serving.conftest import configs_for


def shapes_of(exports):
    data = exports.data
    return soak.Shapes(data.story_length, data.sentence_length, data.query_length, len(data.vocab),
                       len(exports.lm_vocab))


@pytest.fixture(scope="module")
def client(server):
    made = soak.Client("127.0.0.1", server.port, server.rest_port, timeout=60)
    yield made
    made.close()


def test_every_bad_kind_gets_its_tf_serving_code(server, client, exports, caplog):
    """The soak's catalogue once: each kind answered as TF Serving answers it, no 5xx, nothing logged as an error."""
    wrong = soak.run_catalogue(client, shapes_of(exports), max_json_bytes=1 << 20, max_request_bytes=1 << 20)
    assert wrong == {}
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL") or r.exc_info]
    for call in soak.good_rest_calls(shapes_of(exports)):
        assert client.rest(call)[0] == 200, call.kind


def test_negative_and_out_of_range_ids_name_the_input(client, exports):
    shapes = shapes_of(exports)
    story, query = shapes.ids()
    cases = [
        ("/v1/models/babi:predict", {"story": (story - 1).tolist(), "query": query.tolist()}, "story"),
        ("/v1/models/babi:predict", {"story": story.tolist(), "query": (query * 0 - 7).tolist()}, "query"),
        ("/v1/models/babi:predict", {"story": story.tolist(), "query": (query * 0 + shapes.vocab_size).tolist()},
         "query"),
        ("/v1/models/lm:predict", [[0, -1]], "ids"),
        ("/v1/models/lm:predict", [[0, shapes.lm_vocab_size]], "ids"),
    ]
    for path, inputs, name in cases:
        status, body = client.rest(soak.RestCall("ids", path=path, body=soak._json({"inputs": inputs})))
        assert status == 400 and f"input {name}: word ids must be" in body.decode(), body


def test_keep_alive_connection_stays_in_step_after_an_unread_body(server):
    """A POST to an unknown route is answered without reading its body: the body must not become a request."""
    smuggled = b"GET /v1/models/babi HTTP/1.1\r\nHost: x\r\n\r\n"
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    connection.request("POST", "/nope", body=smuggled)
    first = connection.getresponse()
    assert first.status == 404 and b"Malformed request" in first.read()
    connection.request("GET", "/v1/models/lm")
    second = connection.getresponse()
    assert second.status == 200 and b'"AVAILABLE"' in second.read()
    # Many requests on one connection, all answered in order.
    for model in ["babi", "lm"] * 5:
        connection.request("GET", f"/v1/models/{model}")
        assert connection.getresponse().read().count(b'"version": "1"') == 1
    connection.close()


def _open_sockets(port, count, payload):
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if payload:
            sock.sendall(payload)
        sockets.append(sock)
    return sockets


def _closed_by_server(sock):
    try:
        return sock.recv(65536) is not None  # b"" (closed) or an error answer then close
    except OSError:
        return True


def test_slow_clients_are_closed_after_the_timeout_with_threads_bounded(exports):
    from keras_relmem.serving.server import ModelServer

    server = ModelServer(configs_for(exports.base, ["lm"]), port=0, rest_api_port=-1, poll_seconds=0,
                         num_threads=2, rest_options={"timeout": 1.0}).start()
    try:
        threads_before = threading.active_count()
        slow = (
            _open_sockets(server.rest_port, 20, b"")  # never send anything
            + _open_sockets(server.rest_port, 20, b"GET /v1/models/lm HTTP/1.1\r\nHost: x\r\n")  # stuck in headers
            + _open_sockets(server.rest_port, 10, b"POST /v1/models/lm:predict HTTP/1.1\r\nHost: x\r\n"
                                                  b"Content-Length: 100\r\n\r\n{\"inst")  # stuck in the body
        )
        assert threading.active_count() - threads_before <= 2
        started = time.monotonic()
        for sock in slow:
            sock.settimeout(10)
            assert _closed_by_server(sock)
        assert time.monotonic() - started < 8
        stuck_body = slow[-1]
        stuck_body.close()
        for sock in slow:
            sock.close()
        status, _ = soak.Client("127.0.0.1", server.port, server.rest_port).rest(
            soak.RestCall("status", method="GET", path="/v1/models/lm"))
        assert status == 200
    finally:
        server.stop()


def test_body_stuck_half_way_gets_408(exports):
    from keras_relmem.serving.server import ModelServer

    server = ModelServer(configs_for(exports.base, ["lm"]), port=0, rest_api_port=-1, poll_seconds=0,
                         rest_options={"timeout": 1.0}).start()
    try:
        (sock,) = _open_sockets(server.rest_port, 1, b"POST /v1/models/lm:predict HTTP/1.1\r\nHost: x\r\n"
                                                     b"Content-Length: 100\r\n\r\n{\"inst")
        sock.settimeout(10)
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive" in answer
        sock.close()
    finally:
        server.stop()


def test_declared_oversized_body_is_refused_before_it_is_sent(server):
    """A 62 MB Content-Length gets 413 at once: the server neither waits for nor holds the body."""
    sock = socket.create_connection(("127.0.0.1", server.rest_port), timeout=10)
    started = time.monotonic()
    sock.sendall(b"POST /v1/models/babi:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 65000000\r\n\r\n{")
    answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413") and b"larger than" in answer
    assert time.monotonic() - started < 5
    sock.close()


def test_json_depth_is_read_off_the_bytes():
    from keras_relmem.serving.rest_api import json_depth

    assert json_depth(b"") == 0 and json_depth(b"12") == 0
    assert json_depth(b'{"a": [1, {"b": [[]]}]}') == 5
    # Brackets inside strings, escaped quotes and escaped backslashes.
    assert json_depth(b'["[[[\\"[[", "\\\\", ["]]]"]]') == 2
    assert json_depth(b'["\\\\\\"[[["]') == 1


def test_warm_up_requests_are_written_and_replayed(exports, tmp_path):
    from tensorflow_serving.apis import prediction_log_pb2

    from keras_relmem.export import WARMUP_FILE
    from keras_relmem.serving.servable import Servable

    lm_signatures = {"serving_default", "next_word", "distribution", "next_word_distribution"}
    for name, signatures in (("babi", {"serving_default", "answer"}), ("lm", lm_signatures)):
        path = exports.base / name / "1" / WARMUP_FILE
        logs = [prediction_log_pb2.PredictionLog.FromString(r) for r in
                tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]
        assert {log.predict_log.request.model_spec.signature_name for log in logs} == signatures
        # One and two rows for each signature.
        assert Servable(name, 1, exports.base / name / "1").warm_up() == len(logs) == 2 * len(signatures)


def test_a_version_without_warm_up_records_is_warmed_with_generated_inputs(exports, tmp_path):
    import shutil

    from keras_relmem.export import WARMUP_FILE
    from keras_relmem.serving.servable import Servable

    shutil.copytree(exports.base / "babi" / "1", tmp_path / "2")
    (tmp_path / "2" / WARMUP_FILE).unlink()
    servable = Servable("babi", 2, tmp_path / "2")
    calls, call = [], servable.call

    def recording(key, checked, output_filter=()):
        calls.append((key, {alias: (value.dtype.kind, value.shape) for alias, value in checked.items()}))
        return call(key, checked, output_filter)

    servable.call = recording
    # both are called; `answer` refuses its generated empty story ("a story with no words"), which is logged
    assert servable.warm_up() == 1
    data = exports.data
    assert sorted(calls) == [
        ("answer", {"question": ("O", (1,)), "story": ("O", (1, 1))}),
        ("serving_default", {"query": ("i", (1, data.query_length)),
                             "story": ("i", (1, data.story_length, data.sentence_length))}),
    ]


def test_generated_inputs_fill_unknown_sizes_with_one():
    from keras_relmem.serving.servable import generated_input

    text = generated_input(tf.TensorSpec((None, None), tf.string))
    assert text.shape == (1, 1) and text.dtype == object and text[0, 0] == b""
    ids = generated_input(tf.TensorSpec((None, 7), tf.int32))
    assert ids.dtype == np.int32 and ids.shape == (1, 7) and not ids.any()
    assert generated_input(tf.TensorSpec(None, tf.float32)).shape == ()


def test_a_failing_warm_up_record_fails_the_load_and_the_old_version_keeps_serving(exports, tmp_path):
    import shutil

    from tensorflow_serving.apis import prediction_log_pb2

    from keras_relmem.export import WARMUP_FILE, _predict_log, write_warmup_requests
    from keras_relmem.serving.manager import ModelManager

    shutil.copytree(exports.base / "lm" / "1", tmp_path / "lm" / "1")
    shutil.copytree(exports.base / "lm" / "1", tmp_path / "lm" / "2")
    (tmp_path / "lm" / "2" / WARMUP_FILE).unlink()
    write_warmup_requests(tmp_path / "lm" / "2", [
        _predict_log("lm", "next_word", {"prefix": np.array(["ok"], object)}),
        _predict_log("lm", "serving_default", {"ids": np.array([[-1]], np.int32)}),
        prediction_log_pb2.PredictionLog(),
    ])
    manager = ModelManager(configs_for(tmp_path, ["lm"]), poll_seconds=0).start()
    assert manager.get("lm").version == 1
    (version, state, error), _ = manager.status("lm")
    assert (version, state) == (2, "END")
    assert "tf_serving_warmup_requests: warm-up record 2 failed" in error and "ids" in error


def test_a_damaged_warm_up_file_fails_the_load_naming_the_record(exports, tmp_path):
    import shutil

    from keras_relmem.export import WARMUP_FILE
    from keras_relmem.serving.manager import ModelManager

    shutil.copytree(exports.base / "lm" / "1", tmp_path / "lm" / "1")
    shutil.copytree(exports.base / "lm" / "1", tmp_path / "lm" / "2")
    records = (tmp_path / "lm" / "2" / WARMUP_FILE).read_bytes()
    (tmp_path / "lm" / "2" / WARMUP_FILE).write_bytes(records[:-5])  # the last record cut short
    manager = ModelManager(configs_for(tmp_path, ["lm"]), poll_seconds=0).start()
    assert manager.get("lm").version == 1
    (version, state, error), _ = manager.status("lm")
    assert (version, state) == (2, "END")
    assert "tf_serving_warmup_requests: warm-up record 8 is damaged" in error, error


def test_prometheus_metrics_count_requests_by_model_signature_and_code(exports, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    from keras_relmem.serving.server import ModelServer

    config = tmp_path / "monitoring.config"
    config.write_text('prometheus_config {\n  enable: true,\n  path: "/monitoring/prometheus/metrics"\n}\n')
    path = read_monitoring_config(config)
    server = ModelServer(configs_for(exports.base), port=0, rest_api_port=-1, poll_seconds=0,
                         metrics_path=path).start()
    client = soak.Client("127.0.0.1", server.port, server.rest_port)
    try:
        shapes = shapes_of(exports)
        good_rest, good_grpc = soak.good_rest_calls(shapes), soak.good_grpc_calls(shapes)
        for _ in range(3):
            assert client.rest(good_rest[0])[0] == 200
        assert client.grpc(good_grpc[0]).name == "OK"
        assert client.rest(soak.RestCall("bad", body=b"{"))[0] == 400
        status, text = client.rest(soak.RestCall("metrics", method="GET", path=path))
        assert status == 200
    finally:
        client.close()
        server.stop()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }

    def count(**labels):
        return samples.get((":tensorflow:serving:request_count_total", tuple(sorted(labels.items()))))

    common = {"model_name": "babi", "API": "predict"}
    assert count(**common, model_version="1", signature_name="answer", entrypoint="REST", status="OK") == 3
    assert count(**common, model_version="1", signature_name="serving_default", entrypoint="GRPC", status="OK") == 1
    assert count(**common, model_version="", signature_name="", entrypoint="REST", status="INVALID_ARGUMENT") == 1
    assert samples[(":tensorflow:serving:request_latency_count", tuple(sorted(
        {**common, "model_version": "1", "signature_name": "answer", "entrypoint": "REST"}.items())))] == 3


@pytest.mark.parametrize("text,problem", [
    ("prometheus_config { enable: yes }", "enable"),
    ('prometheus_config { enable: true path: "metrics" }', "must start with '/'"),
])
def test_bad_monitoring_config_names_the_file_and_problem(tmp_path, text, problem):
    config = tmp_path / "monitoring.config"
    config.write_text(text)
    with pytest.raises(ValueError, match=problem) as caught:
        read_monitoring_config(config)
    assert str(config) in str(caught.value)


def test_disabled_monitoring_config_means_no_metrics(tmp_path):
    config = tmp_path / "monitoring.config"
    config.write_text("prometheus_config { enable: false }")
    assert read_monitoring_config(config) is None
