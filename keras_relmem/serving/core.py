"""The one Predict path both front ends (gRPC and REST) share: request -> servable -> one call -> outputs.

A front end resolves the servable and signature, then awaits `ServingCore.predict` on the server's
event loop: with batching the checked inputs join a batch (`Batcher`) and the loop awaits its
answer; otherwise the checks and the model call run on one of the core's worker threads. At most
`max_waiting` requests wait for a worker; more are refused (UNAVAILABLE), so threads and queued
memory stay bounded whatever the load.
"""

import asyncio
import concurrent.futures
import os
import threading
import time

import grpc
from tensorflow_serving.apis import get_model_metadata_pb2

from keras_relmem.serving.batching import Batcher
from keras_relmem.serving.errors import ServingError
from keras_relmem.serving.servable import select_outputs


class ServingCore:
    """Predict, metadata and status over a `ModelManager`, with optional batching.

    Args:
        manager: the `ModelManager`.
        batching: None, or a dict with `max_batch_size`, `batch_timeout_micros`
            and optionally `max_enqueued_batches` and `num_batch_threads`.
        num_threads: worker threads for model work (default 4 per CPU).
        max_waiting: requests allowed to wait for a worker (default 16 per thread).

    Example:

    ```python
    core = ServingCore(manager, batching={"max_batch_size": 32, "batch_timeout_micros": 2000})
    outputs = await core.predict(servable, "answer", inputs)   # on the server's event loop
    ```
    """

    def __init__(self, manager, batching=None, num_threads=None, max_waiting=None):
        self.manager = manager
        self.batching = batching
        self.metrics = None  # a ServingMetrics when the server counts requests
        self.num_threads = num_threads or 4 * (os.cpu_count() or 1)
        self.max_waiting = 16 * self.num_threads if max_waiting is None else max_waiting
        self.executor = concurrent.futures.ThreadPoolExecutor(self.num_threads, thread_name_prefix="serving")
        self._slots = None  # an asyncio.Semaphore, made on the loop that first uses it
        self._waiting = 0
        self._batchers = {}  # (id(servable), signature key) -> (servable, Batcher)
        self._lock = threading.Lock()
        # A version's batcher (and its thread) goes when the version is unloaded.
        manager.listeners.append(self.close_unserved)

    async def run(self, function, *args):
        """`function(*args)` on a worker thread, waiting for a free one (UNAVAILABLE when too many wait).

        The worker is held until the work ends, even when the caller stops waiting (a deadline): a
        request's work is bounded by `Servable.call`'s slices and deadline checks instead.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.num_threads)
        if self._waiting >= self.max_waiting:
            raise ServingError(grpc.StatusCode.UNAVAILABLE, f"server busy: {self._waiting} requests are waiting "
                                                            "for a worker; retry later")
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        future = asyncio.get_running_loop().run_in_executor(self.executor, function, *args)
        future.add_done_callback(lambda _: self._slots.release())
        return await asyncio.shield(future)

    async def predict(self, servable, key, inputs, output_filter=(), exact_dtypes=True, timeout=None):
        """Check and run one request on `servable`'s signature `key`; `{output alias: np.ndarray}`.

        Args:
            servable, key: what the front end resolved (`manager.get`, `servable.signature`).
            inputs: `{alias: array}` as read from the request.
            output_filter: the aliases to return (all when empty).
            exact_dtypes: False for JSON, whose numbers carry no dtype (`Servable.check_inputs`).
            timeout: seconds the request may take; work not started by then is not started, and a
                large request stops between its slices (DEADLINE_EXCEEDED).
        """
        servable.check_outputs(key, output_filter)
        deadline = None if timeout is None else time.monotonic() + timeout
        batcher = self._batcher(servable, key) if self.batching else None
        if batcher is not None:
            checked = servable.check_inputs(key, inputs, exact_dtypes)
            outputs = await batcher.submit(checked)
            if outputs is not None:
                return select_outputs(outputs, output_filter)
            return await self.run(servable.call, key, checked, output_filter, deadline)  # it runs alone

        def check_and_call():
            return servable.call(key, servable.check_inputs(key, inputs, exact_dtypes), output_filter, deadline)

        return await self.run(check_and_call)

    def _batcher(self, servable, key):
        """The servable's batcher, or None for a version already unloaded (it runs unbatched)."""
        with self._lock:
            batcher_key = (id(servable), key)
            if batcher_key not in self._batchers:
                if not self.manager.is_served(servable):
                    return None
                size = self.batching.get("max_batch_size", 32)
                self._batchers[batcher_key] = servable, Batcher(
                    lambda checked, s=servable, k=key: s.call(k, checked),
                    max_batch_size=size,
                    timeout=self.batching.get("batch_timeout_micros", 2000) / 1e6,
                    max_enqueued=self.batching.get("max_enqueued_batches", 100) * size,
                    num_threads=self.batching.get("num_batch_threads", 1),
                    executor=self.executor,
                )
            return self._batchers[batcher_key][1]

    def close_unserved(self):
        """Stop the batchers of versions no longer served; what they hold still runs."""
        with self._lock:
            for old in [k for k, (s, _) in self._batchers.items() if not self.manager.is_served(s)]:
                self._batchers.pop(old)[1].close()

    def close(self):
        """Stop every batcher and the workers (the server is stopping)."""
        with self._lock:
            while self._batchers:
                self._batchers.popitem()[1][1].close()
        self.executor.shutdown(wait=False, cancel_futures=True)

    def metadata(self, name, version=None, label=None):
        """`(servable, SignatureDefMap proto)` as GetModelMetadata reports it."""
        servable = self.manager.get(name, version, label)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature_def in servable.signature_defs.items():
            signature_map.signature_def[key].CopyFrom(signature_def)
        return servable, signature_map
