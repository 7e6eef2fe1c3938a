"""With batching on, REST clients join their batch from the event loop: no worker thread waits for a batch."""

import asyncio
import concurrent.futures
import http.client
import json
import threading

import pytest

from keras_relmem.serving.core import ServingCore
from keras_relmem.serving.manager import ModelManager
from keras_relmem.serving.rest_api import RestServer
from tests.serving.conftest import FakeServable, configs_for


@pytest.fixture
def batched_rest(tmp_path):
    """`(RestServer, servable, handed_off)`: a REST server batching up to 4 rows for 200 ms over one version,
    and the list of functions it handed to its worker threads."""
    (tmp_path / "m" / "1").mkdir(parents=True)
    manager = ModelManager(configs_for(tmp_path, ["m"]), poll_seconds=-1, servable_factory=FakeServable)
    manager.poll()
    core = ServingCore(manager, batching={"max_batch_size": 4, "batch_timeout_micros": 200_000})
    handed_off = []
    submit = core.executor.submit

    def counting_submit(function, *args):
        handed_off.append(getattr(function, "__name__", function))
        return submit(function, *args)

    core.executor.submit = counting_submit
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(RestServer(("127.0.0.1", 0), core).open(), loop).result()
    yield server, manager.get("m", None, None), handed_off
    asyncio.run_coroutine_threadsafe(server.close(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    core.close()


def _post(address, instances):
    connection = http.client.HTTPConnection(*address, timeout=10)
    try:
        connection.request("POST", "/v1/models/m:predict", json.dumps({"instances": instances}),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_concurrent_clients_share_a_batch_without_worker_threads(batched_rest):
    server, servable, handed_off = batched_rest
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda i: _post(server.server_address, [{"x": [i, 2 * i]}]), range(4)))
    for i, (status, body) in enumerate(answers):
        assert status == 200
        assert body == {"predictions": [[i + 1.0, 2 * i + 1.0]]}  # y = x + version 1, each client its own row
    assert sum(servable.rows) == 4 and len(servable.rows) < 4  # merged into fewer calls than requests
    assert "call" not in handed_off and "check_and_call" not in handed_off  # no worker waited for the batch


def test_a_request_larger_than_a_batch_runs_alone_on_a_worker(batched_rest):
    server, servable, handed_off = batched_rest
    status, body = _post(server.server_address, [{"x": [i]} for i in range(6)])  # 6 rows > max_batch_size 4
    assert status == 200
    assert body == {"predictions": [[i + 1.0] for i in range(6)]}
    assert servable.rows == [6] and handed_off.count("call") == 1


def test_a_bad_request_in_a_batch_fails_alone_with_its_own_status(batched_rest):
    server, servable, _ = batched_rest
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda x: _post(server.server_address, [{"x": [x]}]), [1, -1, 3]))
    assert answers[0] == (200, {"predictions": [[2.0]]})
    assert answers[1][0] == 400 and "negative input" in answers[1][1]["error"]
    assert answers[2] == (200, {"predictions": [[4.0]]})
    # The server goes on answering.
    assert _post(server.server_address, [{"x": [5]}]) == (200, {"predictions": [[6.0]]})
