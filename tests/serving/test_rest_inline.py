"""A lone REST client's small request is answered on the event loop's thread; anything else goes to a worker."""

import http.client
import json
import socket
import threading

import pytest

from keras_relmem.serving.rest_api import RestServer


@pytest.fixture
def rest(request):
    """A `RestServer` whose GET handler answers the name of the thread it ran on (no model needed)."""
    server = RestServer(("127.0.0.1", 0), core=None, **getattr(request, "param", {}))
    server._get = lambda match, record: {"thread": threading.current_thread().name}
    server.start()
    yield server
    server.stop()


def _thread_of_answer(connection):
    connection.request("GET", "/v1/models/any")
    response = connection.getresponse()
    assert response.status == 200
    return json.loads(response.read())["thread"]


def test_a_lone_client_is_answered_without_a_hand_off(rest):
    connection = http.client.HTTPConnection(*rest.server_address, timeout=10)
    assert _thread_of_answer(connection) == "rest"  # the event loop's own thread
    assert _thread_of_answer(connection) == "rest"  # and again on the same keep-alive connection


def test_a_second_open_connection_sends_requests_to_the_workers(rest):
    first = http.client.HTTPConnection(*rest.server_address, timeout=10)
    assert _thread_of_answer(first) == "rest"
    # Another client connected: its requests must not wait behind ours, so ours go to a worker.
    with socket.create_connection(rest.server_address, timeout=10):
        for _ in range(50):  # the server registers the connection as soon as its loop runs
            name = _thread_of_answer(first)
            if name != "rest":
                break
        assert name.startswith("rest-worker")
    first.close()


@pytest.mark.parametrize("rest", [{"inline_max_bytes": 0}], indirect=True)
def test_inline_max_bytes_0_always_hands_off(rest):
    connection = http.client.HTTPConnection(*rest.server_address, timeout=10)
    assert _thread_of_answer(connection).startswith("rest-worker")


def test_the_flag_reaches_the_server_and_a_negative_value_is_refused():
    from keras_relmem.serving.server import build_parser, rest_options_from

    args = build_parser().parse_args(["--rest_api_inline_max_bytes", "0"])
    assert rest_options_from(args)["inline_max_bytes"] == 0
    assert rest_options_from(build_parser().parse_args([]))["inline_max_bytes"] == 64 << 10
    with pytest.raises(ValueError, match="--rest_api_inline_max_bytes must be >= 0"):
        rest_options_from(build_parser().parse_args(["--rest_api_inline_max_bytes", "-1"]))
