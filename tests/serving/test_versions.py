"""New versions are picked up under load with no failed request; broken ones never replace a good one."""

import json
import shutil
import threading
import time
import urllib.request

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from keras_relmem.serving.client import ServingClient
from keras_relmem.serving.server import ModelServer
from tests.serving.conftest import configs_for

STORY = ["Mary went to the kitchen.", "John moved to the garden."]


def _copy_model(exports, tmp_path, name="babi"):
    base = tmp_path / "models"
    shutil.copytree(exports.base / name / "1", base / name / "1")
    return base


def _wait_for(condition, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def _newest(client, name):
    """(version, state) of the newest version in one GetModelStatus answer."""
    newest = client.status(name)["model_version_status"][0]
    return newest["version"], newest["state"]


# The batched server (the more moving parts) by default; the unbatched one with `-m slow`.
@pytest.mark.parametrize("batching", [pytest.param(None, marks=pytest.mark.slow),
                                      {"max_batch_size": 8, "batch_timeout_micros": 5000}],
                         ids=["unbatched", "batched"])
def test_hot_swap_under_concurrent_load_fails_no_request(exports, tmp_path, batching):
    base = _copy_model(exports, tmp_path)
    server = ModelServer(configs_for(base, ["babi"]), port=0, rest_api_port=-1, poll_seconds=0.2,
                         batching=batching).start()
    failures, versions, stop = [], [], threading.Event()

    def grpc_load():
        client = ServingClient(f"127.0.0.1:{server.port}", timeout=60)
        try:
            while not stop.is_set():
                try:
                    outputs, version = client.predict(
                        "babi", {"story": np.array([STORY], dtype=object),
                                 "question": np.array(["Where is Mary?"], dtype=object)},
                        signature="answer", return_version=True,
                    )
                    versions.append((version, tuple(outputs["top_probabilities"][0].tolist())))
                except grpc.RpcError as error:
                    failures.append(f"{error.code()}: {error.details()}")
        finally:
            client.close()

    def rest_load():
        url = f"http://127.0.0.1:{server.rest_port}/v1/models/babi:predict"
        body = json.dumps(
            {"signature_name": "answer", "inputs": {"story": [STORY], "question": ["Where is John?"]}}
        ).encode()
        while not stop.is_set():
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=60) as response:
                    json.loads(response.read())["outputs"]
            except Exception as error:  # any failure counts
                failures.append(repr(error))

    threads = [threading.Thread(target=grpc_load) for _ in range(4)] + [
        threading.Thread(target=rest_load) for _ in range(2)
    ]
    try:
        for thread in threads:
            thread.start()
        assert _wait_for(lambda: len(versions) >= 20), failures[:3]
        served_before = len(versions)
        exports.new_babi_version(base=base, version=2)
        client = ServingClient(f"127.0.0.1:{server.port}")
        # One status snapshot per check: reading state and version from two
        # calls can pair "AVAILABLE" (still version 1) with "2" (just LOADING).
        assert _wait_for(lambda: _newest(client, "babi") == ("2", "AVAILABLE"), 120)
        served_at_swap = len(versions)
        assert _wait_for(lambda: len(versions) >= served_at_swap + 20), (len(versions), failures[:3])
        statuses = client.status("babi")["model_version_status"]
        client.close()
        # The old version's batcher was stopped with its version, the new one's runs.
        batched = sorted(s.version for s, _ in server.core._batchers.values())
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        server.stop()
    assert not failures, failures[:5]
    assert served_before > 0 and len(versions) > served_before
    # Every answer came from version 1 and then version 2, never back, and the
    # two versions answer differently.
    numbers = [number for number, _ in versions]
    assert numbers[0] == 1 and numbers[-1] == 2, sorted(set(numbers))
    # (Batches of different sizes may differ in the last bit, hence the tolerance.)
    answers = {number: np.array([a for n, a in versions if n == number]) for number in (1, 2)}
    for number, rows in answers.items():
        np.testing.assert_allclose(rows, np.broadcast_to(rows[0], rows.shape), rtol=1e-5, err_msg=f"version {number}")
    assert not np.allclose(answers[1][0], answers[2][0], rtol=1e-3), answers
    assert [(s["version"], s["state"]) for s in statuses] == [("2", "AVAILABLE"), ("1", "END")]
    assert batched == ([2] if batching else [])
    assert server.core._batchers == {}  # stop() stopped them all


def test_corrupt_version_is_reported_and_the_old_one_keeps_serving(exports, tmp_path):
    base = _copy_model(exports, tmp_path)
    server = ModelServer(configs_for(base, ["babi"]), port=0, poll_seconds=0.2).start()
    client = ServingClient(f"127.0.0.1:{server.port}")
    try:
        before = client.answer("babi", STORY, "Where is Mary?")
        broken = base / "babi" / "2"
        shutil.copytree(base / "babi" / "1", broken)
        (broken / "saved_model.pb").write_bytes(b"this is not a protobuf")
        assert _wait_for(lambda: _newest(client, "babi") == ("2", "END"))
        statuses = {s["version"]: s for s in client.status("babi")["model_version_status"]}
        assert statuses["2"]["state"] == "END" and "saved_model.pb" in statuses["2"]["status"]["error_message"]
        assert statuses["1"]["state"] == "AVAILABLE"
        assert client.answer("babi", STORY, "Where is Mary?") == before
        health = health_pb2_grpc.HealthStub(client.channel)
        assert health.Check(health_pb2.HealthCheckRequest(service="babi"), timeout=10).status == \
            health_pb2.HealthCheckResponse.SERVING
        # Fixed in place (same version number): retried, and it takes over.
        shutil.rmtree(broken)
        exports.new_babi_version(base=base, version=2)
        assert _wait_for(lambda: _newest(client, "babi") == ("2", "AVAILABLE"))
        assert client.answer("babi", STORY, "Where is Mary?") != before
    finally:
        client.close()
        server.stop()


# On grpc's Python server, and on the default one (the native front end where it is built).
def test_empty_base_path_is_not_serving_then_serves_when_a_version_arrives(exports, tmp_path):
    base = tmp_path / "models"
    (base / "babi").mkdir(parents=True)
    server = ModelServer(configs_for(base, ["babi"]), port=0, poll_seconds=0.2).start()
    client = ServingClient(f"127.0.0.1:{server.port}")
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    try:
        health = health_pb2_grpc.HealthStub(client.channel)
        assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status == not_serving
        watch = health.Watch(health_pb2.HealthCheckRequest(service="babi"), timeout=60)
        assert next(watch).status == not_serving
        with pytest.raises(grpc.RpcError) as caught:
            client.answer("babi", STORY, "Where is Mary?")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        shutil.copytree(exports.base / "babi" / "1", base / "babi" / "5")
        # The watch hears the change, and only the change: not the same status again at every poll.
        assert next(watch).status == serving
        assert _wait_for(lambda: health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status
                         == serving)
        assert len(client.answer("babi", STORY, "Where is Mary?")) == 3
        quiet = health.Watch(health_pb2.HealthCheckRequest(service="babi"), timeout=1.5)
        assert next(quiet).status == serving
        with pytest.raises(grpc.RpcError) as caught:  # seven polls go by with nothing to tell
            next(quiet)
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        watch.cancel()
    finally:
        client.close()
        server.stop()





