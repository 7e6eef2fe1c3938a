"""MEMO's halting policy (Banino et al. 2020, §2.3) and the losses that train it.

`HaltingPolicy` reads, each hop, how far the attention moved (and optionally
how sure the answer is) and gives a halting logit and a value; REINFORCE with
n-step returns (`reinforce_halting_loss`) or adaptive computation time
(`act_weights`) turn those into a number of hops. Everything is `keras.ops`
math; `keras_relmem.models.memo` holds the training step.
"""

import math
import numbers
import warnings

import keras
from keras import ops

from keras_relmem.layers import utils

# What the halting network reads each hop besides the one-hot hop index:
# "distance", the paper's Bhattacharyya distance between consecutive hops'
# attention (§2.3), or "distance+entropy", which adds the entropy of the hop's
# answer distribution (our extension: on PAI of length 5 the distance is the
# same for every query type, the entropy falls at the hop where a type becomes
# right).
HALTING_INPUTS = ("distance", "distance+entropy")
# P(halt) = sigmoid(bias) at the first hop of an untrained policy; above this
# the policy halts at hop 1 almost always (and at inference, with the 0.5
# threshold, always). The paper's +2/+5/+10 (appendix D) are past it: its sign
# convention is the opposite of ours.
_HALT_AT_ONCE_PROBABILITY = 0.85
# 1.1's arguments that the halting policy now holds (MEMO's for its network and threshold, MEMOClassifier's for
# its loss): each one's name now and the policy that takes it (None: both).
ARGUMENTS_1_1 = {
    "halting_gru_units": ("gru_units", None), "halting_mlp_units": ("mlp_units", None),
    "bias_init": ("bias_init", None), "halting_inputs": ("inputs", None),
    "halting_threshold": ("threshold", "HaltingPolicy"), "gamma": ("gamma", "HaltingPolicy"),
    "alpha": ("alpha", "HaltingPolicy"), "beta": ("beta", "HaltingPolicy"), "n_step": ("n_step", "HaltingPolicy"),
    "act_epsilon": ("epsilon", "ACTHalting"), "ponder_cost": ("ponder_cost", "ACTHalting"),
}


def _warn_if_halting_at_once(bias_init):
    p_halt = 1.0 / (1.0 + math.exp(-bias_init))
    if p_halt > _HALT_AT_ONCE_PROBABILITY:
        warnings.warn(
            f"bias_init={bias_init:g} gives P(halt) = sigmoid({bias_init:g}) = {p_halt:.2f} at the first hop: "
            "the untrained policy halts after hop 1 almost always (and always at inference, where it halts "
            "once P(halt) > 0.5). Here P(halt) = sigmoid(logit), so a negative bias makes another hop likely; "
            f"the paper's +2/+5/+10 correspond to bias_init=-2/-5/-10.",
            UserWarning,
            stacklevel=4,
        )


def answer_entropy(logits):
    """Entropy (nats) of `softmax(logits)` over the last axis."""
    logits = ops.cast(logits, "float32")
    log_p = ops.log_softmax(logits, axis=-1)
    return -ops.sum(ops.exp(log_p) * log_p, axis=-1)


def bhattacharyya_distance(p, q, epsilon=1e-10):
    """`-log(sum_i sqrt(p_i q_i))` over the last axis (0 for equal distributions)."""
    coefficient = ops.sum(ops.sqrt(ops.maximum(p * q, 0.0)), axis=-1)
    return -ops.log(ops.maximum(coefficient, epsilon))


class HaltingNetwork(keras.layers.Layer):
    """The network both halting policies share: a GRU over [features, one-hot hop] and an MLP, giving a halting
    logit (`P(halt) = sigmoid(logit)`) and a value estimate each hop. `HaltingPolicy` (REINFORCE) and
    `ACTHalting` add how it halts and how it is trained; their docstrings give the arguments."""

    def __init__(self, max_hops=None, gru_units=256, mlp_units=64, bias_init=-3.0, inputs="distance+entropy",
                 **kwargs):
        _refuse_1_1_arguments(type(self).__name__, kwargs)
        super().__init__(**kwargs)
        if max_hops is not None:
            utils.check_positive_int("max_hops", max_hops)
        utils.check_positive_int("gru_units", gru_units)
        utils.check_positive_int("mlp_units", mlp_units)
        if inputs not in HALTING_INPUTS:
            raise ValueError(f"inputs must be one of {HALTING_INPUTS}; received inputs={inputs!r}.")
        self.max_hops = max_hops
        self.gru_units = gru_units
        self.mlp_units = mlp_units
        self.bias_init = float(bias_init)
        self.inputs = inputs
        self.num_inputs = len(inputs.split("+"))
        _warn_if_halting_at_once(self.bias_init)
        self.gru = None

    def attach(self, max_hops, dtype_policy):
        """Called by the `MEMO` this policy is given to: takes its `max_hops` (a policy made for another is
        refused) and dtype policy, and makes the network, at the point of MEMO's construction where 1.1 made it
        (so a seeded model draws the same initial weights)."""
        if self.max_hops is not None and self.max_hops != max_hops:
            raise ValueError(f"The halting policy was made for max_hops={self.max_hops}; this MEMO has "
                             f"max_hops={max_hops}. Leave the policy's max_hops unset: MEMO sets it.")
        self.max_hops = max_hops
        if self.gru is None:
            self.dtype_policy = dtype_policy
        self._make_network()

    def _make_network(self):
        if self.gru is not None:
            return
        self.gru = keras.layers.GRUCell(self.gru_units, dtype=self.dtype_policy, name="gru")
        self.hidden = keras.layers.Dense(self.mlp_units, activation="relu", dtype=self.dtype_policy, name="mlp")
        self.halt = keras.layers.Dense(
            1, bias_initializer=keras.initializers.Constant(self.bias_init),
            dtype=self.dtype_policy, name="halt",
        )
        self.value = keras.layers.Dense(1, dtype=self.dtype_policy, name="value")

    def build(self, input_shape=None):
        if self.built:  # a policy deserialized with its MEMO was built by its own build config
            return
        if self.max_hops is None:
            raise ValueError(f"{type(self).__name__} needs max_hops to be built: give it to a MEMO, which sets its "
                             "own, or pass max_hops=N.")
        self._make_network()
        batch = None
        self.gru.build((batch, self.num_inputs + self.max_hops))
        self.hidden.build((batch, self.gru_units))
        self.halt.build((batch, self.mlp_units))
        self.value.build((batch, self.mlp_units))
        self.built = True

    def initial_state(self, batch_size):
        """The GRU state before the first hop: zeros `(batch_size, gru_units)`."""
        return ops.zeros((batch_size, self.gru_units), dtype=self.compute_dtype)

    def features(self, distance, answer_logits):
        """The per-hop input `inputs` names: the distance `(batch,)`, or with the answer's entropy `(batch, 2)`."""
        if self.inputs == "distance":
            return distance
        entropy = answer_entropy(ops.stop_gradient(answer_logits))
        return ops.stack([ops.cast(distance, "float32"), entropy], axis=-1)

    def call(self, features, hop, state):
        batch = ops.shape(features)[0]
        one_hot = ops.one_hot(ops.full((batch,), hop, dtype="int32"), self.max_hops, dtype=self.compute_dtype)
        inputs = ops.cast(features, self.compute_dtype)
        if len(inputs.shape) == 1:
            inputs = ops.expand_dims(inputs, -1)
        if inputs.shape[-1] != self.num_inputs:
            raise ValueError(
                f"This {type(self).__name__} reads {self.num_inputs} feature(s) per hop (inputs={self.inputs!r}); "
                f"received shape {tuple(inputs.shape)}."
            )
        output, new_state = self.gru(ops.concatenate([inputs, one_hot], -1), [state])
        hidden = self.hidden(output)
        return self.halt(hidden)[:, 0], self.value(hidden)[:, 0], new_state[0]

    def get_config(self):
        config = super().get_config()
        config.update({"max_hops": self.max_hops, "gru_units": self.gru_units, "mlp_units": self.mlp_units,
                       "bias_init": self.bias_init, "inputs": self.inputs})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "num_inputs" in config:  # a standalone policy saved by 1.1
            config["inputs"] = HALTING_INPUTS[config.pop("num_inputs") - 1]
        return cls(**config)


def _refuse_1_1_arguments(owner, kwargs):
    if "num_inputs" in kwargs:
        raise TypeError(f"{owner}(num_inputs=...) is now {owner}(inputs='distance') or inputs='distance+entropy'.")


@keras.saving.register_keras_serializable(package="keras_relmem")
class HaltingPolicy(HaltingNetwork):
    """MEMO's halting policy trained by REINFORCE: a GRU over [distance, one-hot hop] and an MLP.

    Each hop it reads the Bhattacharyya distance between this hop's and the previous hop's attention (and by
    default the entropy of the hop's answer) with the one-hot hop index, and gives a halting logit
    (`P(halt) = sigmoid(logit)`) and a value estimate, the baseline of its REINFORCE loss (`loss`). At inference
    an example halts at the first hop whose `P(halt)` exceeds `threshold`; in training the halting hop is
    sampled (`sample`). Give it to `MEMO(halting=...)`, which sets `max_hops`.

    Args:
        max_hops: int, N (the one-hot size); None (default) takes the MEMO's.
        gru_units: int, GRU size (default 256, the paper's).
        mlp_units: int, MLP size (default 64, the paper's).
        bias_init: float, initial bias of the halting logit (default -3.0: P(halt) starts near 0.05). The
            paper's +2/+5/+10 (appendix D) are our -2/-5/-10; near-certain halting at hop 1 warns.
        inputs: `"distance+entropy"` (default) or `"distance"` (the paper's input alone, §2.3).
        threshold: float in (0, 1), P(halt) above which inference stops (default 0.5).
        gamma: float, the discount of the n-step returns (default 1.0).
        alpha: float, weight of the value loss (default 0.1).
        beta: float, weight of the expected-hops loss, a cost per hop (default 0.01).
        n_step: int or None, the bootstrap horizon of the returns (default None: Monte-Carlo returns).
        **kwargs: standard layer arguments.

    Call arguments:
        features: `(batch,)` this hop's attention distance (with `inputs="distance+entropy"`,
            `(batch, 2)`: the distance, then the entropy; `features()` builds it).
        hop: int, the hop's index (0-based), one-hot encoded inside.
        state: `(batch, gru_units)`, the GRU state (`initial_state(batch)` before the first hop).

    Returns:
        `(halt_logit (batch,), value (batch,), new_state (batch, gru_units))`.

    Example:

    ```python
    >>> import numpy as np, keras_relmem
    >>> policy = HaltingPolicy(gru_units=8, mlp_units=4, inputs="distance")
    >>> memo = keras_relmem.MEMO(num_answers=2, key_size=8, max_hops=5, halting=policy)
    >>> policy.max_hops
    5
    >>> logit, value, state = policy(np.zeros((2,), "float32"), hop=0,
    ...                              state=policy.initial_state(2))
    >>> tuple(logit.shape), tuple(state.shape)
    ((2,), (2, 8))

    ```

    Reference: Banino et al., "MEMO: a deep network for flexible combination of episodic memories", ICLR 2020,
    arXiv:2001.10913 (§2.3, appendix D).
    """

    def __init__(self, max_hops=None, gru_units=256, mlp_units=64, bias_init=-3.0, inputs="distance+entropy",
                 threshold=0.5, gamma=1.0, alpha=0.1, beta=0.01, n_step=None, **kwargs):
        super().__init__(max_hops, gru_units, mlp_units, bias_init, inputs, **kwargs)
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1); received threshold={threshold!r}.")
        check_n_step(n_step)
        self.threshold = float(threshold)
        self.gamma, self.alpha, self.beta = float(gamma), float(alpha), float(beta)
        self.n_step = n_step

    def step(self, p_halt, logits, final, mass, halted, last):
        """One hop of inference: an example halts once `p_halt > threshold` (or at the last hop) and answers with
        that hop's `logits`. Returns `(final, mass, stop)`."""
        stop = ops.logical_or(p_halt > self.threshold, last)
        newly = ops.logical_and(stop, ops.logical_not(halted))
        return ops.where(ops.expand_dims(newly, -1), logits, final), mass, stop

    def answer(self, final):
        """The logits the loop's `final` gives: the halting hop's own."""
        return final

    def sample(self, halt_logits, seed=None):
        """Each example's halting hop (1-based), sampled from `halt_logits (batch, N)`; forced at N."""
        return sample_halting(halt_logits, seed=seed)

    def loss(self, halt_logits, values, halt_hop, reward):
        """This policy's REINFORCE loss (`reinforce_halting_loss` with its gamma, alpha, beta and n_step)."""
        return reinforce_halting_loss(halt_logits, values, halt_hop, reward,
                                      self.gamma, self.alpha, self.beta, self.n_step)

    def get_config(self):
        config = super().get_config()
        config.update({"threshold": self.threshold, "gamma": self.gamma, "alpha": self.alpha, "beta": self.beta,
                       "n_step": self.n_step})
        return config


@keras.saving.register_keras_serializable(package="keras_relmem")
class ACTHalting(HaltingNetwork):
    """Adaptive computation time as MEMO's halting policy (Graves 2016; MEMO appendix F).

    The network of `HaltingPolicy` gives `p_t = sigmoid(halt_logit_t)` each hop; the run stops at the first hop
    `n` where `sum_{k<=n} p_k >= 1 - epsilon` (or at N) and answers with the mixture of the hops' answer
    distributions weighted by `p_t` (hop `n` by the remainder). It is trained with the answers, by
    backpropagation through the mixture plus `ponder_cost` times the ponder time `n + remainder`
    (`act_weights`); its value head is unused. Give it to `MEMO(halting=...)`, which sets `max_hops`.

    Args:
        max_hops: int, N (the one-hot size); None (default) takes the MEMO's.
        gru_units: int, GRU size (default 256).
        mlp_units: int, MLP size (default 64).
        bias_init: float, initial bias of the halting logit (default -3.0).
        inputs: `"distance+entropy"` (default) or `"distance"`.
        epsilon: float, ACT's epsilon (default 0.01).
        ponder_cost: float, ACT's tau, the weight of the ponder time in the loss (default 0.01).
        **kwargs: standard layer arguments.

    Call arguments:
        features: `(batch,)` or `(batch, 2)`, as `HaltingPolicy`'s.
        hop: int, the hop's index (0-based).
        state: `(batch, gru_units)`, the GRU state.

    Returns:
        `(halt_logit (batch,), value (batch,), new_state (batch, gru_units))`.

    Example:

    ```python
    >>> import keras_relmem
    >>> act = ACTHalting(gru_units=8, mlp_units=4, epsilon=0.05)
    >>> memo = keras_relmem.MEMO(num_answers=2, key_size=8, max_hops=5, halting=act)
    >>> memo.get_config()["halting"]["class_name"]
    'ACTHalting'

    ```

    Reference: Graves, "Adaptive computation time for recurrent neural networks", arXiv:1603.08983 (2016);
    Banino et al., arXiv:2001.10913 (appendix F).
    """

    def __init__(self, max_hops=None, gru_units=256, mlp_units=64, bias_init=-3.0, inputs="distance+entropy",
                 epsilon=0.01, ponder_cost=0.01, **kwargs):
        super().__init__(max_hops, gru_units, mlp_units, bias_init, inputs, **kwargs)
        self.epsilon = float(epsilon)
        self.ponder_cost = float(ponder_cost)

    def _make_network(self):
        super()._make_network()
        self.value.trainable = False  # ACT has no REINFORCE baseline

    def step(self, p_halt, logits, final, mass, halted, last):
        """One hop of inference: the hop's answer distribution joins the mixture with weight `p_halt` (the
        remainder `1 - mass` at the hop where the mass reaches `1 - epsilon`). Returns `(final, mass, stop)`."""
        stop = ops.logical_or(mass + p_halt >= 1.0 - self.epsilon, last)
        newly = ops.logical_and(stop, ops.logical_not(halted))
        weight = ops.where(newly, 1.0 - mass, ops.where(halted, 0.0, p_halt))
        final = final + ops.expand_dims(weight, -1) * ops.softmax(logits, axis=-1)
        return final, mass + weight, stop

    def answer(self, final):
        """The log of the mixture of the hops' answer distributions."""
        return ops.log(ops.maximum(final, 1e-12))

    def mixture_weights(self, halt_logits):
        """`act_weights` with this policy's epsilon: `(weights (batch, N), ponder (batch,), stop_hop (batch,))`."""
        return act_weights(halt_logits, self.epsilon)

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon, "ponder_cost": self.ponder_cost})
        return config


def get(halting):
    """A halting policy from what `MEMO(halting=...)` accepts: a policy layer (returned as it is), its
    serialized config, `"reinforce"` (`HaltingPolicy()`), `"act"` (`ACTHalting()`) or None (no policy)."""
    if halting is None or isinstance(halting, HaltingNetwork):
        return halting
    if isinstance(halting, dict):
        return keras.saving.deserialize_keras_object(halting)
    if halting == "reinforce":
        return HaltingPolicy()
    if halting == "act":
        return ACTHalting()
    raise ValueError("halting must be a HaltingPolicy or ACTHalting layer, 'reinforce', 'act' or None; "
                     f"received halting={halting!r}.")


def policy_from_1_1(config):
    """A MEMO or MEMOClassifier config as 1.1 wrote it, `halting` a string with its policy's arguments beside it
    (`ARGUMENTS_1_1`): the same config with `halting` the policy's serialized config (a `.keras` file or
    checkpoint written by 1.1 loads as it was). A 2.0 config is returned as it is."""
    config = dict(config)
    moved = {old: config.pop(old) for old in ARGUMENTS_1_1 if old in config}
    mode = config.setdefault("halting", "reinforce")  # 1.1's MEMOClassifier left MEMO's default out
    policy = {"reinforce": HaltingPolicy, "act": ACTHalting}.get(mode) if isinstance(mode, str) else None
    if policy is None:
        return config
    settings = {"inputs": "distance+entropy"}  # 1.1 MEMO's default
    settings.update({ARGUMENTS_1_1[old][0]: value for old, value in moved.items()
                     if ARGUMENTS_1_1[old][1] in (None, policy.__name__)})
    config["halting"] = keras.saving.serialize_keras_object(policy(**settings))
    return config


def check_n_step(n_step):
    """`n_step` is None (Monte-Carlo returns) or a positive int; anything else is refused."""
    if n_step is not None and (isinstance(n_step, bool) or not isinstance(n_step, numbers.Integral) or n_step < 1):
        raise ValueError(
            f"n_step (the REINFORCE bootstrap horizon) must be a positive int or None; received n_step={n_step!r}."
        )


def reinforce_halting_loss(halt_logits, values, halt_hop, reward, gamma=0.9, alpha=0.1, beta=0.01, n_step=None):
    """MEMO's halting-policy loss `L = L_pi + alpha L_V + beta L_hop`.

    Args:
        halt_logits: `(batch, N)` halting logits of every hop.
        values: `(batch, N)` value estimates.
        halt_hop: `(batch,)` int, the hop (1-based) at which the sampled policy
            halted; `N` may be a forced stop.
        reward: `(batch,)` float, 1 when the answer at `halt_hop` is right.
        gamma: discount of the n-step returns.
        alpha: weight of the value loss.
        beta: weight of the expected-hops loss.
        n_step: bootstrap horizon (default N: Monte-Carlo returns).

    Returns:
        dict with `loss` and its parts `policy`, `value`, `hops` (the
        expected number of hops under the current policy), all batch means.

    The episode's only reward comes when it halts (at step `T = halt_hop`).
    Step `t <= T` took action "continue" (t < T) or "halt" (t = T, unless the
    stop at `N` was forced and so not the policy's choice); its n-step return
    is `R_t = gamma^(T-t) r` when `T - t < n`, else `gamma^n V_(t+n)`.
    `L_pi = -sum_t log pi(a_t) (R_t - V_t)`, `L_V = 1/2 sum_t (R_t - V_t)^2`,
    `L_hop = sum_t t P(first halt at t)`. The returns and advantages carry no
    gradient.
    """
    halt_logits = ops.cast(halt_logits, "float32")
    values = ops.cast(values, "float32")
    reward = ops.cast(reward, "float32")
    n_hops = halt_logits.shape[1]
    check_n_step(n_step)
    n_step = n_hops if n_step is None else n_step
    steps = ops.arange(1, n_hops + 1, dtype="float32")[None, :]  # 1..N
    T = ops.cast(ops.expand_dims(halt_hop, -1), "float32")
    taken = ops.cast(steps <= T, "float32")
    is_halt = ops.cast(ops.logical_and(steps == T, steps < n_hops), "float32")
    chose = taken * ops.cast(steps < n_hops, "float32")  # the stop at N is forced
    log_halt = ops.log_sigmoid(halt_logits)
    log_continue = ops.log_sigmoid(-halt_logits)
    log_prob = is_halt * log_halt + (1.0 - is_halt) * log_continue
    # n-step returns.
    to_go = T - steps
    mc_return = ops.power(gamma, to_go) * ops.expand_dims(reward, -1)
    boot_index = ops.cast(ops.minimum(steps - 1 + n_step, n_hops - 1), "int32")
    bootstrap = ops.take_along_axis(values, ops.broadcast_to(boot_index, ops.shape(values)), axis=1)
    returns = ops.where(to_go < n_step, mc_return, ops.power(gamma, float(n_step)) * bootstrap)
    returns = ops.stop_gradient(returns)
    advantage = ops.stop_gradient(returns - values)
    policy_loss = -ops.sum(chose * log_prob * advantage, axis=1)
    value_loss = 0.5 * ops.sum(taken * ops.square(returns - values), axis=1)
    # Expected hops: P(first halt at t) = p_t prod_{k<t}(1 - p_k), forced at N.
    p_halt = ops.sigmoid(halt_logits)
    survive = ops.cumprod(1.0 - p_halt, axis=1)
    survive_before = ops.concatenate([ops.ones_like(survive[:, :1]), survive[:, :-1]], axis=1)
    first_halt = survive_before * p_halt
    first_halt = ops.concatenate([first_halt[:, :-1], survive_before[:, -1:]], axis=1)
    expected_hops = ops.sum(first_halt * steps, axis=1)
    loss = policy_loss + alpha * value_loss + beta * expected_hops
    return {
        "loss": ops.mean(loss),
        "policy": ops.mean(policy_loss),
        "value": ops.mean(value_loss),
        "hops": ops.mean(expected_hops),
    }


def sample_halting(halt_logits, seed=None):
    """Sample each example's halting hop (1-based) from the policy; forced at N."""
    p_halt = ops.sigmoid(ops.cast(halt_logits, "float32"))
    draws = keras.random.uniform(ops.shape(p_halt), seed=seed) < p_halt
    draws = ops.concatenate([draws[:, :-1], ops.ones_like(draws[:, -1:])], axis=1)
    return ops.cast(ops.argmax(ops.cast(draws, "int32"), axis=1), "int32") + 1


def act_weights(halt_logits, epsilon=0.01):
    """ACT (Graves 2016; MEMO appendix F): per-hop weights and ponder cost.

    With `p_t = sigmoid(halt_logit_t)`, the run stops at the first hop `n`
    where `sum_{k<=n} p_k >= 1 - epsilon` (or at N); hops before `n` weigh
    `p_t`, hop `n` the remainder `R = 1 - sum_{k<n} p_k`. Returns
    `(weights (batch, N), ponder (batch,) = n + R, stop_hop (batch,) = n)`.
    """
    p = ops.sigmoid(ops.cast(halt_logits, "float32"))
    n_hops = p.shape[1]
    cumulative = ops.cumsum(p, axis=1)
    reached = cumulative >= 1.0 - epsilon
    reached = ops.concatenate([reached[:, :-1], ops.ones_like(reached[:, -1:])], axis=1)
    stop = ops.argmax(ops.cast(reached, "int32"), axis=1)  # 0-based
    steps = ops.arange(n_hops)[None, :]
    before = ops.expand_dims(stop, -1)
    mass_before = ops.sum(ops.where(steps < before, p, 0.0), axis=1)
    remainder = 1.0 - mass_before
    weights = ops.where(steps < before, p, ops.where(steps == before, ops.expand_dims(remainder, -1), 0.0))
    stop_hop = ops.cast(stop, "int32") + 1
    return weights, ops.cast(stop_hop, "float32") + remainder, stop_hop
