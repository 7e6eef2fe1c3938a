"""Helpers shared by the tests."""

import keras
import numpy as np


def randomize_weights(layer, seed=0, scale=0.3):
    """Give every weight of `layer` small fixed random values.

    Defaults such as LayerNorm's gamma=1, beta=0 would hide a wrong use of a
    weight in an equation test; random values do not.
    """
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(scale=scale, size=weight.shape).astype("float32"))


def weights_by_name(layer):
    """{'<sublayer>/<weight>': numpy array} with the layer's own prefix removed."""
    out = {}
    for weight in layer.weights:
        parts = weight.path.split("/")
        key = "/".join(parts[parts.index(layer.name) + 1 :])
        out[key] = keras.ops.convert_to_numpy(weight)
    return out
