"""Server-side batching, on the server's event loop: concurrent requests to one signature run as one call.

A request waits at most `timeout` seconds for others whose inputs have the same
shape apart from the batch dimension; together they run as one batch of at
most `max_batch_size` rows (on a worker thread) and each gets its own rows
back. A request larger than `max_batch_size`, or one with scalar or ragged
inputs, runs alone; a batch that fails, or whose outputs do not have one row
per input row, runs each of its requests alone, so only a bad one fails. Like
TF Serving's `--enable_batching`: it trades a little latency for throughput
under concurrent load. A request waiting for its batch holds no thread.
"""

import asyncio
import re

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


class Batcher:
    """Groups concurrent requests to one servable signature, on the event loop that submits them.

    Args:
        run: `checked inputs -> outputs` (NumPy dicts); it blocks, so it runs on `executor`.
        max_batch_size: rows per merged call.
        timeout: seconds the first request of a batch waits for company.
        max_enqueued: requests allowed to wait; beyond, RESOURCE_EXHAUSTED.
        num_threads: batches that may run at once (TF Serving's `num_batch_threads`); while
            they run, the next batch forms.
        executor: where batches run (None: the loop's default executor).

    Example:

    ```python
    batcher = Batcher(lambda checked: servable.call("serving_default", checked), 32, 0.002)
    outputs = await batcher.submit(servable.check_inputs("serving_default", {"ids": ids}))
    ```
    """

    def __init__(self, run, max_batch_size=32, timeout=0.002, max_enqueued=1000, num_threads=1, executor=None):
        if num_threads < 1:
            raise ValueError(f"num_batch_threads must be >= 1; got {num_threads}")
        self._run = run
        self.max_batch_size = max_batch_size
        self.timeout = timeout
        self.max_enqueued = max_enqueued
        self.num_threads = num_threads
        self._executor = executor
        self._forming = {}  # the inputs' shapes -> [(inputs, rows, future)], the batch now forming
        self._timers = {}
        self._running = None  # asyncio.Semaphore(num_threads), made on the loop
        self._enqueued = 0
        self.closed = False

    def rows(self, inputs):
        """The rows of a request a batch can take, or None for one that must run alone."""
        rows = {v.shape[0] if np.ndim(v) else -1 for v in inputs.values()}
        if self.closed or len(rows) != 1 or -1 in rows or next(iter(rows)) > self.max_batch_size:
            return None
        return rows.pop()

    async def submit(self, inputs):
        """The outputs of `inputs` run in a batch (its own rows), or None when it must run alone (`rows`):
        the caller runs it itself.

        Raises:
            ServingError: RESOURCE_EXHAUSTED when `max_enqueued` requests already wait; or what the
                request's own run raised.
        """
        rows = self.rows(inputs)
        if rows is None:
            return None
        if self._enqueued >= self.max_enqueued:
            raise ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, "batching queue is full; retry later")
        loop = asyncio.get_running_loop()
        key = tuple(sorted((k, v.dtype.str, v.shape[1:]) for k, v in inputs.items()))
        if sum(r for _, r, _ in self._forming.get(key, ())) + rows > self.max_batch_size:
            self._flush(key)
        future = loop.create_future()
        group = self._forming.setdefault(key, [])
        group.append((inputs, rows, future))
        self._enqueued += 1
        if sum(r for _, r, _ in group) == self.max_batch_size:
            self._flush(key)
        elif len(group) == 1:
            self._timers[key] = loop.call_later(self.timeout, self._flush, key)
        # Shielded: a caller that gives up leaves its rows to the batch rather than cancelling the others'.
        return await asyncio.shield(future)

    def _flush(self, key):
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        group = self._forming.pop(key, None)
        if group:
            asyncio.get_running_loop().create_task(self._execute(group))

    async def _execute(self, group):
        if self._running is None:
            self._running = asyncio.Semaphore(self.num_threads)
        loop = asyncio.get_running_loop()
        try:
            async with self._running:
                outcomes = await loop.run_in_executor(self._executor, self._outcomes, group)
        except BaseException as error:  # (the executor shut down): every caller hears of it
            outcomes = [(None, error)] * len(group)
        finally:
            self._enqueued -= len(group)
        for (_, _, future), (result, error) in zip(group, outcomes):
            if not future.done():
                future.set_result(result) if error is None else future.set_exception(error)

    def _outcomes(self, group):
        """`(result, error)` of each request of a batch: one merged call, or each alone when that fails."""
        if len(group) > 1:
            total = sum(rows for _, rows, _ in group)
            try:
                outputs = self._run({name: np.concatenate([inputs[name] for inputs, _, _ in group])
                                     for name in group[0][0]})
                if not any(np.ndim(v) == 0 or len(v) != total for v in outputs.values()):
                    bounds = np.cumsum([0] + [rows for _, rows, _ in group])
                    return [({k: v[a:b] for k, v in outputs.items()}, None) for a, b in zip(bounds, bounds[1:])]
            except Exception:  # one bad request: each runs on its own below, so only the bad one fails
                pass
        return [self._alone(inputs) for inputs, _, _ in group]

    def _alone(self, inputs):
        try:
            return self._run(inputs), None
        except Exception as error:
            return None, error

    def close(self):
        """Take no more requests (the servable is no longer served); the batches forming still run."""
        self.closed = True
