"""Small helpers shared by the layers: argument checks and initializer cloning."""

import math

import keras


def check_positive_int(name, value):
    """Raise a `ValueError` naming `name` unless `value` is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer; received {name}={value!r}.")


def check_rate(name, value):
    """Raise a `ValueError` naming `name` unless `0 <= value < 1`."""
    if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a float in [0, 1); received {name}={value!r}.")


def prod(dims):
    """Product of static dimensions, or None if any is unknown."""
    dims = list(dims)
    if any(d is None for d in dims):
        return None
    return math.prod(dims)


def clone_initializer(initializer):
    """A fresh copy of `initializer`.

    Keras 3 initializers fix their seed when they are created, so one instance
    shared by several weights would give same-shaped weights identical values.
    """
    if isinstance(initializer, keras.initializers.Initializer):
        return initializer.__class__.from_config(initializer.get_config())
    return initializer



def dense_on_rows(layer, x):
    """Apply `layer` to a `(batch, rows, features)` tensor as one 2-D matmul.

    Keras' Dense on a rank-3 input lowers to a tensordot whose transpose
    permutation XLA cannot always treat as a constant inside an RNN's
    gradient loop; flattening the rows keeps `jit_compile=True` working and
    is a plain, fast MatMul.
    """
    rows, features = x.shape[1], x.shape[2]
    out = layer(keras.ops.reshape(x, (-1, features)))
    return keras.ops.reshape(out, (-1, rows, out.shape[-1]))
