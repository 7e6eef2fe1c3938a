"""What both front ends (gRPC and REST) do with a request, independent of the wire format."""

import threading

from tensorflow_serving.apis import get_model_metadata_pb2

from keras_relmem.serving.batching import Batcher
from keras_relmem.serving.servable import select_outputs


class ServingCore:
    """Predict, metadata and status over a `ModelManager`, with optional batching.

    Args:
        manager: the `ModelManager`.
        batching: None, or a dict with `max_batch_size`, `batch_timeout_micros`
            and optionally `max_enqueued_batches` and `num_batch_threads`.

    Example:

    ```python
    core = ServingCore(manager, batching={"max_batch_size": 32, "batch_timeout_micros": 2000})
    servable, signature, outputs = core.predict("babi", None, None, "answer", inputs)
    ```
    """

    def __init__(self, manager, batching=None):
        self.manager = manager
        self.batching = batching
        self.metrics = None  # a ServingMetrics when the server counts requests
        self._batchers = {}  # (id(servable), signature key) -> (servable, Batcher)
        self._lock = threading.Lock()
        # A version's batcher (and its thread) goes when the version is unloaded.
        manager.listeners.append(self.close_unserved)

    def predict(self, name, version, label, signature_name, inputs, output_filter=(), exact_dtypes=True):
        """Resolve the model version, then `predict_on` it; `(servable, signature key, outputs)`."""
        servable = self.manager.get(name, version, label)
        return self.predict_on(servable, signature_name, inputs, output_filter, exact_dtypes)

    def predict_on(self, servable, signature_name, inputs, output_filter=(), exact_dtypes=True):
        """Check and run one request on a servable the caller already resolved.

        Inputs are checked once, here; a batch merges checked inputs only.
        """
        key, _ = servable.signature(signature_name)
        servable.check_outputs(key, output_filter)
        _, checked, future = self.batch_future(servable, key, inputs, exact_dtypes)
        if future is None:
            return servable, key, servable.call(key, checked, output_filter)
        return servable, key, select_outputs(future.result(), output_filter)

    def batch_future(self, servable, signature_name, inputs, exact_dtypes=True, loop=None):
        """Check a request and queue it for a batch without waiting for it.

        Returns `(signature key, checked inputs, future of the outputs)`; the future is None when batching
        is off or the request runs alone, and then the caller runs it (`servable.call(key, checked)`). For
        callers on an event loop, which must not block while the batch forms: given their `loop`, the
        future is an `asyncio.Future` (see `Batcher.submit_future`).
        """
        key, _ = servable.signature(signature_name)
        checked = servable.check_inputs(key, inputs, exact_dtypes)
        batcher = self._batcher(servable, key) if self.batching else None
        return key, checked, (batcher.submit_future(checked, loop) if batcher is not None else None)

    def _batcher(self, servable, key):
        """The servable's batcher, or None for a version already unloaded (it runs unbatched)."""
        with self._lock:
            batcher_key = (id(servable), key)
            if batcher_key not in self._batchers:
                if not self.manager.is_served(servable):
                    return None
                self._batchers[batcher_key] = servable, Batcher(
                    lambda checked, s=servable, k=key: s.call(k, checked),
                    max_batch_size=self.batching.get("max_batch_size", 32),
                    timeout=self.batching.get("batch_timeout_micros", 2000) / 1e6,
                    max_enqueued=self.batching.get("max_enqueued_batches", 100)
                    * self.batching.get("max_batch_size", 32),
                    num_threads=self.batching.get("num_batch_threads", 1),
                )
            return self._batchers[batcher_key][1]

    def close_unserved(self):
        """Stop the batchers of versions no longer served; what they hold still runs."""
        with self._lock:
            for old in [k for k, (s, _) in self._batchers.items() if not self.manager.is_served(s)]:
                self._batchers.pop(old)[1].close()

    def close(self):
        """Stop every batcher (the server is stopping)."""
        with self._lock:
            while self._batchers:
                self._batchers.popitem()[1][1].close()

    def metadata(self, name, version=None, label=None):
        """`(servable, SignatureDefMap proto)` as GetModelMetadata reports it."""
        servable = self.manager.get(name, version, label)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for key, signature_def in servable.signature_defs.items():
            signature_map.signature_def[key].CopyFrom(signature_def)
        return servable, signature_map
