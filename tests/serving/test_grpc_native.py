"""The native gRPC front end (`--grpc_native=true`): the C++ transport answers each unary call with the
registered Python servicer, keeps gRPC's status codes, runs a call on the thread that took it, and stops
cleanly. Skipped where the `keras-relmem-native` package is not built (CI builds it)."""

import concurrent.futures
import socket
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

pytest.importorskip("keras_relmem_native._grpc_front_end", reason="keras-relmem-native is not built (native/)")

from keras_relmem.serving.client import ServingClient  # noqa: E402
from keras_relmem.serving.grpc_native import NativeGrpcServer  # noqa: E402
from keras_relmem.serving.server import ModelServer, build_parser, main  # noqa: E402
from tests.serving.conftest import batch_rows, configs_for  # noqa: E402

SERVICE = "test.Echo"


class Echo:
    """Methods of a made-up service, each showing one way a servicer ends a call."""

    def __init__(self):
        self.running = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def echo(self, request, context):
        return request[::-1]

    def abort(self, request, context):
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not now")

    def raise_(self, request, context):
        raise KeyError("boom")

    def set_code(self, request, context):
        context.set_code(grpc.StatusCode.NOT_FOUND)
        context.set_details("nothing here")
        return b"ignored"

    def slow(self, request, context):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return request

    def stream(self, request, context):
        for index in range(3):
            yield request + bytes([index])

    def stream_abort(self, request, context):
        yield b"first"
        context.abort(grpc.StatusCode.OUT_OF_RANGE, "no more")

    def stream_raise(self, request, context):
        yield b"first"
        raise KeyError("boom")

    def upload(self, requests, context):
        return b"".join(requests)


def _echo_handlers(echo):
    unary = {name: grpc.unary_unary_rpc_method_handler(getattr(echo, method))
             for name, method in (("Echo", "echo"), ("Abort", "abort"), ("Raise", "raise_"),
                                  ("SetCode", "set_code"), ("Slow", "slow"))}
    for name, method in (("Stream", echo.stream), ("StreamAbort", echo.stream_abort),
                         ("StreamRaise", echo.stream_raise)):
        unary[name] = grpc.unary_stream_rpc_method_handler(method)
    unary["Upload"] = grpc.stream_unary_rpc_method_handler(echo.upload)
    unary["Parsed"] = grpc.unary_unary_rpc_method_handler(
        lambda request, context: request, request_deserializer=health_pb2.HealthCheckRequest.FromString,
        response_serializer=health_pb2.HealthCheckRequest.SerializeToString)
    return grpc.method_handlers_generic_handler(SERVICE, unary)


@pytest.fixture()
def echo_server():
    echo = Echo()
    server = NativeGrpcServer(max_threads=2, max_request_bytes=1 << 20)
    server.add_generic_rpc_handlers((_echo_handlers(echo),))
    echo.health = health.HealthServicer()
    echo.health.set("ready", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(echo.health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield echo, channel, server
    channel.close()
    server.stop(1.0).wait()


def _call(channel, method, request=b"", timeout=10):
    return channel.unary_unary(f"/{SERVICE}/{method}")(request, timeout=timeout)


def _status(call):
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value.code(), caught.value.details()


def test_a_unary_call_is_answered_by_the_python_method(echo_server):
    _, channel, _ = echo_server
    assert _call(channel, "Echo", b"abc") == b"cba"
    big = bytes(range(256)) * 2048  # 512 KiB: several HTTP/2 frames and slices each way
    assert _call(channel, "Echo", big) == big[::-1]
    stub = health_pb2_grpc.HealthStub(channel)
    assert stub.Check(health_pb2.HealthCheckRequest(service="ready")).status == health_pb2.HealthCheckResponse.SERVING


def test_every_way_a_method_ends_keeps_grpcs_status_codes(echo_server):
    _, channel, _ = echo_server
    assert _status(lambda: _call(channel, "Abort")) == (grpc.StatusCode.FAILED_PRECONDITION, "not now")
    code, details = _status(lambda: _call(channel, "Raise"))
    assert code == grpc.StatusCode.UNKNOWN and "boom" in details  # as grpc's own servers answer
    assert _status(lambda: _call(channel, "SetCode")) == (grpc.StatusCode.NOT_FOUND, "nothing here")
    stub = health_pb2_grpc.HealthStub(channel)
    assert _status(lambda: stub.Check(health_pb2.HealthCheckRequest(service="nope")))[0] == grpc.StatusCode.NOT_FOUND


def test_what_it_cannot_answer_gets_a_status_that_names_the_problem(echo_server):
    _, channel, _ = echo_server
    code, details = _status(lambda: channel.unary_unary("/no.Such/Method")(b"", timeout=10))
    assert code == grpc.StatusCode.UNIMPLEMENTED and "/no.Such/Method" in details
    code, details = _status(lambda: channel.stream_unary(f"/{SERVICE}/Upload")(iter([b"a", b"b"]), timeout=10))
    assert code == grpc.StatusCode.UNIMPLEMENTED and "streams requests" in details
    watch = channel.unary_stream("/grpc.health.v1.Health/Watch")
    code, details = _status(lambda: list(watch(b"\xff\xff\xff", timeout=10)))  # not a HealthCheckRequest
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "/grpc.health.v1.Health/Watch" in details
    code, details = _status(lambda: _call(channel, "Parsed", b"\xff\xff\xff"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"/{SERVICE}/Parsed" in details
    code, _ = _status(lambda: _call(channel, "Echo", b"x" * ((1 << 20) + 1)))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _call(channel, "Echo", b"still") == b"llits"  # and it goes on answering


def test_a_method_that_streams_sends_its_responses_in_order_and_ends_with_its_status(echo_server):
    _, channel, _ = echo_server
    assert list(channel.unary_stream(f"/{SERVICE}/Stream")(b"x", timeout=10)) == [b"x\x00", b"x\x01", b"x\x02"]
    for method, expected in (("StreamAbort", (grpc.StatusCode.OUT_OF_RANGE, "no more")),
                             ("StreamRaise", (grpc.StatusCode.UNKNOWN, "boom"))):
        got = []
        with pytest.raises(grpc.RpcError) as caught:
            for response in channel.unary_stream(f"/{SERVICE}/{method}")(b"", timeout=10):
                got.append(response)
        assert got == [b"first"], method
        assert caught.value.code() == expected[0] and expected[1] in caught.value.details(), method
    assert _call(channel, "Echo", b"on") == b"no"


def _watching(servicer, service):
    """How many health `Watch` calls follow `service` (the servicer drops one when its call's context ends)."""
    return len(servicer._send_response_callbacks.get(service, ()))


def _until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_a_health_watch_follows_the_status_holds_no_thread_and_ends_with_its_client(echo_server):
    echo, channel, server = echo_server
    stub = health_pb2_grpc.HealthStub(channel)
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    watches = [stub.Watch(health_pb2.HealthCheckRequest(service="ready"), timeout=30) for _ in range(5)]
    assert [next(watch).status for watch in watches] == [serving] * 5
    # Five open watches on two threads, and a unary call is still answered: a watch waits on no thread.
    assert _call(channel, "Echo", b"ab") == b"ba"
    echo.health.set("ready", not_serving)
    assert [next(watch).status for watch in watches] == [not_serving] * 5
    assert _watching(echo.health, "ready") == 5
    for watch in watches:
        watch.cancel()
    # The client's cancel ends each call on the server, whose end runs the servicer's callback.
    assert _until(lambda: _watching(echo.health, "ready") == 0)
    assert _until(lambda: not server._streams)
    echo.health.set("ready", serving)  # nobody to tell: nothing breaks
    assert stub.Check(health_pb2.HealthCheckRequest(service="ready")).status == serving


def test_stop_ends_an_open_watch_after_its_grace():
    server = NativeGrpcServer(max_threads=1, max_request_bytes=1 << 20)
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        started = time.perf_counter()
        assert server.stop(0.3).wait(10)
        assert time.perf_counter() - started < 5
        with pytest.raises(grpc.RpcError) as caught:
            next(watch)
        assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    assert _watching(servicer, "") == 0


def test_a_call_runs_on_the_thread_that_took_it_and_the_rest_wait(echo_server):
    echo, channel, _ = echo_server
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        started = time.perf_counter()
        answers = list(pool.map(lambda i: _call(channel, "Slow", bytes([i])), range(6)))
        elapsed = time.perf_counter() - started
    assert answers == [bytes([i]) for i in range(6)]
    assert echo.most_at_once <= 2  # max_threads: never more at once
    assert elapsed >= 0.55  # so the others waited: at least three rounds of 0.2 s on two threads


def test_a_client_that_gives_up_mid_call_leaves_the_server_answering(echo_server):
    echo, channel, _ = echo_server
    # The handler runs on after the client's deadline; its answer goes to a call already over.
    assert _status(lambda: _call(channel, "Slow", b"x", timeout=0.05))[0] == grpc.StatusCode.DEADLINE_EXCEEDED
    time.sleep(0.3)
    assert echo.running == 0
    assert [_call(channel, "Echo", bytes([i])) for i in range(5)] == [bytes([i]) for i in range(5)]


def test_stop_lets_a_call_in_flight_finish_and_then_refuses_calls():
    echo = Echo()
    server = NativeGrpcServer(max_threads=1, max_request_bytes=1 << 20)
    server.add_generic_rpc_handlers((_echo_handlers(echo),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(_call, channel, "Slow", b"late")
            time.sleep(0.05)
            assert server.stop(2.0).wait(5)
            assert in_flight.result() == b"late"
        assert _status(lambda: _call(channel, "Echo", b"x", timeout=2))[0] in (
            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert server.wait_for_termination(0)


def test_a_server_stopped_before_it_started_and_a_busy_port():
    idle = NativeGrpcServer(max_threads=3, max_request_bytes=1 << 20)
    with pytest.raises(ValueError, match="add_insecure_port"):
        idle.start()
    port = idle.add_insecure_port("127.0.0.1:0")
    assert idle.stop(0).wait(5)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"127.0.0.1:{taken}"):
            NativeGrpcServer(max_threads=1, max_request_bytes=1 << 20).add_insecure_port(f"127.0.0.1:{taken}")
    assert port > 0


@pytest.fixture(scope="module")
def native(exports):
    # The default (`--grpc_native=auto`): the native front end, since it is built here.
    server = ModelServer(configs_for(exports.base), port=0, poll_seconds=0, max_request_bytes=1 << 20).start()
    yield server
    server.stop()


def test_the_model_server_answers_as_on_the_python_grpc_server(exports, native, server):
    assert native.grpc_native and not native.grpc_asyncio
    assert not server.grpc_native  # the fixture of the other tests: grpc's Python server, named
    arrays = exports.data.arrays("test")
    inputs = {"story": arrays["story"][:3], "query": arrays["query"][:3]}
    with ServingClient(f"127.0.0.1:{native.port}") as ours, ServingClient(f"127.0.0.1:{server.port}") as theirs:
        got, expected = ours.predict("babi", inputs), theirs.predict("babi", inputs)
        assert sorted(got) == sorted(expected)
        for alias in expected:
            if expected[alias].dtype == object:
                assert (got[alias] == expected[alias]).all(), alias
            else:
                np.testing.assert_allclose(got[alias], expected[alias], rtol=1e-6, atol=1e-7)
        assert ours.status("babi") == theirs.status("babi")
        with pytest.raises(grpc.RpcError) as caught:
            ours.predict("nope", inputs)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_with_batching_concurrent_predicts_merge_on_the_native_front_end(exports):
    server = ModelServer(configs_for(exports.base, ("babi",)), port=0, poll_seconds=0, grpc_native=True,
                         batching={"max_batch_size": 16, "batch_timeout_micros": 50_000}).start()
    try:
        assert not server.grpc_asyncio
        arrays = exports.data.arrays("test")
        with batch_rows(server.manager.get("babi")) as rows, ServingClient(f"127.0.0.1:{server.port}") as client:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                got = list(pool.map(lambda i: client.predict(
                    "babi", {"story": arrays["story"][i:i + 1], "query": arrays["query"][i:i + 1]}), range(8)))
        assert all(outputs["probabilities"].shape[0] == 1 for outputs in got)
        assert sum(rows) == 8 and max(rows) > 1, rows
    finally:
        server.stop()


def test_the_flag_is_one_choice_of_grpc_server(exports):
    args = build_parser().parse_args(["--model_base_path", str(exports.base / "babi"), "--grpc_native=true"])
    assert args.grpc_native is True
    with pytest.raises(ValueError, match="native or on asyncio"):
        ModelServer(configs_for(exports.base, ("babi",)), port=0, grpc_native=True, grpc_asyncio=True)
    with pytest.raises(SystemExit):  # the command line says so before it loads anything
        main(["--port", "0", "--model_base_path", str(exports.base / "babi"), "--grpc_native=true",
              "--grpc_asyncio=true"])


def test_a_build_older_than_the_server_is_refused_with_what_to_do(monkeypatch):
    from keras_relmem_native import _grpc_front_end

    from keras_relmem.serving import grpc_native

    assert grpc_native.available() and grpc_native.unavailable_reason() is None
    monkeypatch.setattr(_grpc_front_end, "PROTOCOL", 1)  # what a build from before streaming would say
    assert not grpc_native.available()
    assert "rebuild" in grpc_native.unavailable_reason()
    with pytest.raises(RuntimeError, match="rebuild"):
        NativeGrpcServer(max_threads=1, max_request_bytes=1 << 20)


def test_a_stream_whose_start_fails_in_python_ends_with_internal_and_the_server_goes_on():
    server = NativeGrpcServer(max_threads=1, max_request_bytes=1 << 20)
    server.add_generic_rpc_handlers((_echo_handlers(Echo()),))

    def broken(handler, method, message, token):  # the C++ side's last guard, for a failure Python missed
        raise ZeroDivisionError("no stream")

    server._stream = broken
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            code, details = _status(lambda: list(channel.unary_stream(f"/{SERVICE}/Stream")(b"x", timeout=10)))
            assert code == grpc.StatusCode.INTERNAL and "no stream" in details
            assert _call(channel, "Echo", b"ok") == b"ko"
    finally:
        server.stop(1.0).wait()


def test_a_deferrable_method_is_answered_later_from_another_thread_and_holds_no_thread():
    from keras_relmem.serving.grpc_api import Deferrable

    timers = []

    def later(request, respond):  # answers 0.3 s later, from a timer's thread
        timer = threading.Timer(0.3, respond, args=(grpc.StatusCode.OK, "", request[::-1]))
        timers.append(timer)
        timer.start()

    def later_raise(request, respond):
        raise KeyError("lost")

    def later_refuse(request, respond):
        respond(grpc.StatusCode.NOT_FOUND, "gone", None)

    def now(request, context):
        return b"now:" + request

    methods = {name: grpc.unary_unary_rpc_method_handler(Deferrable(now, function))
               for name, function in (("Later", later), ("LaterRaise", later_raise), ("LaterRefuse", later_refuse))}
    server = NativeGrpcServer(max_threads=1, max_request_bytes=1 << 20)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert _status(lambda: _call(channel, "LaterRefuse")) == (grpc.StatusCode.NOT_FOUND, "gone")
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                got = list(pool.map(lambda i: _call(channel, "Later", bytes([i, 9])), range(6)))
            # One front-end thread, six calls each answered 0.3 s later: together, not one after another.
            assert time.monotonic() - started < 1.2
            assert got == [bytes([9, i]) for i in range(6)]
            code, details = _status(lambda: _call(channel, "LaterRaise"))
            assert code == grpc.StatusCode.UNKNOWN and "lost" in details
        assert Deferrable(now, later)(b"x", None) == b"now:x"  # what grpc's own servers call
    finally:
        server.stop(1.0).wait()
