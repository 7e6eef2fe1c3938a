"""Helpers shared by the tests."""

import keras
import numpy as np


def randomize_weights(layer, seed=0, scale=0.3):
    """Give every weight of `layer` small fixed random values.

    Defaults such as LayerNorm's gamma=1, beta=0 would hide a wrong use of a
    weight in an equation test; random values do not.
    MEMO's `linear_phase`, a switch rather than a parameter, stays as it is.
    """
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        if weight.name != "linear_phase":
            weight.assign(rng.normal(scale=scale, size=weight.shape).astype("float32"))


def weights_by_name(layer):
    """{'<sublayer>/<weight>': numpy array} with the layer's own prefix removed."""
    out = {}
    for weight in layer.weights:
        parts = weight.path.split("/")
        # A sub-layer shared from outside (e.g. a shared PReLU) keeps its own path.
        key = "/".join(parts[parts.index(layer.name) + 1 :]) if layer.name in parts else weight.path
        out[key] = keras.ops.convert_to_numpy(weight)
    return out


def gradients(loss_fn, variables):
    """d loss_fn() / d variables on the current backend, as NumPy arrays.

    A variable the loss does not depend on gets zeros (JAX's convention; the
    other backends' None is mapped to zeros), so tests compare values only.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, variables)
    elif backend == "jax":
        import jax

        def stateless(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loss_fn()

        grads = jax.grad(stateless)([v.value for v in variables])
    elif backend == "torch":
        import torch

        loss = loss_fn()
        grads = torch.autograd.grad(loss, [v.value for v in variables], allow_unused=True)
    else:  # pragma: no cover
        raise NotImplementedError(backend)
    return [
        np.zeros(v.shape, "float32") if g is None else keras.ops.convert_to_numpy(g)
        for v, g in zip(variables, grads)
    ]


def jit_compile_for_backend():
    """`jit_compile=True` where it is XLA (TF, JAX); torch.compile is out of scope."""
    return keras.backend.backend() != "torch"


def assert_close(actual, desired, **kwargs):
    """`np.testing.assert_allclose` for backend tensors as well as arrays.

    Torch tensors that require grad refuse `np.asarray`; `convert_to_numpy`
    detaches them, as Keras' own `assertAllClose` does.
    """
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(actual), keras.ops.convert_to_numpy(desired), **kwargs
    )


def sgdr_rate(initial, final, spent, total):
    """Loshchilov & Hutter 2017 (SGDR), eq. 5: eta_min + (eta_max - eta_min)(1 + cos(pi T_cur / T_i)) / 2."""
    return final + 0.5 * (initial - final) * (1 + np.cos(np.pi * min(spent / total, 1.0)))
