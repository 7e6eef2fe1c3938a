"""Server-side batching merges concurrent requests and gives each its own rows back."""

import asyncio
import concurrent.futures
import threading

import grpc
import numpy as np
import pytest

from keras_relmem.serving.batching import Batcher, parse_batching_parameters
from keras_relmem.serving.client import ServingClient
from keras_relmem.serving.errors import ServingError
from keras_relmem.serving.server import ModelServer
from tests.serving.conftest import FakeServable, configs_for


class CountingModel:
    """`y = 2x + row sum`, recording the batch sizes it was called with."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, inputs):
        x = inputs["x"]
        with self.lock:
            self.calls.append(len(x))
        if (x < 0).any():
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "negative input")
        return {"y": 2 * x, "total": x.sum(axis=1)}


def submit_all(batcher, requests, delays=None):
    """Each request submitted from its own task on one event loop (as the server's front ends do): results
    and exceptions in order."""

    async def one(x, delay):
        await asyncio.sleep(delay)
        return await batcher.submit({"x": x})

    async def main():
        return await asyncio.gather(*(one(x, d) for x, d in zip(requests, delays or [0] * len(requests))),
                                    return_exceptions=True)

    return asyncio.run(main())


def test_concurrent_requests_share_batches_and_get_their_own_rows():
    model = CountingModel()
    batcher = Batcher(model, max_batch_size=8, timeout=0.2)
    requests = [np.full((1 + i % 2, 3), i, "float32") for i in range(12)]
    results = submit_all(batcher, requests)
    for x, result in zip(requests, results):
        np.testing.assert_array_equal(result["y"], 2 * x)
        np.testing.assert_array_equal(result["total"], x.sum(axis=1))
    assert sum(model.calls) == sum(len(x) for x in requests)
    assert max(model.calls) <= 8 and len(model.calls) < len(requests)


def test_a_bad_request_in_a_batch_fails_alone():
    model = CountingModel()
    batcher = Batcher(model, max_batch_size=8, timeout=0.2)
    requests = [np.ones((1, 2), "float32"), -np.ones((1, 2), "float32"), 3 * np.ones((1, 2), "float32")]
    results = submit_all(batcher, requests)
    np.testing.assert_array_equal(results[0]["y"], [[2, 2]])
    assert isinstance(results[1], ServingError) and "negative" in str(results[1])
    np.testing.assert_array_equal(results[2]["y"], [[6, 6]])
    # The three were merged into one batch, which failed; then each ran alone.
    assert model.calls == [3, 1, 1, 1]


def test_requests_that_cannot_be_batched_are_left_to_the_caller():
    batcher = Batcher(CountingModel(), max_batch_size=2, timeout=0.1)

    async def main():
        return [await batcher.submit(inputs) for inputs in (
            {"x": np.ones((3, 3))},  # more rows than a batch
            {"x": np.ones((1, 3)), "z": np.ones((2, 3))},  # ragged rows
            {"x": np.float32(1)},  # a scalar
        )]

    assert asyncio.run(main()) == [None, None, None]
    batcher.close()
    assert submit_all(batcher, [np.ones((1, 3))]) == [None]  # closed: the caller runs it


def test_a_full_queue_is_resource_exhausted():
    batcher = Batcher(CountingModel(), max_batch_size=8, timeout=0.2, max_enqueued=2)
    results = submit_all(batcher, [np.ones((1, 2), "float32")] * 3)
    assert isinstance(results[2], ServingError) and results[2].code == grpc.StatusCode.RESOURCE_EXHAUSTED
    np.testing.assert_array_equal(results[0]["y"], [[2, 2]])


def test_different_shapes_are_never_merged():
    model = CountingModel()
    batcher = Batcher(model, max_batch_size=8, timeout=0.2)
    results = submit_all(batcher, [np.ones((1, 2), "float32"), np.ones((1, 5), "float32")])
    assert [r["y"].shape for r in results] == [(1, 2), (1, 5)]
    assert sorted(model.calls) == [1, 1]


class SlowModel(CountingModel):
    """Each call takes `seconds`, releasing the GIL as a model call does; records how many ran at once."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds, self.running, self.most_at_once = seconds, 0, 0

    def __call__(self, inputs):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        threading.Event().wait(self.seconds)
        with self.lock:
            self.running -= 1
        return super().__call__(inputs)


@pytest.mark.parametrize("num_threads", [1, 3])
def test_num_batch_threads_is_how_many_batches_run_at_once(num_threads):
    # TF Serving's num_batch_threads: with one, batches run one after another (the next forms meanwhile);
    # with three, up to three at once. Batches of 2 rows, 12 requests: 6 batches.
    model = SlowModel(0.15)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        batcher = Batcher(model, max_batch_size=2, timeout=0.05, num_threads=num_threads, executor=pool)
        requests = [np.full((1, 3), i, "float32") for i in range(12)]
        results = submit_all(batcher, requests)
    for x, result in zip(requests, results):
        np.testing.assert_array_equal(result["y"], 2 * x)
    assert model.most_at_once == num_threads
    with pytest.raises(ValueError, match="num_batch_threads must be >= 1"):
        Batcher(model, num_threads=0)


def test_batching_parameters_file_format():
    text = (
        "max_batch_size { value: 16 }\nbatch_timeout_micros { value: 500 }  # comment\nnum_batch_threads { value: 4 }"
    )
    assert parse_batching_parameters(text) == {
        "max_batch_size": 16,
        "batch_timeout_micros": 500,
        "num_batch_threads": 4,
    }
    with pytest.raises(ValueError, match="cannot read .max_batch_size:16"):
        parse_batching_parameters("max_batch_size: 16")


def test_batched_server_answers_like_the_unbatched_one(exports, server):
    batched = ModelServer(configs_for(exports.base), port=0, poll_seconds=0,
                          batching={"max_batch_size": 16, "batch_timeout_micros": 20000}).start()
    arrays = exports.data.arrays("test")
    plain, merged = ServingClient(f"127.0.0.1:{server.port}"), ServingClient(f"127.0.0.1:{batched.port}")
    try:
        def ask(client, i):
            return client.predict("babi", {"story": arrays["story"][i:i + 1], "query": arrays["query"][i:i + 1]})

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda i: ask(merged, i), range(32)))
        for i, outputs in enumerate(got):
            want = ask(plain, i)
            np.testing.assert_allclose(outputs["probabilities"], want["probabilities"], rtol=1e-5, atol=1e-7)
            np.testing.assert_array_equal(outputs["top_answers"], want["top_answers"])
        words = merged.next_words("lm", "the company")
        assert len(words) == 3
    finally:
        plain.close()
        merged.close()
        batched.stop()


def test_unloading_a_version_stops_its_batcher_and_late_requests_run_unbatched(tmp_path):
    from keras_relmem.serving.core import ServingCore
    from keras_relmem.serving.manager import ModelManager

    (tmp_path / "m" / "1").mkdir(parents=True)
    configs = configs_for(tmp_path, ["m"])
    manager = ModelManager(configs, poll_seconds=-1, servable_factory=FakeServable)
    core = ServingCore(manager, batching={"max_batch_size": 4, "batch_timeout_micros": 0})
    manager.poll()
    old = manager.get("m")
    outputs = asyncio.run(core.predict(old, "serving_default", {"x": np.zeros((1, 2))}))
    np.testing.assert_array_equal(outputs["y"], [[1, 1]])
    old_batcher = core._batchers[(id(old), "serving_default")][1]

    (tmp_path / "m" / "2").mkdir()
    manager.poll()  # loads 2, unloads 1: its batcher must stop with it
    assert [s.version for s, _ in core._batchers.values()] == []
    assert old_batcher.closed

    # A request that resolved version 1 just before the swap still gets an answer from it.
    outputs = asyncio.run(core.predict(old, "serving_default", {"x": np.zeros((1, 2))}))
    np.testing.assert_array_equal(outputs["y"], [[1, 1]])
    assert core._batchers == {}  # and no new batcher for the unloaded version
    new = manager.get("m")
    outputs = asyncio.run(core.predict(new, "serving_default", {"x": np.zeros((1, 2))}))
    np.testing.assert_array_equal(outputs["y"], [[2, 2]])
    assert [s.version for s, _ in core._batchers.values()] == [2]
    core.close()
    assert core._batchers == {}
