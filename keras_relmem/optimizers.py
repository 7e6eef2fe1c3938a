"""The package's optimizers and learning-rate schedule, all saved with a model.

- `SplitOptimizer`: two groups of variables, two optimizers (MEMO).
- `ScopedAdam`, `NoisyAdam`, `adam()`: Adam or AdamW whose weight decay skips
  named weights, with gradient noise if asked (EntNet's recipe).
- `TriangularCyclicRate`, `step_decay`: the cyclic and step learning rates.

`import keras_relmem` imports this module, so a `.keras` file whose optimizer is
one of these loads with nothing else imported.

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

from keras_relmem._keras_internals import (
    no_automatic_dependency_tracking,
    optimizer_own_variables,
    optimizer_trainable_variables,
)


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
        return optimizer_own_variables(self) + self.first.variables + self.second.variables

    def apply(self, grads, trainable_variables=None):
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
            self.built = True
        variables = trainable_variables or optimizer_trainable_variables(self)
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


# Weights that start at one (multiplicative masks, PReLU slopes) or are biases: decay would pull them to
# zero, so `decay_scope="matrices"` leaves them to Adam alone, as is usual for biases and scales.
DECAY_EXCLUDED = ("positional_mask", "alpha", "bias")


@keras.saving.register_keras_serializable(package="keras_relmem")
class ScopedAdam(keras.optimizers.Adam):
    """Adam (AdamW with `weight_decay`) whose decay skips the weights named in
    `decay_exclude`, and keeps that list in its config.

    Keras' `exclude_from_weight_decay` is not part of an optimizer's config, so
    a model saved to `.keras` and loaded again (e.g. a resumed run) would decay
    every weight; this class brings the exclusion back with the model.

    Args:
        decay_exclude: substrings of the names of the weights the decay leaves
            alone (e.g. `DECAY_EXCLUDED`).
        **kwargs: `keras.optimizers.Adam`'s arguments.

    Example:

    ```python
    >>> optimizer = ScopedAdam(0.01, weight_decay=0.02, decay_exclude=["bias"])
    >>> ScopedAdam.from_config(optimizer.get_config()).decay_exclude
    ('bias',)

    ```

    Reference: Loshchilov & Hutter 2019, "Decoupled weight decay regularization".
    """

    def __init__(self, *args, decay_exclude=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.decay_exclude = tuple(decay_exclude)
        if self.decay_exclude:
            self.exclude_from_weight_decay(var_names=list(self.decay_exclude))

    def get_config(self):
        return {**super().get_config(), "decay_exclude": list(self.decay_exclude)}


@keras.saving.register_keras_serializable(package="keras_relmem")
class NoisyAdam(ScopedAdam):
    """Adam on gradients with annealed Gaussian noise added (Neelakantan et al.
    2015, "Adding gradient noise improves learning for very deep networks",
    eq. 1): `g_t + N(0, gradient_noise / (1 + t) ** 0.55)`, `t` the step.

    Args:
        gradient_noise: eta, the noise variance at the first step.
        noise_seed: int seed of the noise.
        **kwargs: `ScopedAdam`'s arguments.
    """

    def __init__(self, *args, gradient_noise=0.01, noise_seed=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.gradient_noise, self.noise_seed = float(gradient_noise), noise_seed
        self._noise = keras.random.SeedGenerator(noise_seed)

    def apply(self, grads, trainable_variables=None):
        step = keras.ops.cast(self.iterations, "float32")
        stddev = keras.ops.sqrt(self.gradient_noise / keras.ops.power(1.0 + step, 0.55))
        grads = [g if g is None else
                 g + keras.ops.cast(stddev, g.dtype) * keras.random.normal(keras.ops.shape(g), dtype=g.dtype,
                                                                           seed=self._noise)
                 for g in grads]
        return super().apply(grads, trainable_variables)

    def get_config(self):
        return {**super().get_config(), "gradient_noise": self.gradient_noise, "noise_seed": self.noise_seed}


def adam(learning_rate, weight_decay=0.0, decay_scope="all", gradient_noise=0.0, noise_seed=None, **kwargs):
    """Adam, with AdamW's decoupled weight decay when `weight_decay` is not 0.

    Each step every decayed weight shrinks by learning rate x `weight_decay`
    of itself, outside Adam's moments (Loshchilov & Hutter 2019, "Decoupled
    weight decay regularization", Algorithm 2).

    Args:
        learning_rate: float or schedule.
        weight_decay: float >= 0 (0: plain Adam).
        decay_scope: `"all"` decays every weight; `"matrices"` only the
            embeddings and kernels, not the weights whose names contain
            `DECAY_EXCLUDED` (positional masks and PReLU slopes, which start
            at one, and biases).
        gradient_noise: float >= 0: `NoisyAdam`'s annealed gradient noise
            (0: none).
        noise_seed: int seed of that noise.
        **kwargs: the rest of `keras.optimizers.Adam`'s arguments (`clipnorm`, ...).

    Example:

    ```python
    >>> optimizer = adam(0.01, weight_decay=0.02, decay_scope="matrices", clipnorm=40.0)
    >>> optimizer.weight_decay, optimizer.clipnorm
    (0.02, 40.0)

    ```
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0; got {weight_decay}")
    if decay_scope not in ("all", "matrices"):
        raise ValueError(f"decay_scope must be 'all' or 'matrices'; got {decay_scope!r}")
    # None, not 0: Keras skips the decay step only for None
    exclude = list(DECAY_EXCLUDED) if weight_decay and decay_scope == "matrices" else []
    if gradient_noise:
        return NoisyAdam(learning_rate, weight_decay=weight_decay or None, gradient_noise=gradient_noise,
                         noise_seed=noise_seed, decay_exclude=exclude, **kwargs)
    if exclude:
        return ScopedAdam(learning_rate, weight_decay=weight_decay, decay_exclude=exclude, **kwargs)
    return keras.optimizers.Adam(learning_rate, weight_decay=weight_decay or None, **kwargs)


def step_decay(initial, factor=0.5, every=25):
    """`lr(epoch) = initial * factor ** (epoch // every)` (EntNet: halve every 25)."""

    def schedule(epoch, lr=None):
        return float(initial * factor ** (epoch // every))

    return schedule


@keras.saving.register_keras_serializable(package="keras_relmem")
class TriangularCyclicRate(keras.optimizers.schedules.LearningRateSchedule):
    """Triangular cyclical learning rate (Smith 2017), by optimizer step.

    The rate climbs linearly from `minimum` to `maximum` over `step_size`
    steps, falls back over the next `step_size`, and repeats:
    `cycle = floor(1 + t / (2 step_size))`, `x = |t / step_size - 2 cycle + 1|`,
    `lr(t) = minimum + (maximum - minimum) * max(0, 1 - x)`. The EntNet TF port
    (jimfleming/recurrent-entity-networks) trains bAbI with 2e-4 to 1e-2 and
    half-cycles of 10 epochs, the change that made its tasks 16 and 19
    converge.

    Args:
        minimum: the rate at the start and end of every cycle.
        maximum: the rate half way through a cycle.
        step_size: optimizer steps per half cycle.

    Example:

    ```python
    >>> rate = TriangularCyclicRate(0.0002, 0.01, step_size=100)
    >>> [round(float(rate(t)), 4) for t in (0, 50, 100, 150, 200)]
    [0.0002, 0.0051, 0.01, 0.0051, 0.0002]

    ```

    Reference: Smith, "Cyclical learning rates for training neural
    networks", WACV 2017, arXiv:1506.01186 (§3.1).
    """

    def __init__(self, minimum, maximum, step_size):
        if not 0 < minimum <= maximum:
            raise ValueError(f"need 0 < minimum <= maximum; received minimum={minimum}, maximum={maximum}.")
        if step_size <= 0:
            raise ValueError(f"step_size must be a positive number of steps; received {step_size}.")
        self.minimum, self.maximum, self.step_size = float(minimum), float(maximum), float(step_size)

    def __call__(self, step):
        t = keras.ops.cast(step, "float32")
        cycle = keras.ops.floor(1.0 + t / (2.0 * self.step_size))
        x = keras.ops.abs(t / self.step_size - 2.0 * cycle + 1.0)
        return self.minimum + (self.maximum - self.minimum) * keras.ops.maximum(0.0, 1.0 - x)

    def get_config(self):
        return {"minimum": self.minimum, "maximum": self.maximum, "step_size": self.step_size}
