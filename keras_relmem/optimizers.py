"""An optimizer that trains two groups of variables with two optimizers.

MEMO trains its answer network with Adam and its halting network with RMSProp
(Banino et al. 2020, appendix D). Keras trainers hold one optimizer, and on
JAX the optimizer's state is threaded through the jitted step as
`optimizer.variables`; a second optimizer kept beside the model would never
be updated there. `SplitOptimizer` wraps both, so every backend's standard
`train_step` (TensorFlow's tape, JAX's stateless step, PyTorch's backward)
trains MEMO unchanged. It follows the pattern of Keras' own wrapper,
`keras.optimizers.LossScaleOptimizer`.
"""

import keras

from keras_relmem._keras_internals import no_automatic_dependency_tracking


@keras.saving.register_keras_serializable(package="keras_relmem")
class SplitOptimizer(keras.optimizers.Optimizer):
    """Route each variable to one of two optimizers.

    Variables for which `route(variable)` is true go to `second`, the rest to
    `first`. `route` is set by the model that owns the variables (it is not
    serialised: `MEMOClassifier.compile` sets it again after loading).
    `learning_rate` and `iterations` are those of `first`.

    Args:
        first: optimizer (instance, name or config) of the main variables.
        second: optimizer of the routed variables.
        route: callable `variable -> bool`; may be set later, before the
            first update.
        name: optional name.

    Example:

    ```python
    >>> import keras
    >>> first, second = keras.Variable([1.0]), keras.Variable([1.0])
    >>> opt = SplitOptimizer(keras.optimizers.SGD(0.1),
    ...                      keras.optimizers.SGD(1.0),
    ...                      route=lambda v: v is second)
    >>> opt.apply([keras.ops.ones(1), keras.ops.ones(1)], [first, second])
    >>> [round(float(v.numpy()[0]), 3) for v in (first, second)]
    [0.9, 0.0]

    ```

    Reference: Banino et al., "MEMO: a deep network for flexible combination
    of episodic memories", ICLR 2020, arXiv:2001.10913 (appendix D: Adam for
    MEMO, RMSProp for the halting policy).
    """

    def __init__(self, first, second, route=None, name=None, **kwargs):
        if kwargs:
            raise ValueError(
                "SplitOptimizer takes no optimizer arguments of its own "
                f"(set them on `first` or `second`); received {sorted(kwargs)}."
            )
        super().__init__(learning_rate=0.0, name=name)
        self.first = keras.optimizers.get(first)
        self.second = keras.optimizers.get(second)
        self.route = route

    def _split(self, values, variables):
        if self.route is None:
            raise ValueError(
                "SplitOptimizer.route is not set: give `route=` or let the "
                "model set it (MEMOClassifier.compile does)."
            )
        groups = ([], [], [], [])
        for value, variable in zip(values, variables):
            second = bool(self.route(variable))
            groups[2 * second].append(value)
            groups[2 * second + 1].append(variable)
        return groups

    @no_automatic_dependency_tracking
    def build(self, var_list):
        _, first_vars, _, second_vars = self._split(var_list, var_list)
        self.first.build(first_vars)
        self.second.build(second_vars)
        super().build(var_list)

    @property
    def variables(self):
        return self._variables + self.first.variables + self.second.variables

    def apply(self, grads, trainable_variables=None):
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
            self.built = True
        variables = trainable_variables or self._trainable_variables
        first_grads, first_vars, second_grads, second_vars = self._split(grads, variables)
        if first_vars:
            self.first.apply(first_grads, first_vars)
        if second_vars:
            self.second.apply(second_grads, second_vars)

    @property
    def learning_rate(self):
        return self.first.learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self.first.learning_rate = learning_rate

    @property
    def iterations(self):
        return self.first.iterations

    def finalize_variable_values(self, var_list):
        _, first_vars, _, second_vars = self._split(var_list, var_list)
        self.first.finalize_variable_values(first_vars)
        self.second.finalize_variable_values(second_vars)

    def get_config(self):
        serialize = keras.saving.serialize_keras_object
        return {"name": self.name, "first": serialize(self.first), "second": serialize(self.second)}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        for key in ("first", "second"):
            config[key] = keras.saving.deserialize_keras_object(
                config[key], custom_objects=custom_objects
            )
        return cls(**config)
