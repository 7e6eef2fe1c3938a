"""The server calls signatures flat (`FlatCall`): the same answers as calling them by keyword."""

import numpy as np
import pytest
import tensorflow as tf

from keras_relmem.serving.servable import FlatCall, Servable


class _Orders(tf.Module):
    """Inputs and outputs whose order matters: a swap of `a` and `b`, or of two outputs, changes the values."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="b"),
                                  tf.TensorSpec([None, 2], tf.float32, name="a")])
    def mixed(self, b, a):
        return {"z_sum": tf.reduce_sum(a, axis=1) - b, "m_diff": a[:, 0] - 10.0 * b, "a_plus": a + 1.0,
                "label": tf.strings.as_string(b)}


@pytest.fixture(scope="module")
def orders_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("orders") / "1"
    module = _Orders()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.mixed})
    return path


def test_flat_call_answers_as_the_keyword_call(orders_path):
    servable = Servable("orders", 1, orders_path)
    function = tf.saved_model.load(str(orders_path)).signatures["serving_default"]
    flat = FlatCall.of(function)
    assert flat is not None and flat.input_aliases == ("a", "b")
    a = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    b = np.array([0.5, -4.0], np.float32)
    expected = {alias: value.numpy() for alias, value in function(a=tf.constant(a), b=tf.constant(b)).items()}
    # Hand-computed from _Orders.mixed, so that a call with swapped inputs or outputs cannot pass.
    np.testing.assert_allclose(expected["z_sum"], [2.5, 12.0])
    np.testing.assert_allclose(expected["m_diff"], [-4.0, 43.0])
    got = servable.call("serving_default", servable.check_inputs("serving_default", {"a": a, "b": b}))
    assert sorted(got) == sorted(expected)
    for alias, value in expected.items():
        assert got[alias].dtype == value.dtype and got[alias].shape == value.shape, alias
        np.testing.assert_array_equal(got[alias], value)
    only = servable.call("serving_default", servable.check_inputs("serving_default", {"a": a, "b": b}), ("m_diff",))
    assert list(only) == ["m_diff"]


def test_functions_that_are_not_plain_signatures_keep_the_keyword_call():
    positional = tf.function(lambda x: x + 1.0).get_concrete_function(tf.TensorSpec([None], tf.float32))
    assert FlatCall.of(positional) is None
    assert FlatCall.of(object()) is None


def test_servable_without_flat_call_answers_the_same(orders_path):
    a = np.array([[1.0, 2.0]], np.float32)
    b = np.array([3.0], np.float32)
    for servable in (Servable("orders", 1, orders_path), Servable("orders", 1, orders_path, flat_call=False)):
        got = servable.call("serving_default", servable.check_inputs("serving_default", {"a": a, "b": b}))
        np.testing.assert_allclose(got["z_sum"], [0.0])
        np.testing.assert_allclose(got["m_diff"], [-29.0])


class _Lengths(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def lengths(self, text):
        return {"bytes": tf.strings.length(text)}


def test_string_inputs_as_bytes_or_text_reach_the_model_as_utf8(tmp_path):
    module = _Lengths()
    tf.saved_model.save(module, str(tmp_path / "1"), signatures={"serving_default": module.lengths})
    servable = Servable("lengths", 1, tmp_path / "1")
    cases = {
        "bytes (as gRPC gives them)": np.array([b"ab", b"\xc3\xa9t\xc3\xa9"], dtype=object),
        "text and bytes mixed": np.array(["\u00e9t\u00e9", b"ab"], dtype=object),
        "text (as JSON gives it)": np.array(["ab", "\u00e9t\u00e9"]),
    }
    expected = {"bytes (as gRPC gives them)": [2, 5], "text and bytes mixed": [5, 2], "text (as JSON gives it)": [2, 5]}
    for what, text in cases.items():
        checked = servable.check_inputs("serving_default", {"text": text})
        got = servable.call("serving_default", checked)["bytes"]
        np.testing.assert_array_equal(got, expected[what], err_msg=what)
