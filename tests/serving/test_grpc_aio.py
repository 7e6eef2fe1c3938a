"""With batching on, gRPC's Predict waits for its batch without holding a thread: on the native front end
(`grpc_native`, where installed: the default) and on grpc's asyncio server (`grpc_aio`). Concurrent Predicts
merge into batches, every error keeps TF Serving's status code, and the other services answer as on the
synchronous server."""

import concurrent.futures

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from keras_relmem.serving import grpc_native
from keras_relmem.serving.client import ServingClient
from keras_relmem.serving.server import ModelServer, build_parser
from tests.serving.conftest import batch_rows, configs_for

needs_native = pytest.mark.skipif(not grpc_native.available(), reason="keras-relmem-native is not installed")
FRONT_ENDS = {"asyncio": {"grpc_asyncio": True, "grpc_native": False},
              "native": {"grpc_native": True}}


@pytest.fixture(scope="module", params=[pytest.param("asyncio"), pytest.param("native", marks=needs_native)])
def batched(request, exports):
    server = ModelServer(configs_for(exports.base), port=0, poll_seconds=0,
                         batching={"max_batch_size": 16, "batch_timeout_micros": 50_000},
                         **FRONT_ENDS[request.param]).start()
    yield server
    server.stop()


def _code(call):
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value.code()


def test_concurrent_predicts_are_merged_and_answered_each_its_own(exports, batched, server):
    assert (batched.grpc_asyncio or batched.grpc_native) and not server.grpc_asyncio
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


def test_the_flag_chooses_the_front_end(exports):
    parser = build_parser()
    assert parser.parse_args([]).grpc_asyncio is None
    assert parser.parse_args(["--grpc_asyncio=false"]).grpc_asyncio is False
    sync = ModelServer(configs_for(exports.base, ["lm"]), port=0, poll_seconds=-1,
                       batching={"max_batch_size": 4, "batch_timeout_micros": 0}, grpc_asyncio=False,
                       grpc_native=False)
    assert not sync.grpc_asyncio and not sync.grpc_native
    sync.stop()


@needs_native
def test_on_the_native_front_end_a_predict_waiting_for_its_batch_holds_no_thread(exports):
    # One front-end thread (`max_threads=1`, a thread a core at most): eight concurrent Predicts can only share
    # a batch if none of them keeps that thread while it waits; one too large to batch runs alone, on a worker.
    server = ModelServer(configs_for(exports.base, ["babi"]), port=0, poll_seconds=0, max_threads=1,
                         batching={"max_batch_size": 8, "batch_timeout_micros": 200_000}, grpc_native=True).start()
    assert server.grpc_native and server._grpc._max_threads == 1
    arrays = exports.data.arrays("test")
    servable = server.manager.get("babi")
    try:
        with batch_rows(servable) as rows, ServingClient(f"127.0.0.1:{server.port}") as client:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                got = list(pool.map(lambda i: client.predict(
                    "babi", {"story": arrays["story"][i:i + 1], "query": arrays["query"][i:i + 1]}), range(8)))
            large = client.predict("babi", {"story": arrays["story"][:9], "query": arrays["query"][:9]})
        assert max(rows[:-1]) > 1, rows
        assert rows[-1] == 9 and len(large["probabilities"]) == 9
        for i, outputs in enumerate(got):
            np.testing.assert_allclose(outputs["probabilities"], large["probabilities"][i:i + 1],
                                       rtol=1e-5, atol=1e-6)
    finally:
        server.stop()
