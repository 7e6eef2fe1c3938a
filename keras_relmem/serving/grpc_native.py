"""The gRPC front end on the C++ gRPC library (`--grpc_native`, the default where it is installed): the servicers
of the Python server, called from C++ threads.

On two small cores, Python's gRPC servers spend about a third of a
millisecond of interpreter time on every call before the model runs (HTTP/2
in C, then a polling thread, a worker pool and several completion-queue
round trips in Python); TF Serving's C++ server spends a fraction of that.
`NativeGrpcServer` leaves the transport to the system's C++ gRPC library
(the `keras-relmem-native` package in `native/`, built against it) and makes
each unary call one Python call on the thread that received it: the request's
bytes in, the servicer's method (the same `PredictionService`, `ModelService`
and health servicer the other servers run), the response's bytes out.

It takes the servicers as `grpc.server` does (the generated
`add_..._to_server` functions call `add_generic_rpc_handlers`), and has the
methods `ModelServer` uses of a server: `add_insecure_port`, `start`, `stop`,
`wait_for_termination`. A unary method wrapped as a `grpc_api.Deferrable`
(a Predict with batching) is answered later instead, from whichever thread
has its answer, so it holds no thread while it waits. Everything TF
Serving's APIs have is unary; methods that stream their responses (the
health service's `Watch`) are served too, as grpc's own server serves them:
a servicer marked `experimental_non_blocking` (the health servicer) answers
through a callback and holds no thread while it waits, any other streams
from its own thread, and a call's end (finished, cancelled by the client, or
cut at shutdown) runs the callbacks its context was given. Methods that
stream requests answer UNIMPLEMENTED.

Example:

```python
server = NativeGrpcServer(max_threads=8, max_request_bytes=64 << 20)
health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
server.stop(2.0).wait()
```
"""

import atexit
import logging
import threading

import grpc

log = logging.getLogger("keras_relmem.serving")

_UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
_INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
_UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
_INTERNAL = grpc.StatusCode.INTERNAL.value[0]
# What a server asked for the native front end says where it is not installed.
NOT_INSTALLED = ("the native gRPC front end needs the keras-relmem-native package, built against the system's "
                 "gRPC C++ library: see 'A native gRPC front end' in docs/serving.md")


# The C++ side's protocol this module speaks (`_grpc_front_end.PROTOCOL`): 2 added streaming responses, 3 unary
# calls answered later (and every call's token given to the handler).
PROTOCOL = 3
OUTDATED = ("the keras-relmem-native package installed is older than this keras-relmem: rebuild it "
            "(pip install ./native; see 'A native gRPC front end' in docs/serving.md)")


def _front_end_module():
    """The C++ module; ImportError when it is not built, RuntimeError when it is built from older sources."""
    from keras_relmem_native import _grpc_front_end
    if getattr(_grpc_front_end, "PROTOCOL", 1) != PROTOCOL:
        raise RuntimeError(OUTDATED)
    return _grpc_front_end


def unavailable_reason():
    """None when the native front end is installed and current; otherwise why not (`NOT_INSTALLED`,
    `OUTDATED`)."""
    try:
        _front_end_module()
    except ImportError:
        return NOT_INSTALLED
    except RuntimeError as error:
        return str(error)
    return None


def available():
    """Whether the native front end is installed, and current (the `keras-relmem-native` package, built from
    `native/`)."""
    return unavailable_reason() is None


class _Abort(Exception):
    """`context.abort` on this front end: ends the method with a status."""


class _HandlerCallDetails(grpc.HandlerCallDetails):
    def __init__(self, method):
        self.method = method
        self.invocation_metadata = ()


class _Context:
    """The parts of `grpc.ServicerContext` a unary servicer uses: abort, set_code/set_details, and harmless
    answers for the rest (no metadata, no deadline, always active)."""

    def __init__(self):
        self.code = None
        self.details = ""

    def abort(self, code, details):
        self.code, self.details = code, details or ""
        raise _Abort()

    def abort_with_status(self, status):
        self.abort(status.code, status.details)

    def set_code(self, code):
        self.code = code

    def set_details(self, details):
        self.details = details or ""

    def invocation_metadata(self):
        return ()

    def set_trailing_metadata(self, metadata):
        pass

    def send_initial_metadata(self, metadata):
        pass

    def peer(self):
        return ""

    def is_active(self):
        return True

    def time_remaining(self):
        return None

    def add_callback(self, callback):
        return False


class _StreamContext(_Context):
    """A streaming call's context: active until the call is over, when the callbacks it was given run."""

    def __init__(self):
        super().__init__()
        self._callbacks = []
        self._over = False

    def is_active(self):
        return not self._over

    def add_callback(self, callback):
        if self._over:
            return False
        self._callbacks.append(callback)
        return True

    def end(self):
        self._over = True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception as error:  # one failing callback must not keep the others from running
                log.error("a gRPC stream's callback failed: %s: %s", type(error).__name__, error)


def _status(code):
    return code.value[0] if isinstance(code, grpc.StatusCode) else int(code)


def _read(handler, method, request):
    """`(message, None)`, or `(None, (code, details))` for a request that is not the method's message (the
    client's fault: INVALID_ARGUMENT naming the method)."""
    try:
        return (handler.request_deserializer(request) if handler.request_deserializer else request), None
    except Exception as error:
        return None, (_INVALID_ARGUMENT, f"cannot read the request of {method}: {type(error).__name__}: {error}")


def _failure(method, context, error):
    """`(code, details)` a method's exception ends its call with: an abort's status, or UNKNOWN, as grpc's own
    servers answer (the method's failure is the call's, not the server's)."""
    if isinstance(error, _Abort):
        return _status(context.code), context.details
    log.error("%s failed: %s: %s", method, type(error).__name__, error)
    return _UNKNOWN, f"Exception calling application: {error}"


class NativeGrpcServer:
    """A gRPC server whose transport is C++ and whose methods are the registered Python servicers'.

    Args:
        max_threads: threads answering calls, each its own C++ completion
            queue; a call runs on the thread that took it, so this many calls
            run at once (more wait in gRPC for a free thread).
        max_request_bytes: the largest request accepted (larger ones get
            RESOURCE_EXHAUSTED from gRPC).

    Raises:
        RuntimeError: the native package is not installed, or is built from
            older sources than this module (it says to rebuild it).
    """

    def __init__(self, max_threads, max_request_bytes):
        try:
            module = _front_end_module()
        except ImportError as error:
            raise RuntimeError(NOT_INSTALLED) from error
        self._front_end_type = module.FrontEnd
        self._stream_code, self._later_code = module.STREAM, module.LATER
        self._streams = {}  # token -> (_StreamContext) of each open streaming call
        self._max_threads = max_threads
        self._max_request_bytes = max_request_bytes
        self._generic = []
        self._methods = {}
        self._front_end = None
        self._threads = []
        self._stopped = threading.Event()

    # -- what grpc.server's callers use -----------------------------------------------------------------
    def add_generic_rpc_handlers(self, handlers):
        self._generic.extend(handlers)

    def add_registered_method_handlers(self, service_name, method_handlers):
        for name, handler in method_handlers.items():
            self._methods[f"/{service_name}/{name}"] = handler

    def add_insecure_port(self, address):
        """Bind `address` (`host:port`, port 0 picks a free one) and return the port; one port per server.

        Calls that arrive before `start` wait for it. Raises RuntimeError when the address cannot be bound.
        """
        if self._front_end is not None:
            raise ValueError("the native gRPC front end listens on one address")
        self._front_end = self._front_end_type(self._answer, self._stream_done, address, self._max_threads,
                                               self._max_request_bytes)
        return self._front_end.port

    def start(self):
        if self._front_end is None:
            raise ValueError("add_insecure_port first: the server has no address")
        for index in range(self._max_threads):
            thread = threading.Thread(target=self._front_end.serve, args=(index,), name=f"grpc-native-{index}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        # A server left running at exit stops before the interpreter goes: its threads would otherwise call into
        # an interpreter that is being torn down.
        atexit.register(self.stop, 0)

    def stop(self, grace):
        """Stop taking calls, let those in flight finish for `grace` seconds; returns an event set when done."""
        atexit.unregister(self.stop)
        if self._front_end is not None:
            self._front_end.shutdown(grace or 0.0)
        for thread in self._threads:
            thread.join()
        self._stopped.set()
        return self._stopped

    def wait_for_termination(self, timeout=None):
        return self._stopped.wait(timeout)

    # -- one call ----------------------------------------------------------------------------------------
    def _handler(self, method):
        if method not in self._methods:
            details = _HandlerCallDetails(method)
            found = next((h for h in (g.service(details) for g in self._generic) if h is not None), None)
            self._methods[method] = found
        return self._methods[method]

    def _answer(self, method, request, token):
        """`(status code, details, response bytes)` of one call: what the C++ side sends back; or
        `(STREAM or LATER, "", b"")` for a call answered through `token` (`_stream`, `_later`)."""
        handler = self._handler(method)
        if handler is None:
            return _UNIMPLEMENTED, f"Method not found: {method}", b""
        if handler.request_streaming:
            return _UNIMPLEMENTED, f"{method} streams requests, which this gRPC front end does not serve", b""
        message, refused = _read(handler, method, request)
        if refused:
            return (*refused, b"")
        if handler.response_streaming:
            self._stream(handler, method, message, token)
            return self._stream_code, "", b""
        later = getattr(handler.unary_unary, "later", None)
        if later is not None:
            self._later(handler, method, message, token, later)
            return self._later_code, "", b""
        context = _Context()
        try:
            response = handler.unary_unary(message, context)
        except Exception as error:
            return (*_failure(method, context, error), b"")
        if context.code is not None and context.code != grpc.StatusCode.OK:
            return _status(context.code), context.details, b""
        try:
            data = handler.response_serializer(response) if handler.response_serializer else response
        except Exception as error:
            log.error("%s: cannot serialize the response: %s", method, error)
            return _INTERNAL, f"cannot serialize the response of {method}", b""
        return 0, "", data

    # -- a unary call answered later (`grpc_api.Deferrable`: a Predict waiting for its batch) --------------
    def _later(self, handler, method, message, token, later):
        """Hand `message` to `later(message, respond)`; `respond` sends the call's one response and status
        from whichever thread has it, with no thread waiting for it meanwhile."""
        front_end = self._front_end
        serialize = handler.response_serializer or (lambda response: response)

        def respond(code, details, response):
            code = _status(code)
            if code != 0:
                front_end.finish(token, code, details)
                return
            try:
                data = serialize(response)
            except Exception as error:
                log.error("%s: cannot serialize the response: %s", method, error)
                front_end.finish(token, _INTERNAL, f"cannot serialize the response of {method}")
                return
            front_end.finish(token, 0, "", data)

        try:
            later(message, respond)
        except Exception as error:  # (`later` answers its own failures; this is the last guard)
            front_end.finish(token, *_failure(method, _Context(), error))

    # -- a call that streams its responses -------------------------------------------------------------
    def _stream(self, handler, method, message, token):
        """Start streaming call `token`: answered by `write`/`finish` on the front end, now or later."""
        front_end = self._front_end
        context = self._streams[token] = _StreamContext()
        serialize = handler.response_serializer or (lambda response: response)
        if getattr(handler.unary_stream, "experimental_non_blocking", False):
            # grpc's non-blocking streaming (the health servicer's `Watch`): the method answers through
            # `send`, now or from other threads, and returns; None ends the call with OK.
            def send(response):
                if response is None:
                    front_end.finish(token, 0, "")
                else:
                    front_end.write(token, serialize(response))

            self._run_stream(method, token, context,
                             lambda: handler.unary_stream(message, context, send_response_callback=send))
            return

        # Any other method is a generator, iterated on a thread of its own (grpc's server lends it a pool thread).
        def send_all():
            for response in handler.unary_stream(message, context):
                if not front_end.write(token, serialize(response)):
                    return  # the call is over: the client went away, or the server stops
            front_end.finish(token, 0, "")

        threading.Thread(target=self._run_stream, args=(method, token, context, send_all),
                         name=f"grpc-native-stream-{token}", daemon=True).start()

    def _run_stream(self, method, token, context, run):
        try:
            run()
        except Exception as error:
            self._front_end.finish(token, *_failure(method, context, error))

    def _stream_done(self, token):
        """Streaming call `token` is over: its context's callbacks run (a health `Watch` stops watching)."""
        context = self._streams.pop(token, None)
        if context is not None:
            context.end()
