"""TensorProto <-> NumPy without per-element Python: the server's request and response conversions.

`tf.make_ndarray` and `tf.make_tensor_proto` are general (every dtype, every
way a proto can hold values) and cost about 0.05-0.1 ms a tensor in Python
checks. A server's tensors are nearly always the two common forms: numbers in
`tensor_content` (what `make_tensor_proto` writes for NumPy arrays) and byte
strings in `string_val`. Those take one `np.frombuffer` or one list copy here;
anything else (values in `int_val`/`float_val`, half floats, bfloat16,
resources) goes through TensorFlow's own functions, so the result is always
what TensorFlow would give.

Example:

```python
proto = to_proto(np.arange(6, dtype=np.int32).reshape(2, 3))
to_array(proto)   # array([[0, 1, 2], [3, 4, 5]], dtype=int32)
```
"""

import functools
import math
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

# DataType enum <-> NumPy dtype for the types stored as raw bytes in tensor_content.
_RAW = {
    types_pb2.DT_FLOAT: np.dtype(np.float32),
    types_pb2.DT_DOUBLE: np.dtype(np.float64),
    types_pb2.DT_INT8: np.dtype(np.int8),
    types_pb2.DT_INT16: np.dtype(np.int16),
    types_pb2.DT_INT32: np.dtype(np.int32),
    types_pb2.DT_INT64: np.dtype(np.int64),
    types_pb2.DT_UINT8: np.dtype(np.uint8),
    types_pb2.DT_UINT16: np.dtype(np.uint16),
    types_pb2.DT_UINT32: np.dtype(np.uint32),
    types_pb2.DT_UINT64: np.dtype(np.uint64),
    types_pb2.DT_BOOL: np.dtype(np.bool_),
}
_ENUM = {dtype: enum for enum, dtype in _RAW.items()}
_LITTLE = sys.byteorder == "little"  # tensor_content is little-endian


def _shape(proto):
    return tuple(dim.size for dim in proto.tensor_shape.dim)


def to_array(proto):
    """A `TensorProto` as a NumPy array (strings as an object array of bytes, as `tf.make_ndarray`).

    Args:
        proto: a `tensorflow.TensorProto`.

    Returns:
        The array; a numeric one may be read-only (it views the proto's bytes).

    Raises:
        ValueError or TypeError, as `tf.make_ndarray`, for a proto whose values
        do not fit its shape.
    """
    shape = _shape(proto)
    if not proto.tensor_shape.unknown_rank and all(size >= 0 for size in shape):
        dtype = _RAW.get(proto.dtype)
        if dtype is not None and proto.tensor_content and _LITTLE:
            count = math.prod(shape)
            if len(proto.tensor_content) == count * dtype.itemsize:
                return np.frombuffer(proto.tensor_content, dtype).reshape(shape)
        elif proto.dtype == types_pb2.DT_STRING and len(proto.string_val) == math.prod(shape):
            array = np.empty(len(proto.string_val), dtype=object)
            array[:] = list(proto.string_val)
            return array.reshape(shape)
    return tf.make_ndarray(proto)


def to_proto(array):
    """A NumPy array (or anything `np.asarray` takes) as a `TensorProto`, as `tf.make_tensor_proto` writes it.

    Args:
        array: numbers, booleans, or strings (`bytes`/`str`, object or `S`/`U` arrays).

    Returns:
        A `tensorflow.TensorProto`.
    """
    return fill_proto(tensor_pb2.TensorProto(), array)


def fill_proto(proto, array):
    """Write `array` into the empty `TensorProto` `proto` (a response's map entry, say) as `to_proto` would.

    Filling the response's own entry saves building a message and copying it in.
    Returns `proto`.
    """
    array = np.asarray(array)
    enum = _ENUM.get(array.dtype.newbyteorder("="))  # the type whatever its byte order
    if enum is not None and _LITTLE:
        proto.dtype = enum
        proto.tensor_shape.CopyFrom(_shape_proto(array.shape))
        proto.tensor_content = np.ascontiguousarray(array, array.dtype.newbyteorder("<")).tobytes()
        return proto
    if array.dtype.kind in "OSU":
        items = array.ravel().tolist()
        if not all(isinstance(item, bytes) for item in items):  # bytes (gRPC's strings) go in as they are
            items = _utf8(items)
        if items is not None:
            proto.dtype = types_pb2.DT_STRING
            proto.tensor_shape.CopyFrom(_shape_proto(array.shape))
            proto.string_val.extend(items)
            return proto
    proto.CopyFrom(tf.make_tensor_proto(array))
    return proto


def _utf8(items):
    """`items` as bytes, str encoded as UTF-8; None when one is neither (TensorFlow's conversion decides then)."""
    if not all(isinstance(item, (bytes, str)) for item in items):
        return None
    return [item.encode("utf-8") if isinstance(item, str) else item for item in items]


@functools.lru_cache(maxsize=256)
def _shape_proto(shape):
    # Cached: a server answers the same few shapes over and over, and the proto is only ever copied from.
    return tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape])
