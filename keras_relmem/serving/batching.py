"""Server-side batching: concurrent requests to one signature run as one call.

A request waits at most `timeout` seconds for others whose inputs have the same
shape apart from the batch dimension; together they run as one batch of at
most `max_batch_size` rows and each gets its own rows back. A request larger
than `max_batch_size`, or whose outputs do not have one row per input row,
runs alone. Like TF Serving's `--enable_batching`: it trades a little latency
for throughput under concurrent load.
"""

import collections
import concurrent.futures
import queue
import re
import threading
import time

import grpc
import numpy as np

from keras_relmem.serving.errors import ServingError


def parse_batching_parameters(text):
    """TF Serving's `--batching_parameters_file` (text `BatchingParameters`) -> dict.

    Reads `max_batch_size`, `batch_timeout_micros`, `num_batch_threads` and
    `max_enqueued_batches` (each `name { value: N }`); other fields are ignored.

    Example:

    ```python
    parse_batching_parameters("max_batch_size { value: 32 } batch_timeout_micros { value: 2000 }")
    # {'max_batch_size': 32, 'batch_timeout_micros': 2000}
    ```
    """
    known = ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")
    found = {}
    for name, value in re.findall(r"(\w+)\s*\{\s*value\s*:\s*(-?\d+)\s*\}", text):
        if name in known:
            found[name] = int(value)
    unparsed = re.sub(r"(\w+)\s*\{\s*value\s*:\s*-?\d+\s*\}|#[^\n]*|\s", "", text)
    if unparsed:
        raise ValueError(
            f"batching parameters: cannot read {unparsed[:60]!r}; expected lines like "
            "'max_batch_size { value: 32 }'."
        )
    return found


class _Pending:
    """One queued request: its inputs, and the future its outputs go to (an asyncio one when `loop` is given)."""

    def __init__(self, inputs, rows, loop=None):
        self.inputs = inputs
        self.rows = rows
        self.key = tuple(sorted((k, v.dtype.str, v.shape[1:]) for k, v in inputs.items()))
        self.loop = loop
        self.future = concurrent.futures.Future() if loop is None else loop.create_future()
        self.arrived = time.monotonic()


def _settle_all(settled):
    """Set each `(future, result, error)`; a future already done (its caller gave up) is left as it is."""
    for future, result, error in settled:
        if future.done():
            continue
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


class Batcher:
    """Groups concurrent runs of one servable signature.

    Args:
        run: `inputs dict -> outputs dict` (checked inputs, NumPy arrays).
        max_batch_size: rows per merged call.
        timeout: seconds the first request of a batch waits for company.
        max_enqueued: requests allowed to wait; beyond, RESOURCE_EXHAUSTED.
        num_threads: batches that may run at once (TF Serving's `num_batch_threads`).
            One thread forms a batch at a time; while batches run, the next one
            forms, so with several threads a slow batch does not hold up the next.

    Example:

    ```python
    batcher = Batcher(lambda checked: servable.call("serving_default", checked), 32, 0.002)
    outputs = batcher.submit(servable.check_inputs("serving_default", {"ids": ids}))
    ```
    """

    def __init__(self, run, max_batch_size=32, timeout=0.002, max_enqueued=1000, num_threads=1):
        if num_threads < 1:
            raise ValueError(f"num_batch_threads must be >= 1; got {num_threads}")
        self._run = run
        self.max_batch_size = max_batch_size
        self.timeout = timeout
        self._queue = queue.Queue(maxsize=max_enqueued)
        self._held = []
        self._closed = False
        self._closing = threading.Lock()
        # Only one thread reads the queue and `_held` at a time; the batches it forms run outside it.
        self._forming = threading.Lock()
        self._running = num_threads
        self._threads = [threading.Thread(target=self._loop, name=f"batcher-{i}", daemon=True)
                         for i in range(num_threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs):
        """Run `inputs` in a batch (or alone, see `submit_future`) and return its outputs; blocks until then."""
        future = self.submit_future(inputs)
        return self._run(inputs) if future is None else future.result()

    def submit_future(self, inputs, loop=None):
        """Queue `inputs` for a batch without waiting: a future of its outputs.

        Returns None for a request that must run alone (scalars, ragged rows, more rows than
        `max_batch_size`, or a batcher already closed): the caller runs it itself.

        Args:
            inputs: checked inputs (`{alias: np.ndarray}`).
            loop: for a caller on an asyncio event loop, that loop (and call this on its
                thread): the future is then an `asyncio.Future` to await, so no thread waits
                for the batch, and a batch hands all its results to the loop in one wake-up
                rather than one per request. None: a `concurrent.futures.Future`,
                settled on the batch's thread.

        Raises:
            ServingError: RESOURCE_EXHAUSTED when `max_enqueued` requests already wait.
        """
        rows = {v.shape[0] if v.ndim else -1 for v in inputs.values()}
        if len(rows) != 1 or -1 in rows or next(iter(rows)) > self.max_batch_size:
            return None
        pending = _Pending(inputs, rows.pop(), loop)
        with self._closing:
            if self._closed:  # the servable was replaced while this request came in
                return None
            try:
                self._queue.put_nowait(pending)
            except queue.Full:
                raise ServingError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "batching queue is full; retry later"
                ) from None
        return pending.future

    def close(self):
        """Finish what is queued, then stop the thread (the servable is no longer served)."""
        with self._closing:
            self._closed = True
            self._queue.put(_STOP)

    def _next(self, timeout):
        if self._held:
            return self._held.pop(0)
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def _loop(self):
        while True:
            with self._forming:
                formed = self._form()
            if formed is None:
                return
            self._execute(*formed)

    def _form(self):
        """The next `(batch, rows)`, or None when this thread is to stop (after close)."""
        first = self._next(None)
        if first is _STOP:
            self._running -= 1
            if self._running:  # the other threads stop too, once each forms its next batch
                self._held.insert(0, _STOP)
                return None
            self._deliver((pending, *self._alone(pending)) for pending in self._held)
            return None
        batch, rows = [first], first.rows
        deadline = first.arrived + self.timeout
        put_back = []
        while rows < self.max_batch_size:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=max(remaining, 0)) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP and item.key == first.key and rows + item.rows <= self.max_batch_size:
                batch.append(item)
                rows += item.rows
            else:
                put_back.append(item)
        self._held.extend(put_back)
        return batch, rows

    def _execute(self, batch, rows):
        self._deliver(self._outcomes(batch, rows))

    def _outcomes(self, batch, rows):
        """`(pending, result, error)` of each request of a formed batch, yielded as each is known: `_deliver`
        answers a thread's future then, so a request run on its own does not wait for the others' runs."""
        if len(batch) > 1:
            merged = {name: np.concatenate([p.inputs[name] for p in batch]) for name in batch[0].inputs}
            try:
                outputs = self._run(merged)
                if any(np.ndim(v) == 0 or len(v) != rows for v in outputs.values()):
                    raise _NotRowWise()
            except Exception:
                # One bad request, or outputs that are not one row per input:
                # each request runs on its own (below), so only the bad one fails.
                outputs = None
            if outputs is not None:
                start = 0
                for pending in batch:
                    stop = start + pending.rows
                    yield pending, {k: v[start:stop] for k, v in outputs.items()}, None
                    start = stop
                return
        for pending in batch:
            yield pending, *self._alone(pending)

    def _alone(self, pending):
        """`(result, error)` of running one request by itself."""
        try:
            return self._run(pending.inputs), None
        except Exception as error:
            return None, error

    @staticmethod
    def _deliver(settled):
        """Hand each `(pending, result, error)` to its future: thread futures at once, asyncio ones with one
        `call_soon_threadsafe` per loop (each call wakes the loop's thread and takes the GIL back and forth)."""
        by_loop = collections.defaultdict(list)
        for pending, result, error in settled:
            if pending.loop is None:
                _settle_all([(pending.future, result, error)])
            else:
                by_loop[pending.loop].append((pending.future, result, error))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_all, items)
            except RuntimeError:  # the loop closed (the server stopped): nobody waits for these any more
                pass


class _NotRowWise(Exception):
    pass


_STOP = object()
