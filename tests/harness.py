"""A layer-test harness in the spirit of keras-hub's `run_layer_test`.

`run_layer_test` puts one layer through what every Keras layer must survive,
on whichever backend `KERAS_BACKEND` selects: non-default constructor
arguments, a `get_config` round trip that keeps every one of them (also
through JSON, as a `.keras` file stores it), expected trainable and
non-trainable weight counts, regularizers that add to `layer.losses`, eager
and symbolic calls that agree, a `.keras` save/load with equal outputs, one
training step (compiled with `jit_compile` where the backend has XLA) that
moves every trainable weight that should learn, and mixed_float16 and
mixed_bfloat16 calls in which every sub-layer follows the policy, the weights
stay float32 and the outputs stay close to float32. RNN cells are tested
inside `keras.layers.RNN`, as users run them.
"""

import json

import keras
import numpy as np
from keras import ops

from tests.helpers import jit_compile_for_backend, randomize_weights

# Mixed-precision policies and how far their outputs may stray from float32's (bfloat16 keeps 8 bits).
POLICIES = {"mixed_float16": 1.0, "mixed_bfloat16": 3.0}


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))


def _inputs_like(data, name="x"):
    """Symbolic `keras.Input`s with the batch dimension left open."""
    if isinstance(data, (list, tuple)):
        return [_inputs_like(d, f"{name}{i}") for i, d in enumerate(data)]
    data = np.asarray(data)
    return keras.Input(data.shape[1:], dtype=str(data.dtype), name=name)


def _same(saved, value):
    """A config entry equals the argument it was built from."""
    if isinstance(saved, dict) and "class_name" in saved:  # a serialised Keras object
        obj = keras.saving.deserialize_keras_object(saved)
        getter = (keras.initializers.get if isinstance(obj, keras.initializers.Initializer)
                  else keras.regularizers.get)
        ref = getter(value) if isinstance(value, (str, dict)) else value
        return type(obj) is type(ref) and obj.get_config() == ref.get_config()
    if isinstance(value, np.ndarray):
        return np.array_equal(np.asarray(saved), value)
    return saved == value


def _check_config(layer_cls, layer, init_kwargs):
    config = layer.get_config()
    for key, value in init_kwargs.items():
        if key in ("dtype", "name"):
            continue
        assert key in config, f"get_config() lost the argument {key!r}"
        saved = config[key]
        assert _same(saved, value), f"get_config()[{key!r}] = {saved!r}, built with {value!r}"
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config, "from_config(get_config()) changed the config"
    # What a .keras file stores: the serialized layer, as JSON.
    stored = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    restored = keras.saving.deserialize_keras_object(stored)
    assert type(restored) is layer_cls and restored.get_config() == config, "the JSON round trip changed the config"


def _sublayers(layer):
    """Every Keras layer that `layer` holds (in attributes, lists or dicts), recursively."""
    found, todo, seen = [], [layer], {id(layer)}
    while todo:
        for value in vars(todo.pop()).values():
            items = value.values() if isinstance(value, dict) else value
            items = items if isinstance(items, (list, tuple, type({}.values()))) else [value]
            for item in items:
                if isinstance(item, keras.layers.Layer) and id(item) not in seen:
                    seen.add(id(item))
                    found.append(item)
                    todo.append(item)
    return found


def _check_regularizers(layer_cls, layer, init_kwargs, run):
    """Regularizer arguments add one loss per regularized weight; without them there are none."""
    regularized = {k: v for k, v in init_kwargs.items() if k.endswith("_regularizer") and v is not None}
    if not regularized:
        return
    losses = [_numpy(loss) for loss in layer.losses]
    assert losses and all(np.isfinite(v) and v > 0 for v in losses), (
        f"{sorted(regularized)} given, but layer.losses is {losses}")
    plain = layer_cls(**{k: v for k, v in init_kwargs.items() if k not in regularized})
    run(plain)
    assert not plain.losses, f"no regularizer given, but layer.losses is {plain.losses}"


def _wrap(layer, rnn):
    return keras.layers.RNN(layer, dtype=layer.dtype_policy) if rnn else layer


def _functional(layer, input_data, rnn, call):
    inputs = _inputs_like(input_data)
    outputs = call(_wrap(layer, rnn), inputs)
    return keras.Model(inputs, outputs)


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    expected_num_trainable_weights,
    expected_num_non_trainable_weights=0,
    rnn=False,
    call=None,
    not_trained=(),
    run_training_check=True,
    run_mixed_precision_check=True,
    mixed_precision_atol=0.05,
    tmp_path=None,
):
    """Run the standard checks on `layer_cls(**init_kwargs)`.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments; use non-default values, since
            each must survive `get_config`.
        input_data: numpy array or list of arrays (batch first).
        expected_output_shape: shape, or list of shapes, of the outputs.
        expected_num_trainable_weights, expected_num_non_trainable_weights:
            weight counts after building.
        rnn: the layer is an RNN cell: test it inside `keras.layers.RNN`.
        call: `(layer, inputs) -> outputs`; default `layer(inputs)`.
        not_trained: substrings of weight paths that one training step on
            the outputs may leave unchanged (e.g. a halting network trained by
            its own loss).
        run_training_check, run_mixed_precision_check: switch checks off.
        mixed_precision_atol: tolerance of the mixed_float16 outputs.
        tmp_path: folder for the `.keras` round trip (skipped when None).
    """
    call = call or (lambda layer, x: layer(x))

    # Construction and config.
    layer = layer_cls(**init_kwargs)
    _check_config(layer_cls, layer, init_kwargs)

    # Eager call: shapes and weight counts.
    wrapped = _wrap(layer, rnn)
    eager = keras.tree.flatten(call(wrapped, input_data))
    shapes = expected_output_shape
    if not isinstance(shapes, list):
        shapes = [shapes]
    assert [tuple(o.shape) for o in eager] == [tuple(s) for s in shapes], (
        f"output shapes {[tuple(o.shape) for o in eager]}, expected {shapes}"
    )
    assert len(layer.trainable_weights) == expected_num_trainable_weights, [
        w.path for w in layer.trainable_weights
    ]
    assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights, [
        w.path for w in layer.non_trainable_weights
    ]
    _check_regularizers(layer_cls, layer, init_kwargs, lambda other: call(_wrap(other, rnn), input_data))

    # Symbolic call in a functional model: same shapes (batch left open) and,
    # with fixed random weights, the same numbers as the eager call.
    layer = layer_cls(**init_kwargs)
    model = _functional(layer, input_data, rnn, call)
    symbolic = keras.tree.flatten(model.outputs)
    assert [tuple(o.shape)[1:] for o in symbolic] == [tuple(s)[1:] for s in shapes]
    randomize_weights(layer, seed=7, scale=0.2)
    expected = [_numpy(o) for o in keras.tree.flatten(model(input_data))]
    direct = [_numpy(o) for o in keras.tree.flatten(call(_wrap(layer, rnn), input_data))]
    for a, b in zip(expected, direct):
        np.testing.assert_allclose(a, b, atol=1e-5)

    # .keras round trip.
    if tmp_path is not None:
        path = tmp_path / f"{layer_cls.__name__}.keras"
        model.save(path)
        loaded = keras.saving.load_model(path)
        for a, b in zip(expected, keras.tree.flatten(loaded(input_data))):
            np.testing.assert_allclose(a, _numpy(b), atol=1e-6)

    # One training step moves every weight that should learn.
    if run_training_check:
        layer = layer_cls(**init_kwargs)
        model = _functional(layer, input_data, rnn, call)
        float_outputs = [o for o in keras.tree.flatten(model.outputs) if "float" in o.dtype]
        trainer = keras.Model(model.inputs, float_outputs)
        trainer.compile(keras.optimizers.Adam(1e-2), loss=["mse"] * len(float_outputs),
                        jit_compile=jit_compile_for_backend())
        before = {w.path: _numpy(w) for w in layer.trainable_weights}
        targets = [np.ones((len(np.asarray(keras.tree.flatten(input_data)[0])),) + tuple(o.shape[1:]), "float32")
                   for o in float_outputs]
        trainer.fit(input_data, targets, batch_size=len(targets[0]), epochs=1, verbose=0)
        for w in layer.trainable_weights:
            if any(part in w.path for part in not_trained):
                continue
            assert np.abs(_numpy(w) - before[w.path]).max() > 0, f"{w.path} did not train"

    # Mixed precision: float32 weights, float16/bfloat16 math in every sub-layer, close to float32.
    if run_mixed_precision_check:
        full = layer_cls(**init_kwargs)
        full_out = keras.tree.flatten(call(_wrap(full, rnn), input_data))
        randomize_weights(full, seed=3, scale=0.2)
        full_out = [_numpy(o) for o in keras.tree.flatten(call(_wrap(full, rnn), input_data))]
        for policy, scale in POLICIES.items():
            mixed = layer_cls(**{**init_kwargs, "dtype": policy})
            call(_wrap(mixed, rnn), input_data)
            mixed.set_weights(full.get_weights())
            assert all(w.dtype == "float32" for w in mixed.weights)
            assert mixed.compute_dtype == policy.split("_")[1]
            strays = [sub.path for sub in _sublayers(mixed) if sub.dtype_policy.name != policy]
            assert not strays, f"sub-layers not under {policy}: {strays}"
            mixed_out = [_numpy(o) for o in keras.tree.flatten(call(_wrap(mixed, rnn), input_data))]
            for a, b in zip(full_out, mixed_out):
                np.testing.assert_allclose(b, a, atol=mixed_precision_atol * scale)
