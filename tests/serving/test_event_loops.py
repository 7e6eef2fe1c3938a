"""The asynchronous front ends (REST, and gRPC with batching) run on the event loop `--event_loop` names:
uvloop where installed by default, asyncio's own on request, and a clear error for what cannot run."""

import asyncio
import concurrent.futures
import http.client
import json
import sys

import numpy as np
import pytest

from keras_relmem.serving import event_loops
from keras_relmem.serving.client import ServingClient
from keras_relmem.serving.rest_api import RestServer
from keras_relmem.serving.server import ModelServer, build_parser, main
from tests.serving.conftest import configs_for

uvloop = pytest.importorskip("uvloop")


def test_each_kind_gives_its_loop():
    for kind, expected in (("asyncio", asyncio.BaseEventLoop), ("uvloop", uvloop.Loop), ("auto", uvloop.Loop)):
        assert event_loops.resolve(kind) == ("asyncio" if kind == "asyncio" else "uvloop")
        loop = event_loops.new_event_loop(kind)
        try:
            assert isinstance(loop, expected), (kind, type(loop))
            assert isinstance(loop, uvloop.Loop) == (kind != "asyncio")
        finally:
            loop.close()


def test_unknown_kind_and_missing_uvloop_are_named(monkeypatch):
    with pytest.raises(ValueError, match="auto, uvloop, asyncio; got 'trio'"):
        event_loops.new_event_loop("trio")
    with pytest.raises(ValueError, match="got 'trio'"):
        RestServer(("127.0.0.1", 0), None, event_loop="trio")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    with pytest.raises(ValueError, match="needs the uvloop package: pip install uvloop"):
        event_loops.new_event_loop("uvloop")
    assert event_loops.resolve("auto") == "asyncio"  # falls back to asyncio's own
    loop = event_loops.new_event_loop("auto")
    assert type(loop).__module__.startswith("asyncio")
    loop.close()


def test_the_flag_rejects_what_cannot_run(monkeypatch, capsys, tmp_path):
    assert build_parser().parse_args([]).event_loop == "auto"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--event_loop", "trio"])
    assert "invalid choice: 'trio'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with pytest.raises(SystemExit):
        main(["--model_base_path", str(tmp_path), "--event_loop", "uvloop", "--port", "0"])
    assert "--event_loop=uvloop needs the uvloop package" in capsys.readouterr().err


def _rest_predict(port, story, query):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = {"instances": [{"story": story.tolist(), "query": query.tolist()}]}
        connection.request("POST", "/v1/models/babi:predict", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200, response.read()
        return np.array(json.loads(response.read())["predictions"][0]["probabilities"])
    finally:
        connection.close()


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_batched_grpc_and_rest_answer_on_each_loop(exports, server, kind):
    batched = ModelServer(configs_for(exports.base, ["babi"]), port=0, rest_api_port=-1, poll_seconds=0,
                          batching={"max_batch_size": 8, "batch_timeout_micros": 20_000}, event_loop=kind,
                          grpc_asyncio=True).start()  # (batched gRPC is native by default where installed)
    arrays = exports.data.arrays("test")
    merged, plain = ServingClient(f"127.0.0.1:{batched.port}"), ServingClient(f"127.0.0.1:{server.port}")
    try:
        # Both front ends really run on the loop asked for (not just the server's record of it).
        assert batched.event_loop == kind
        assert isinstance(batched._grpc._loop, uvloop.Loop) == (kind == "uvloop")
        assert isinstance(batched._rest._loop, uvloop.Loop) == (kind == "uvloop")

        def ask(i):
            story, query = arrays["story"][i:i + 1], arrays["query"][i:i + 1]
            grpc_answer = merged.predict("babi", {"story": story, "query": query},
                                         output_filter=("probabilities",))["probabilities"][0]
            return grpc_answer, _rest_predict(batched.rest_port, story[0], query[0])

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            got = list(pool.map(ask, range(6)))
        for i, (grpc_answer, rest_answer) in enumerate(got):
            expected = plain.predict("babi", {"story": arrays["story"][i:i + 1], "query": arrays["query"][i:i + 1]},
                                     output_filter=("probabilities",))["probabilities"][0]
            np.testing.assert_allclose(grpc_answer, expected, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(rest_answer, expected, rtol=1e-5, atol=1e-6)
    finally:
        merged.close()
        plain.close()
        batched.stop()
