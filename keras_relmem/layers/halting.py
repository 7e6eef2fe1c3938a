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

HALTING_MODES = ("reinforce", "act", None)
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


def _warn_if_halting_at_once(bias_init):
    p_halt = 1.0 / (1.0 + math.exp(-bias_init))
    if p_halt > _HALT_AT_ONCE_PROBABILITY:
        warnings.warn(
            f"bias_init={bias_init:g} gives P(halt) = sigmoid({bias_init:g}) = {p_halt:.2f} at the first hop: "
            "the untrained policy halts after hop 1 almost always (and always at inference, where it halts "
            "once P(halt) > 0.5). Here P(halt) = sigmoid(logit), so a negative bias makes another hop likely; "
            f"the paper's +2/+5/+10 correspond to bias_init=-2/-5/-10.",
            UserWarning,
            stacklevel=3,
        )


def check_halting_inputs(halting_inputs):
    """The number of halting features `halting_inputs` names; anything else is refused."""
    if halting_inputs not in HALTING_INPUTS:
        raise ValueError(f"halting_inputs must be one of {HALTING_INPUTS}; received halting_inputs={halting_inputs!r}.")
    return len(halting_inputs.split("+"))


def answer_entropy(logits):
    """Entropy (nats) of `softmax(logits)` over the last axis."""
    logits = ops.cast(logits, "float32")
    log_p = ops.log_softmax(logits, axis=-1)
    return -ops.sum(ops.exp(log_p) * log_p, axis=-1)


def bhattacharyya_distance(p, q, epsilon=1e-10):
    """`-log(sum_i sqrt(p_i q_i))` over the last axis (0 for equal distributions)."""
    coefficient = ops.sum(ops.sqrt(ops.maximum(p * q, 0.0)), axis=-1)
    return -ops.log(ops.maximum(coefficient, epsilon))


@keras.saving.register_keras_serializable(package="keras_relmem")
class HaltingPolicy(keras.layers.Layer):
    """MEMO's halting network: a GRU over [distance, one-hot hop] and an MLP.

    Each hop it reads the Bhattacharyya distance between this hop's and the
    previous hop's attention weights (with `num_inputs > 1`, further
    per-example features after it, e.g. the entropy of the hop's answer) and
    the one-hot hop index, updates a GRU state and outputs a halting logit
    (`P(halt) = sigmoid(logit)`) and a value estimate (the REINFORCE
    baseline).

    Args:
        max_hops: int, N (the one-hot size).
        gru_units: int (default 256, as in the paper).
        mlp_units: int (default 64, as in the paper).
        bias_init: float, initial bias of the halting logit. Here
            `P(halt) = sigmoid(logit)`, so negative values make the untrained
            policy prefer another hop (default -3.0: P(halt) starts near
            0.05). The paper's sweep (+2, +5, +10, appendix D) uses the
            opposite sign, "continue" being its positive class: its values
            are our -2, -5, -10. A value that makes halting at hop 1 near
            certain (P(halt) > 0.85) draws a warning.
        num_inputs: int, features per hop before the one-hot hop index
            (default 1: the paper's distance alone). With 1 the call takes
            `(batch,)`, otherwise `(batch, num_inputs)`.
        **kwargs: standard layer arguments.

    Call arguments:
        distance: `(batch,)` this hop's attention distance (with `num_inputs > 1`, `(batch, num_inputs)`: the
            distance, then the other features).
        hop: int, the hop's index (0-based), one-hot encoded inside.
        state: `(batch, gru_units)`, the GRU state (`initial_state(batch)` before the first hop).

    Returns:
        `(halt_logit (batch,), value (batch,), new_state (batch, gru_units))`.

    Example:

    ```python
    >>> import numpy as np
    >>> policy = HaltingPolicy(max_hops=5, gru_units=8, mlp_units=4)
    >>> policy.build()
    >>> logit, value, state = policy(np.zeros((2,), "float32"), hop=0,
    ...                              state=policy.initial_state(2))
    >>> tuple(logit.shape), tuple(state.shape)
    ((2,), (2, 8))

    ```

    Reference: Banino et al., "MEMO: a deep network for flexible combination
    of episodic memories", ICLR 2020, arXiv:2001.10913 (§2.3).
    """

    def __init__(self, max_hops, gru_units=256, mlp_units=64, bias_init=-3.0, num_inputs=1, **kwargs):
        super().__init__(**kwargs)
        utils.check_positive_int("max_hops", max_hops)
        utils.check_positive_int("num_inputs", num_inputs)
        self.num_inputs = num_inputs
        utils.check_positive_int("gru_units", gru_units)
        utils.check_positive_int("mlp_units", mlp_units)
        self.max_hops = max_hops
        self.gru_units = gru_units
        self.mlp_units = mlp_units
        self.bias_init = float(bias_init)
        _warn_if_halting_at_once(self.bias_init)
        self.gru = keras.layers.GRUCell(gru_units, dtype=self.dtype_policy, name="gru")
        self.hidden = keras.layers.Dense(mlp_units, activation="relu", dtype=self.dtype_policy, name="mlp")
        self.halt = keras.layers.Dense(
            1, bias_initializer=keras.initializers.Constant(self.bias_init),
            dtype=self.dtype_policy, name="halt",
        )
        self.value = keras.layers.Dense(1, dtype=self.dtype_policy, name="value")

    def build(self, input_shape=None):
        batch = None
        self.gru.build((batch, self.num_inputs + self.max_hops))
        self.hidden.build((batch, self.gru_units))
        self.halt.build((batch, self.mlp_units))
        self.value.build((batch, self.mlp_units))
        self.built = True

    def initial_state(self, batch_size):
        return ops.zeros((batch_size, self.gru_units), dtype=self.compute_dtype)

    def call(self, distance, hop, state):
        """One hop: `distance (batch,)` (or `(batch, num_inputs)`), `hop` int (0-based), `state (batch, units)`.

        Returns `(halt_logit (batch,), value (batch,), new_state)`.
        """
        batch = ops.shape(distance)[0]
        one_hot = ops.one_hot(ops.full((batch,), hop, dtype="int32"), self.max_hops, dtype=self.compute_dtype)
        inputs = ops.cast(distance, self.compute_dtype)
        if len(inputs.shape) == 1:
            inputs = ops.expand_dims(inputs, -1)
        if inputs.shape[-1] != self.num_inputs:
            raise ValueError(
                f"This HaltingPolicy reads {self.num_inputs} feature(s) per hop; received shape {tuple(inputs.shape)}."
            )
        features = ops.concatenate([inputs, one_hot], -1)
        output, new_state = self.gru(features, [state])
        hidden = self.hidden(output)
        return self.halt(hidden)[:, 0], self.value(hidden)[:, 0], new_state[0]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_hops": self.max_hops,
                "gru_units": self.gru_units,
                "mlp_units": self.mlp_units,
                "bias_init": self.bias_init,
                "num_inputs": self.num_inputs,
            }
        )
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
