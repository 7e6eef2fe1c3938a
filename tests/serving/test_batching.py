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


def test_concurrent_requests_share_batches_and_get_their_own_rows():
    model = CountingModel()
    batcher = Batcher(model, max_batch_size=8, timeout=0.2)
    requests = [np.full((1 + i % 2, 3), i, "float32") for i in range(12)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda x: batcher.submit({"x": x}), requests))
    for x, result in zip(requests, results):
        np.testing.assert_array_equal(result["y"], 2 * x)
        np.testing.assert_array_equal(result["total"], x.sum(axis=1))
    assert sum(model.calls) == sum(len(x) for x in requests)
    assert max(model.calls) <= 8 and len(model.calls) < len(requests)


def test_a_bad_request_in_a_batch_fails_alone():
    model = CountingModel()
    batcher = Batcher(model, max_batch_size=8, timeout=0.2)
    requests = [np.ones((1, 2), "float32"), -np.ones((1, 2), "float32"), 3 * np.ones((1, 2), "float32")]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(batcher.submit, {"x": x}) for x in requests]
    np.testing.assert_array_equal(futures[0].result()["y"], [[2, 2]])
    with pytest.raises(ServingError, match="negative"):
        futures[1].result()
    np.testing.assert_array_equal(futures[2].result()["y"], [[6, 6]])
    # The three were merged into one batch, which failed; then each ran alone.
    assert model.calls == [3, 1, 1, 1]


def test_after_a_failed_batch_each_request_is_answered_as_soon_as_it_ran_alone():
    answered_before_the_last_ran = []
    futures = []

    def run(inputs):
        x = inputs["x"]
        if (x < 0).any():
            raise ValueError("negative input")
        if len(x) == 1 and x[0, 0] == 3:  # the last request, run alone after the batch failed
            answered_before_the_last_ran.append(futures[0].done())
        return {"y": 2 * x}

    batcher = Batcher(run, max_batch_size=3, timeout=5.0)
    try:
        futures.extend(batcher.submit_future({"x": np.full((1, 2), x, "float32")}) for x in (1, -1, 3))
        np.testing.assert_array_equal(futures[2].result(timeout=10)["y"], [[6, 6]])
    finally:
        batcher.close()
    assert answered_before_the_last_ran == [True]
    np.testing.assert_array_equal(futures[0].result()["y"], [[2, 2]])
    with pytest.raises(ValueError, match="negative"):
        futures[1].result()


def test_different_shapes_are_never_merged():
    model = CountingModel()
    batcher = Batcher(model, max_batch_size=8, timeout=0.2)
    requests = [np.ones((1, 2), "float32"), np.ones((1, 5), "float32")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda x: batcher.submit({"x": x}), requests))
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
    # TF Serving's num_batch_threads: with one thread batches run one after another (the next forms
    # meanwhile); with three, up to three at once. Batches of 2 rows, 12 requests: 6 batches.
    model = SlowModel(0.15)
    batcher = Batcher(model, max_batch_size=2, timeout=0.05, num_threads=num_threads)
    requests = [np.full((1, 3), i, "float32") for i in range(12)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda x: batcher.submit({"x": x}), requests))
    for x, result in zip(requests, results):
        np.testing.assert_array_equal(result["y"], 2 * x)
    assert model.most_at_once == num_threads
    batcher.close()
    for thread in batcher._threads:
        thread.join(5)
    assert not any(thread.is_alive() for thread in batcher._threads)


def test_closing_a_batcher_of_several_threads_still_answers_what_it_holds():
    model = SlowModel(0.05)
    batcher = Batcher(model, max_batch_size=1, timeout=0.0, num_threads=2)
    requests = [np.full((1, 2), i, "float32") for i in range(6)]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(batcher.submit, {"x": x}) for x in requests]
        threading.Event().wait(0.02)
        batcher.close()
    for x, future in zip(requests, futures):
        np.testing.assert_array_equal(future.result(timeout=5)["y"], 2 * x)
    for thread in batcher._threads:
        thread.join(5)
    assert not any(thread.is_alive() for thread in batcher._threads)
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
    for thread in old_batcher._threads:
        thread.join(5)
    assert old_batcher._closed and not any(thread.is_alive() for thread in old_batcher._threads)

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
