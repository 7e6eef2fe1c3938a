"""A seeded kernel initializer gives distinct weights that are the same every run.

Keras 3 initializers carry their seed; copying one initializer with its seed to
several same-shaped weights would start them identical (EntNet's U = V = W, the
RMC's per-block q/k/v kernels), a symmetry training cannot break.
"""

import keras
import numpy as np

import keras_relmem as kr
from keras_relmem.layers import utils
from tests.helpers import weights_by_name


def _entnet(seed):
    cell = kr.EntNetCell(
        num_blocks=2, units=4, kernel_initializer=keras.initializers.GlorotUniform(seed=seed)
    )
    cell.build((None, 4))
    return weights_by_name(cell)


def _rmc(seed):
    cell = kr.RelationalMemoryCell(
        mem_slots=2, head_size=4, num_heads=1, num_blocks=2, gate_style="memory",
        kernel_initializer=keras.initializers.RandomNormal(seed=seed),
        bias_initializer=keras.initializers.RandomNormal(seed=seed),
    )
    cell.build((None, 4))
    return weights_by_name(cell)


def _pairs_differ(weights, names):
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert weights[a].shape == weights[b].shape, (a, b)
            assert not np.allclose(weights[a], weights[b]), f"{a} and {b} start identical"


def test_seeded_entnet_kernels_differ_and_reproduce():
    first, again, other = _entnet(3), _entnet(3), _entnet(4)
    kernels = ["U/kernel", "V/kernel", "W/kernel"]
    _pairs_differ(first, kernels)
    for name in kernels:  # the keys have their own (unseeded) initializer
        np.testing.assert_array_equal(first[name], again[name])
    assert not np.allclose(first["U/kernel"], other["U/kernel"])


def test_seeded_rmc_block_and_gate_weights_differ_and_reproduce():
    first, again = _rmc(7), _rmc(7)
    _pairs_differ(first, ["block0_qkv/kernel", "block1_qkv/kernel"])
    _pairs_differ(first, ["input_gates/bias", "memory_gates/bias"])
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])


def test_unseeded_and_non_initializer_values_pass_through():
    assert utils.clone_initializer("zeros", "w") == "zeros"
    clone = utils.clone_initializer(keras.initializers.RandomNormal(seed=None), "w")
    assert clone.get_config()["seed"] is None
    seeded = keras.initializers.RandomNormal(seed=5)
    assert utils.clone_initializer(seeded, "a").get_config()["seed"] != 5
    assert utils.clone_initializer(seeded, "a").get_config() == (
        utils.clone_initializer(seeded, "a").get_config()
    )
