"""The server's TensorProto conversions: what TensorFlow's own functions read and write."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from keras_relmem.serving import tensors

ARRAYS = [
    np.arange(60, dtype=np.int32).reshape(1, 10, 6),
    np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
    np.array([[1.5, -2.25]], np.float64),
    np.array([2**40, -3], np.int64),
    np.array([[True, False, True]]),
    np.array([7, 255], np.uint8),
    np.zeros((0, 3), np.float32),
    np.array(5, np.int32),
    np.array([[b"Mary went home.", b""], [b"\xff\xfe", "caf\u00e9".encode()]], dtype=object),
    np.array([], dtype=object).reshape(0, 2),
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_to_proto_reads_back_as_tensorflow_reads_it(array):
    proto = tensors.to_proto(array)
    expected = tf.make_tensor_proto(array)
    assert proto.dtype == expected.dtype
    assert [d.size for d in proto.tensor_shape.dim] == list(array.shape)
    # TensorFlow's reader is the judge of what the proto holds.
    np.testing.assert_array_equal(tf.make_ndarray(proto), array)
    np.testing.assert_array_equal(tensors.to_array(proto), array)
    assert tensors.to_array(proto).dtype == tf.make_ndarray(expected).dtype


def test_unicode_strings_are_encoded_as_utf8():
    proto = tensors.to_proto(np.array(["caf\u00e9", b"x"], dtype=object))
    assert list(proto.string_val) == ["caf\u00e9".encode(), b"x"]
    proto = tensors.to_proto(np.array([["a", "\u00fc"]]))  # a NumPy 'U' array
    assert proto.dtype == types_pb2.DT_STRING and list(proto.string_val) == [b"a", "\u00fc".encode()]


def test_big_endian_arrays_keep_their_values():
    array = np.array([1, 256, -2], dtype=">i4")
    np.testing.assert_array_equal(tf.make_ndarray(tensors.to_proto(array)), [1, 256, -2])


def test_values_outside_tensor_content_fall_back_to_tensorflow():
    # Protos that clients write by hand hold numbers in int_val / float_val, or one value for all.
    by_hand = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT32)
    by_hand.tensor_shape.dim.add(size=3)
    by_hand.int_val.extend([4, 5, 6])
    np.testing.assert_array_equal(tensors.to_array(by_hand), [4, 5, 6])
    splat = tf.make_tensor_proto(2.5, dtype=tf.float32, shape=[2, 2])
    np.testing.assert_array_equal(tensors.to_array(splat), np.full((2, 2), 2.5, np.float32))
    one_string = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[b"q"])
    one_string.tensor_shape.dim.add(size=2)
    np.testing.assert_array_equal(tensors.to_array(one_string), tf.make_ndarray(one_string))
    half = tf.make_tensor_proto(np.array([1.5, 2.0], np.float16))
    np.testing.assert_array_equal(tensors.to_array(half), np.array([1.5, 2.0], np.float16))


def test_a_proto_whose_bytes_do_not_fit_its_shape_is_an_error():
    proto = tensors.to_proto(np.arange(6, dtype=np.int32))
    proto.tensor_shape.dim[0].size = 7
    with pytest.raises((ValueError, TypeError)):
        tensors.to_array(proto)
