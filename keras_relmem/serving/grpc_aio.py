"""The gRPC front end on asyncio, for batching: a Predict waits for its batch without holding a thread.

The synchronous gRPC server gives each request a thread from its pool. With
batching on, 32 concurrent clients are 32 threads, each waking to hand its
request to the batcher and again to take its answer, all contending for the
interpreter lock with the batch's own thread. On gRPC's asyncio server the
event loop parses each request, queues it for its batch and awaits the
batch's answer (`Batcher.submit_future`, one wake-up per batch), as the REST
server's event loop does. Requests that run alone (larger than a batch, or on
a version being unloaded) run on a worker thread; every other method
(metadata, status, classify, regress, health) is the synchronous servicer's,
run on gRPC's thread pool for them.

With 32 concurrent native gRPC clients on two cores, the batching server
answered more requests/s this way than on the synchronous server with one
TensorFlow thread each, and about as many with TensorFlow's default threads
(the serving results, `bench.serving_latency`, hold the figures).
`--grpc_asyncio=false` keeps the synchronous server with batching.
"""

import asyncio
import concurrent.futures
import threading

import grpc

from keras_relmem.serving.event_loops import new_event_loop
from keras_relmem.serving.grpc_api import (
    PredictionService,
    _guarded,
    predict_in_graph,
    predict_inputs,
    predict_response,
)
from keras_relmem.serving.servable import select_outputs


class AsyncPredictionService(PredictionService):
    """`PredictionService` whose Predict is a coroutine on gRPC's asyncio server.

    Args:
        core: the `ServingCore` (with batching on, or every request runs on `executor`).
        executor: where requests that run alone are called.

    Example:

    ```python
    server = AsyncGrpcServer(options=[], max_threads=32)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        AsyncPredictionService(core, executor), server.server)
    ```
    """

    def __init__(self, core, executor, in_graph=True):
        super().__init__(core, in_graph)
        self._executor = executor

    @_guarded("predict")
    async def Predict(self, request, context, record):
        loop = asyncio.get_running_loop()
        if self.in_graph:
            response = await loop.run_in_executor(self._executor, predict_in_graph, self.core, request, record)
            if response is not None:
                return response
        servable, key, inputs = predict_inputs(self.core, request, record)
        output_filter = tuple(request.output_filter)
        servable.check_outputs(key, output_filter)
        key, checked, future = self.core.batch_future(servable, key, inputs, loop=loop)
        if future is None:
            outputs = await loop.run_in_executor(self._executor, servable.call, key, checked, output_filter)
        else:
            outputs = select_outputs(await future, output_filter)
        return predict_response(servable, key, outputs)


class AsyncGrpcServer:
    """gRPC's asyncio server on an event loop thread of its own, started and stopped as the synchronous one is.

    Args:
        options: the channel options (`grpc.server`'s).
        max_threads: threads for the synchronous handlers and for requests that run alone.
        event_loop: "auto", "uvloop" or "asyncio" (`event_loops.new_event_loop`).

    Example:

    ```python
    server = AsyncGrpcServer(options=[("grpc.so_reuseport", 0)], max_threads=32)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    server.stop(2.0).wait()
    ```
    """

    def __init__(self, options, max_threads, event_loop="auto"):
        self._loop = new_event_loop(event_loop)
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="grpc")
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc-aio", daemon=True)
        self._thread.start()
        self.server = self._run(self._create(options))

    async def _create(self, options):
        return grpc.aio.server(migration_thread_pool=self.executor, options=options)

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def add_insecure_port(self, address):
        async def add():
            return self.server.add_insecure_port(address)

        return self._run(add())

    def start(self):
        self._run(self.server.start())

    def wait_for_termination(self):
        self._run(self.server.wait_for_termination())

    def stop(self, grace):
        """Stop taking calls, let those in flight finish for `grace` seconds; returns an event set when done."""
        done = threading.Event()
        if self._loop.is_running():
            self._run(self.server.stop(grace))
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self.executor.shutdown(wait=False)
        done.set()
        return done
