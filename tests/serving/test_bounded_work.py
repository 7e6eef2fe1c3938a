"""Bounded work per request (issue 102): a request larger than one call takes runs in slices of
`--max_rows_per_call` rows, an out-of-memory in the model is RESOURCE_EXHAUSTED (never INTERNAL with an op name),
and a request past its deadline stops its work."""

import logging
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from keras_relmem.serving.errors import ServingError
from keras_relmem.serving.servable import Servable
from keras_relmem.serving.server import build_parser, rest_options_from


def _ids(exports, rows):
    arrays = exports.data.arrays("test")
    index = np.arange(rows) % len(arrays["query"])
    return {"story": arrays["story"][index], "query": arrays["query"][index]}


def test_a_request_over_the_row_limit_runs_in_slices_and_answers_as_one_call(exports):
    whole = Servable("babi", 1, exports.base / "babi" / "1")
    sliced = Servable("babi", 1, exports.base / "babi" / "1", max_rows=4)
    calls, call = [], sliced._functions["serving_default"]
    sliced._functions["serving_default"] = lambda **inputs: calls.append(len(inputs["query"])) or call(**inputs)
    inputs = whole.check_inputs("serving_default", _ids(exports, 10))
    expected = whole.call("serving_default", inputs)
    got = sliced.call("serving_default", inputs)
    assert calls == [4, 4, 2]
    for alias in expected:
        np.testing.assert_allclose(got[alias], expected[alias], rtol=1e-6) if expected[alias].dtype != object \
            else np.testing.assert_array_equal(got[alias], expected[alias])


def test_out_of_memory_in_the_model_is_resource_exhausted_with_tensorflows_message(exports, caplog):
    servable = Servable("babi", 1, exports.base / "babi" / "1")

    def out_of_memory(**inputs):
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[500000,10,6,100]")

    servable._functions["serving_default"] = out_of_memory
    with caplog.at_level(logging.ERROR, logger="keras_relmem.serving"), pytest.raises(ServingError) as caught:
        servable.call("serving_default", servable.check_inputs("serving_default", _ids(exports, 2)))
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "OOM when allocating tensor" in caught.value.message and "--max_rows_per_call" in caught.value.message
    assert "out of memory" in caplog.text  # and the server's log says so


def test_work_past_its_deadline_is_stopped_between_slices(exports):
    servable = Servable("babi", 1, exports.base / "babi" / "1", max_rows=2)
    calls, call = [], servable._functions["serving_default"]

    def slow(**inputs):
        calls.append(1)
        time.sleep(0.2)
        return call(**inputs)

    servable._functions["serving_default"] = slow
    inputs = servable.check_inputs("serving_default", _ids(exports, 10))
    with pytest.raises(ServingError) as caught:
        servable.call("serving_default", inputs, deadline=time.monotonic() + 0.1)
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED and 1 <= len(calls) < 5  # of 5 slices
    with pytest.raises(ServingError, match="Deadline Exceeded"):
        servable.call("serving_default", inputs, deadline=time.monotonic() - 1)  # never started


def test_outputs_that_cannot_be_joined_by_rows_are_refused_naming_the_limit(exports):
    servable = Servable("babi", 1, exports.base / "babi" / "1", max_rows=2)
    servable._functions["serving_default"] = lambda **inputs: {"total": tf.constant(1.0)}
    with pytest.raises(ServingError) as caught:
        servable.call("serving_default", servable.check_inputs("serving_default", _ids(exports, 3)))
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "more than the 2 one call takes" in caught.value.message and "--max_rows_per_call" in caught.value.message


def test_the_row_limit_flag():
    parser = build_parser()
    assert parser.parse_args([]).max_rows_per_call == 4096
    with pytest.raises(ValueError, match="--max_rows_per_call must be >= 1"):
        rest_options_from(parser.parse_args(["--max_rows_per_call", "0"]))
    flags = parser.format_help()
    for removed in ("--grpc_native", "--grpc_asyncio", "--grpc_predict_in_graph", "--event_loop",
                    "--reuse_graph_functions", "--rest_api_inline_max_bytes"):
        assert removed not in flags


def test_a_requests_timeout_reaches_the_model_call_as_its_deadline(tmp_path):
    """REST's `--rest_api_timeout_in_ms` and a gRPC call's deadline become the model call's deadline, which
    `Servable.call` checks before each slice (above)."""
    import asyncio

    from keras_relmem.serving.core import ServingCore
    from keras_relmem.serving.manager import ModelManager
    from tests.serving.conftest import FakeServable, configs_for

    seen = []

    class Recording(FakeServable):
        def call(self, key, checked, output_filter=(), deadline=None):
            seen.append(None if deadline is None else deadline - time.monotonic())
            return super().call(key, checked, output_filter)

    (tmp_path / "m" / "1").mkdir(parents=True)
    manager = ModelManager(configs_for(tmp_path, ["m"]), poll_seconds=-1, servable_factory=Recording)
    manager.poll()
    core = ServingCore(manager)
    try:
        asyncio.run(core.predict(manager.get("m"), "serving_default", {"x": np.zeros((1, 2))}, timeout=5.0))
        asyncio.run(core.predict(manager.get("m"), "serving_default", {"x": np.zeros((1, 2))}))
    finally:
        core.close()
    assert 0 < seen[0] <= 5.0 and seen[1] is None
