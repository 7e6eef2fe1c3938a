"""Small helpers shared by the layers: argument checks, initializers, projections."""

import math
import zlib

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


def clone_initializer(initializer, salt=None):
    """A fresh copy of `initializer` for one weight.

    Keras 3 initializers fix their seed when they are created, so one instance
    shared by several weights would give same-shaped weights identical values.
    An unseeded initializer's copy draws its own seed. A seeded one's copy gets
    a seed derived from the user's and `salt` (the weight's name): distinct
    weights start different, and the same seed gives the same model each run.

    Args:
        initializer: a `keras.initializers.Initializer` (anything else, such
            as a string or callable, is returned as it is).
        salt: str naming the weight; required for seeded initializers to get
            distinct streams.
    """
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    config = initializer.get_config()
    if isinstance(config.get("seed"), int) and salt is not None:
        config["seed"] = (config["seed"] + zlib.crc32(salt.encode())) % (2**31 - 1)
    return initializer.__class__.from_config(config)


def dense(owner, units, name, **kwargs):
    """A `Dense` sub-layer of `owner` that follows its settings.

    Every layer of the package builds its projections here, so each gets a
    fresh copy of the owner's `kernel_initializer` (and `bias_initializer`),
    its regularizers where it has them, and its dtype policy (mixed precision).

    Args:
        owner: the layer the projection belongs to.
        units: output width.
        name: the sub-layer's name (weights are `<owner>/<name>/kernel`).
        **kwargs: other `keras.layers.Dense` arguments (`use_bias`,
            `activation`, ...); they override the owner's.

    Example:

    >>> import keras
    >>> owner = keras.layers.Dense(3, kernel_initializer="zeros")
    >>> projection = dense(owner, 4, "projection", use_bias=False)
    >>> projection.kernel_initializer.__class__.__name__, projection.use_bias
    ('Zeros', False)
    """
    config = {
        "kernel_initializer": clone_initializer(owner.kernel_initializer, f"{name}/kernel"),
        "dtype": owner.dtype_policy,
        "name": name,
    }
    if hasattr(owner, "bias_initializer"):
        config["bias_initializer"] = clone_initializer(owner.bias_initializer, f"{name}/bias")
    for attribute in ("kernel_regularizer", "bias_regularizer"):
        if getattr(owner, attribute, None) is not None:
            config[attribute] = getattr(owner, attribute)
    config.update(kwargs)
    return keras.layers.Dense(units, **config)


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


def dense_on_rows_with_transposed_kernel(layer, x, kernel_t):
    """`dense_on_rows(layer, x)` whose gradient for `x` multiplies by `kernel_t`, the kernel already transposed.

    The same values and gradients; only the product that computes the input
    gradient differs. Autodiff of `x @ kernel` multiplies the output gradient
    by `transpose(kernel)` inside every step of a recurrence; on TensorFlow's
    CPU kernels a product with a transposed operand ran at half the rate of
    the same product on a transposed copy (bench/lm/profile.py), so a
    recurrent layer transposes its kernels once per sequence and passes them
    here.

    Args:
        layer: a built `keras.layers.Dense`.
        x: `(batch, rows, features)`.
        kernel_t: `transpose(layer.kernel)` in `x`'s dtype, `(units, features)`.
    """
    ops = keras.ops
    rows, features = x.shape[1], x.shape[2]
    flat = ops.reshape(x, (-1, features))
    kernel = ops.cast(layer.kernel, flat.dtype)

    # kernel_t is an argument, not a closure: JAX does not let a custom gradient inside a scan close over
    # a value traced outside it. Its own gradient is None: the forward pass does not use it.
    @ops.custom_gradient
    def product(flat, kernel, kernel_t):
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            return ops.matmul(upstream, kernel_t), ops.matmul(ops.transpose(flat), upstream), None

        return ops.matmul(flat, kernel), grad

    out = product(flat, kernel, kernel_t)
    if layer.use_bias:
        out = out + ops.cast(layer.bias, out.dtype)
    if layer.activation is not None:
        out = layer.activation(out)
    return ops.reshape(out, (-1, rows, out.shape[-1]))
