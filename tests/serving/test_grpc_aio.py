"""With batching on, gRPC's Predict (grpc's asyncio server) waits for its batch on the event loop: concurrent
Predicts merge into batches, every error keeps TF Serving's status code, and the other services answer."""

import concurrent.futures

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from keras_relmem.serving.client import ServingClient
from keras_relmem.serving.server import ModelServer
from tests.serving.conftest import batch_rows, configs_for


@pytest.fixture(scope="module")
def batched(exports):
    server = ModelServer(configs_for(exports.base), port=0, poll_seconds=0,
                         batching={"max_batch_size": 16, "batch_timeout_micros": 50_000}).start()
    yield server
    server.stop()


def _code(call):
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value.code()


def test_concurrent_predicts_are_merged_and_answered_each_its_own(exports, batched, server):
    servable = batched.manager.get("babi")
    arrays = exports.data.arrays("test")

    def ask(client, i):
        return client.predict("babi", {"story": arrays["story"][i:i + 1], "query": arrays["query"][i:i + 1]},
                              output_filter=("probabilities",))

    with batch_rows(servable) as rows, ServingClient(f"127.0.0.1:{batched.port}") as merged, \
            ServingClient(f"127.0.0.1:{server.port}") as plain:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda i: ask(merged, i), range(8)))
        for i, outputs in enumerate(got):
            assert sorted(outputs) == ["probabilities"]
            np.testing.assert_allclose(outputs["probabilities"], ask(plain, i)["probabilities"], rtol=1e-5, atol=1e-7)
    assert sum(rows) == 8 and max(rows) > 1, rows


def test_errors_keep_their_codes_and_the_other_services_answer(batched):
    client = ServingClient(f"127.0.0.1:{batched.port}")
    story = {"story": np.array([["Mary went home."]], dtype=object), "question": np.array(["Where is Mary?"], object)}
    try:
        assert _code(lambda: client.predict("nope", story, signature="answer")) == grpc.StatusCode.NOT_FOUND
        assert _code(lambda: client.predict("babi", {"wrong": np.zeros((1, 2), np.int32)})) == \
            grpc.StatusCode.INVALID_ARGUMENT
        assert _code(lambda: client.predict("babi", story, signature="answer", output_filter=("nope",))) == \
            grpc.StatusCode.INVALID_ARGUMENT
        assert client.answer("babi", ["Mary went home."], "Where is Mary?")
        assert client.status("babi")["model_version_status"][0]["state"] == "AVAILABLE"
        assert "answer" in client.metadata("babi")["signatures"]
        health = health_pb2_grpc.HealthStub(client.channel)
        assert health.Check(health_pb2.HealthCheckRequest(service="babi")).status == \
            health_pb2.HealthCheckResponse.SERVING
    finally:
        client.close()



