"""TensorProto <-> NumPy for the server's requests and responses: TensorFlow's own conversions.

Example:

```python
proto = to_proto(np.arange(6, dtype=np.int32).reshape(2, 3))
to_array(proto)   # array([[0, 1, 2], [3, 4, 5]], dtype=int32)
```
"""

import numpy as np
import tensorflow as tf


def to_array(proto):
    """A `TensorProto` as a NumPy array (strings as an object array of bytes): `tf.make_ndarray`.

    Raises:
        ValueError or TypeError, as `tf.make_ndarray`, for a proto whose values do not fit its shape.
    """
    return tf.make_ndarray(proto)


def to_proto(array):
    """A NumPy array (or anything `np.asarray` takes; `str` items are written as UTF-8) as a `TensorProto`."""
    array = np.asarray(array)
    if array.dtype.kind in "biufc":  # TensorFlow writes the bytes as they are: a big-endian array in native order
        array = array.astype(array.dtype.newbyteorder("="), copy=False)
    return tf.make_tensor_proto(array)


def fill_proto(proto, array):
    """Write `array` into the `TensorProto` `proto` (a response's map entry, say); returns `proto`."""
    proto.CopyFrom(to_proto(array))
    return proto
