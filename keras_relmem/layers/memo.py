"""MEMO (Banino et al. 2020): multi-head recurrent attention over separate facts,
with an adaptive number of hops chosen by a halting policy (`keras_relmem.layers.halting`).

Everything here is `keras.ops` math. The REINFORCE training step that uses
`MEMO.unrolled` and `reinforce_halting_loss` lives in `keras_relmem.models.memo`.
"""

import keras
from keras import ops

from keras_relmem.layers import halting as halting_policies
from keras_relmem.layers import utils
from keras_relmem.layers.halting import bhattacharyya_distance

LOGIT_MIXING = ("heads", "facts")
_NEG_INF = -1e9


def _identities(size):
    """An initializer of identity matrices `size x size`, one per leading index of the shape."""

    def initializer(shape, dtype=None):
        # zeros + eye, not broadcast_to: torch's broadcast is a view whose rows share memory, which a
        # variable cannot be assigned into
        return ops.zeros(tuple(shape), dtype=dtype) + ops.eye(size, dtype=dtype)

    return initializer


def _unit(x):
    """`x` scaled to unit length along its last axis (0 stays 0)."""
    return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=-1, keepdims=True), 1e-12))


def _facts_count(facts):
    """I, static when known; dynamic when a traced function relaxed it (memories of several sizes)."""
    return facts.shape[1] if facts.shape[1] is not None else ops.shape(facts)[1]


@keras.saving.register_keras_serializable(package="keras_relmem")
class MEMO(keras.layers.Layer):
    """MEMO: recurrent multi-head attention over separately stored facts.

    Facts stay separate (never summed): fact `i` with items `c_i1..c_iS` is flattened to `vec(c_i)`; per head
    `h`, keys `k_hi = W_k^h vec(c_i)` and values `v_hi = W_v^h vec(c_i)` (size `d`). The query starts as
    `Q_0 = W_q0 vec(query)` (size `H d`). At hop `t`:

        logits_hi = k_hi^T W_h q_h / sqrt(d)     (logit_mixing="heads", default)
                  = sum_j W_h[i, j] k_hj^T q_h / sqrt(d)   (logit_mixing="facts", eq. 11)
        w_h       = softmax_i(logits_h)           (padded facts masked; dropout)
        Q_t       = LayerNorm(W_q vec(sum_i w_1i v_1i, ..., sum_i w_Hi v_Hi) + Q_{t-1})
        answer_t  = W_a dropout(relu(W_qa Q_t))   (logits)

    A halting policy reads the Bhattacharyya distance between this hop's `w` and the last (and by default
    the entropy of the hop's answer) with the one-hot hop index. Calling the layer runs the adaptive loop
    and really stops: a batch ends when every example has halted, or at `max_hops`. `unrolled()` runs all
    `max_hops` hops and returns what the training losses need. Why the defaults are what they are (the
    measurements) is in docs/layers.md and the results pages. The non-trainable weight `linear_phase` (0) mixes
    the raw logits into the reads while it is above 0: `callbacks.LinearStart` sets it to 1 for the first epochs
    (linear start, Sukhbaatar et al. 2015, §4.2).

    Args:
        num_answers: int, answer classes.
        key_size: int, `d`, size of keys, values and each head's query (default 64).
        num_heads: int, `H` (default 4).
        max_hops: int, `N`, the hard stop (default 10).
        answer_units: int, hidden size of the answer MLP (default 128).
        attention_dropout: float, dropout on the attention weights (default 0.1).
        answer_dropout: float, dropout before the answer layer (default 0.1).
        halting: the halting policy: a `HaltingPolicy` (REINFORCE, the paper's, §2.3), an `ACTHalting`
            (adaptive computation time, appendix F), `"reinforce"` or `"act"` for one with its defaults (default
            `"reinforce"`), or None (always `max_hops` hops). The policy holds its own settings, threshold and
            loss; MEMO sets its `max_hops` and dtype policy.
        logit_mixing: `"heads"` (default: a d x d bilinear `W_h` per head, memories of any size) or
            `"facts"` (eq. 11: one I x I `W_h` shared by the heads; a fixed number of facts).
        share_hop_weights: bool (default True, the paper's): one `W_q` and `W_h` for every hop; False gives each
            hop its own (`max_hops` times their parameters).
        logit_scale: None (default, the paper's scaled dot product) or a float `s`: cosine logits times a learned
            per-head scale starting at `s` (query-key normalisation, Henry et al. 2020).
        coverage_penalty: float >= 0 (default 0.0, off as in the paper): each hop's logits lose this times the
            attention its head put on each fact at earlier hops (coverage, Tu et al. 2016, §3).
        kernel_initializer: initializer of the projections (default glorot uniform), or `"bags"`: `W_k`, `W_v`
            and `W_q0` start as one projection repeated for every item (orthonormal rows; needs `H d >= d_c`) and
            `W_q` as the identity, so facts sharing the query's words start with higher logits (Sukhbaatar et
            al. 2015, §2.2, adjacent tying).
        seed: optional int seed for dropout and the `"bags"` projection.
        **kwargs: standard layer arguments.

    Call arguments:
        inputs: `[facts, query]`: `facts (batch, I, S, d_c)`, `query (batch, Sq, d_c)`.
        mask: optional `(batch, I)` booleans, False for padded facts.
        training: bool, whether dropout is applied. Gradients through the adaptive loop may be taken whatever
            its value (on JAX the loop is then unrolled over `max_hops`; the outputs are the same).

    Returns:
        `(logits (batch, num_answers), hops (batch,) int32)`: the answer at the hop where the halting policy
        stopped, and that hop.

    Example:

    ```python
    >>> import keras_relmem, numpy as np
    >>> facts = np.ones((3, 6, 4, 16), "float32")  # 6 facts of 4 words
    >>> query = np.ones((3, 4, 16), "float32")
    >>> memo = keras_relmem.MEMO(num_answers=2, num_heads=4, key_size=8,
    ...                          max_hops=5)
    >>> logits, hops = memo([facts, query])
    >>> tuple(logits.shape), tuple(hops.shape)
    ((3, 2), (3,))

    ```

    Reference: Banino et al., "MEMO: a deep network for flexible combination of episodic memories", ICLR 2020,
    arXiv:2001.10913 (§2.2-2.3, appendix D and F).
    """

    def __init__(
        self,
        num_answers,
        key_size=64,
        num_heads=4,
        max_hops=10,
        answer_units=128,
        attention_dropout=0.1,
        answer_dropout=0.1,
        halting="reinforce",
        logit_mixing="heads",
        share_hop_weights=True,
        logit_scale=None,
        coverage_penalty=0.0,
        kernel_initializer="glorot_uniform",
        seed=None,
        **kwargs,
    ):
        refuse_1_1_arguments(kwargs)
        super().__init__(**kwargs)
        for name, value in (
            ("num_answers", num_answers), ("key_size", key_size), ("num_heads", num_heads),
            ("max_hops", max_hops), ("answer_units", answer_units),
        ):
            utils.check_positive_int(name, value)
        utils.check_rate("attention_dropout", attention_dropout)
        utils.check_rate("answer_dropout", answer_dropout)
        if logit_mixing not in LOGIT_MIXING:
            raise ValueError(f"logit_mixing must be 'heads' or 'facts'; received logit_mixing={logit_mixing!r}.")
        self.share_hop_weights = bool(share_hop_weights)
        if logit_scale is not None and not logit_scale > 0:
            raise ValueError(f"logit_scale must be None or > 0; received logit_scale={logit_scale!r}.")
        self.logit_scale = None if logit_scale is None else float(logit_scale)
        if not coverage_penalty >= 0:
            raise ValueError(f"coverage_penalty must be >= 0; received coverage_penalty={coverage_penalty!r}.")
        self.coverage_penalty = float(coverage_penalty)
        self.num_answers = num_answers
        self.key_size = key_size
        self.num_heads = num_heads
        self.max_hops = max_hops
        self.answer_units = answer_units
        self.attention_dropout = float(attention_dropout)
        self.answer_dropout = float(answer_dropout)
        self.logit_mixing = logit_mixing
        self.bags = kernel_initializer == "bags"
        self.kernel_initializer = keras.initializers.get("glorot_uniform" if self.bags else kernel_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        """@private the dropout masks' seed state (Keras tracks it as a variable of the layer)."""
        self.supports_masking = True
        size = num_heads * key_size
        def dense(units, name, **kwargs):
            return utils.dense(self, units, name, **kwargs)

        self.key_projection = dense(size, "keys", use_bias=False)
        self.value_projection = dense(size, "values", use_bias=False)
        self.query_projection = dense(size, "query0", use_bias=False)
        if self.share_hop_weights:
            self.hop_projection = dense(size, "W_q")
        else:  # a Dense per hop: each draws its own initial kernel
            self.hop_projections = [dense(size, f"W_q_hop{t + 1}") for t in range(max_hops)]
        self.norm = keras.layers.LayerNormalization(dtype=self.dtype_policy, name="query_norm")
        self.answer_hidden = dense(answer_units, "W_qa", activation="relu")
        self.answer_output = dense(num_answers, "W_a")
        # The attribute keeps 1.1's name, under which `.keras` files store the policy's weights.
        self.policy = halting_policies.get(halting)
        if self.policy is not None:
            self.policy.attach(max_hops, self.dtype_policy)

    def build(self, input_shape):
        facts_shape, query_shape = input_shape
        if len(facts_shape) != 4 or len(query_shape) != 3:
            raise ValueError(
                "MEMO takes [facts (batch, I, S, d_c), query (batch, Sq, d_c)]; received "
                f"shapes {facts_shape} and {query_shape}."
            )
        fact_size = utils.prod(facts_shape[2:])
        query_size = utils.prod(query_shape[1:])
        size = self.num_heads * self.key_size
        self.key_projection.build((None, fact_size))
        self.value_projection.build((None, fact_size))
        self.query_projection.build((None, query_size))
        if self.logit_mixing == "facts":
            self.num_facts = facts_shape[1]
            if self.num_facts is None:
                raise ValueError(
                    "logit_mixing='facts' (the paper's I x I W_h) needs a fixed number of facts; "
                    f"received facts of shape {facts_shape}. Use logit_mixing='heads' for memories of any size."
                )
            mixing_shape = (self.num_facts, self.num_facts)
        else:
            mixing_shape = (self.num_heads, self.key_size, self.key_size)
        hops = () if self.share_hop_weights else (self.max_hops,)
        self.mixing = self.add_weight(
            shape=hops + mixing_shape, initializer=_identities(mixing_shape[-1]), name="W_h"
        )
        if self.logit_scale is not None:
            self.scale = self.add_weight(shape=(self.num_heads,),
                                         initializer=keras.initializers.Constant(self.logit_scale), name="logit_scale")
        self.linear_phase = self.add_weight(shape=(), initializer="zeros", trainable=False, name="linear_phase")
        for projection in self._hop_projections():
            projection.build((None, size))
        self.norm.build((None, size))
        self.answer_hidden.build((None, size))
        self.answer_output.build((None, self.answer_units))
        if self.policy is not None:
            self.policy.build()
        if self.bags:
            self._initialise_as_bags(facts_shape[-1], query_shape[-1])
        self.built = True

    def _initialise_as_bags(self, fact_item, query_item):
        """`kernel_initializer="bags"`: one `P` repeated over the items of keys, values and query; `W_q = I`."""
        size = self.num_heads * self.key_size
        if fact_item != query_item or fact_item is None or size < fact_item:
            raise ValueError(
                "kernel_initializer='bags' needs facts and query items of one known size d_c <= num_heads * key_size "
                f"(one matrix projects both); received items of size {fact_item} (facts) and {query_item} "
                f"(query) with num_heads * key_size = {size}."
            )
        seed = None if self.seed is None else self.seed + 1
        bag = keras.initializers.Orthogonal(seed=seed)((fact_item, size))
        for projection in (self.key_projection, self.value_projection, self.query_projection):
            items = projection.kernel.shape[0] // fact_item
            projection.kernel.assign(ops.cast(ops.tile(bag, (items, 1)), projection.kernel.dtype))
        for projection in self._hop_projections():
            projection.kernel.assign(ops.eye(size, dtype=projection.kernel.dtype))

    # -- pieces -------------------------------------------------------------
    def memory(self, facts, query):
        """Keys and values `(batch, H, I, d)` and the initial query `(batch, H d)`."""
        if self.logit_mixing == "facts" and facts.shape[1] is not None and facts.shape[1] != self.num_facts:
            raise ValueError(
                f"This MEMO was built for {self.num_facts} facts (logit_mixing='facts': W_h is "
                f"{self.num_facts} x {self.num_facts}); received {facts.shape[1]}. Pad memories to "
                f"{self.num_facts} facts, or use logit_mixing='heads'."
            )
        batch, facts_count = ops.shape(facts)[0], _facts_count(facts)
        flat = ops.reshape(facts, (-1, facts.shape[2] * facts.shape[3]))

        def heads(x):
            x = ops.reshape(x, (batch, facts_count, self.num_heads, self.key_size))
            return ops.transpose(x, (0, 2, 1, 3))

        keys = heads(self.key_projection(flat))
        values = heads(self.value_projection(flat))
        query0 = self.query_projection(ops.reshape(query, (batch, -1)))
        return keys, values, query0

    def _hop_projections(self):
        return [self.hop_projection] if self.share_hop_weights else self.hop_projections

    def _hop_weight(self, weights, t):
        """Hop `t`'s weight: `weights` itself when the hops share it, else its slice `t`.

        `weights` is one weight with a leading hop axis, or a list of one
        weight per hop. `t` is a Python int when the hops are unrolled (the
        slice is taken directly) and a traced int in the adaptive loop (the
        list is stacked, then indexed).
        """
        if self.share_hop_weights:
            return weights
        if isinstance(t, int):
            return weights[t]
        if isinstance(weights, list):
            weights = ops.stack([w.value for w in weights])
        return ops.take(weights, t, axis=0)

    def _dot_logits(self, q, keys):
        """`q (b, H, 1, d)` against `keys (b, H, I, d)`: `q.k / sqrt(d)`, or with `logit_scale` the cosine
        times the head's learned scale. Returns float32 `(b, H, I)`."""
        if self.logit_scale is not None:
            q, keys = _unit(q), _unit(keys)
        logits = ops.cast(ops.matmul(q, ops.transpose(keys, (0, 1, 3, 2)))[:, :, 0, :], "float32")
        if self.logit_scale is None:
            return logits / (self.key_size**0.5)
        return logits * ops.reshape(ops.cast(self.scale, "float32"), (1, self.num_heads, 1))

    def hop(self, keys, values, query, mask=None, training=False, t=0, coverage=None):
        """Hop `t` (0-based; it picks the weights with `share_hop_weights=False`):
        returns `(new_query, attention (batch, H, I), answer_logits)`. `coverage (batch, H, I)`, the summed
        attention of the hops before, is subtracted from the logits times `coverage_penalty`."""
        batch = ops.shape(query)[0]
        mixing = self._hop_weight(self.mixing, t)
        q = ops.reshape(query, (batch, self.num_heads, 1, self.key_size))
        if self.logit_mixing == "facts":
            logits = self._dot_logits(q, keys)  # (b, H, I)
            if mask is not None:  # padded facts must not leak into the valid ones' logits
                logits = ops.where(ops.expand_dims(mask, 1), logits, 0.0)
            logits = ops.matmul(logits, ops.transpose(ops.cast(mixing, "float32")))
        else:
            mixing = ops.transpose(ops.cast(mixing, q.dtype), (0, 2, 1))
            mixed = ops.matmul(q, mixing)  # (b, H, 1, d): (W_h q_h)^T
            logits = self._dot_logits(mixed, keys)
        if coverage is not None and self.coverage_penalty > 0:
            logits = logits - self.coverage_penalty * ops.cast(coverage, "float32")
        scores = logits
        if mask is not None:
            logits = ops.where(ops.expand_dims(mask, 1), logits, _NEG_INF)
        attention = ops.softmax(logits, axis=-1)
        # Linear start: while `linear_phase` is above 0 the reads mix in the raw logits (at 0, the softmax alone).
        linear = scores if mask is None else ops.where(ops.expand_dims(mask, 1), scores, 0.0)
        phase = ops.cast(self.linear_phase, "float32")
        weights = ops.cast(phase * linear + (1.0 - phase) * attention, values.dtype)
        if training and self.attention_dropout > 0:
            weights = keras.random.dropout(weights, self.attention_dropout, seed=self.seed_generator)
        read = ops.matmul(ops.expand_dims(weights, 2), values)[:, :, 0, :]  # (b, H, d)
        read = ops.reshape(read, (batch, self.num_heads * self.key_size))
        if self.share_hop_weights:
            projected = self.hop_projection(read)
        else:  # t may be traced (the adaptive loop), so pick the kernel by index rather than the layer
            kernel = self._hop_weight([p.kernel for p in self.hop_projections], t)
            bias = self._hop_weight([p.bias for p in self.hop_projections], t)
            projected = ops.matmul(read, ops.cast(kernel, read.dtype)) + ops.cast(bias, read.dtype)
        new_query = self.norm(projected + query)
        hidden = self.answer_hidden(new_query)
        if training and self.answer_dropout > 0:
            hidden = keras.random.dropout(hidden, self.answer_dropout, seed=self.seed_generator)
        return new_query, attention, ops.cast(self.answer_output(hidden), "float32")

    def uniform_attention(self, batch, facts_count, mask=None):
        """The 'previous' attention before the first hop: uniform over valid facts."""
        if mask is None:
            ones = ops.ones((batch, self.num_heads, facts_count), "float32")
        else:
            ones = ops.repeat(ops.expand_dims(ops.cast(mask, "float32"), 1), self.num_heads, axis=1)
        return ones / ops.maximum(ops.sum(ones, axis=-1, keepdims=True), 1.0)

    def hop_distance(self, attention, previous):
        """Bhattacharyya distance to the last hop's attention, mean over heads.

        The halting policy's input; gradient-free, so nothing flows from the
        halting network into MEMO.
        """
        return ops.mean(
            bhattacharyya_distance(ops.stop_gradient(attention), ops.stop_gradient(previous)), axis=-1
        )

    # -- training and inference ----------------------------------------------
    def unrolled(self, inputs, mask=None, training=False):
        """Run all `max_hops` hops.

        Returns a dict of `answer_logits (batch, N, answers)`,
        `attention (batch, N, H, I)`, `distances (batch, N)` and, with a
        halting policy, `halt_logits (batch, N)` and `values (batch, N)`.
        """
        facts, query = inputs
        if not self.built:  # called directly, before any __call__
            self.build([tuple(facts.shape), tuple(query.shape)])
        keys, values, q = self.memory(facts, query)
        batch, facts_count = ops.shape(facts)[0], _facts_count(facts)
        previous = self.uniform_attention(batch, facts_count, mask)
        state = self.policy.initial_state(batch) if self.policy is not None else None
        answers, attentions, distances, halts, baselines = [], [], [], [], []
        coverage = ops.zeros_like(previous)
        for t in range(self.max_hops):
            q, attention, answer = self.hop(keys, values, q, mask, training, t, coverage)
            coverage = coverage + attention
            answers.append(answer)
            attentions.append(attention)
            distance = self.hop_distance(attention, previous)
            distances.append(distance)
            if self.policy is not None:
                halt, value, state = self.policy(self.policy.features(distance, answer), hop=t, state=state)
                halts.append(ops.cast(halt, "float32"))
                baselines.append(ops.cast(value, "float32"))
            previous = attention
        out = {
            "answer_logits": ops.stack(answers, axis=1),
            "attention": ops.stack(attentions, axis=1),
            "distances": ops.stack(distances, axis=1),
        }
        if self.policy is not None:
            out["halt_logits"] = ops.stack(halts, axis=1)
            out["values"] = ops.stack(baselines, axis=1)
        return out

    def call(self, inputs, mask=None, training=False):
        """Adaptive inference: `(logits (batch, answers), hops (batch,) int32)`."""
        if isinstance(mask, (list, tuple)):
            mask = mask[0] if mask and mask[0] is not None and len(mask[0].shape) == 2 else None
        facts, query = inputs
        keys, values, q0 = self.memory(facts, query)
        batch, facts_count = ops.shape(facts)[0], _facts_count(facts)
        previous0 = self.uniform_attention(batch, facts_count, mask)
        if self.policy is None:
            q, coverage = q0, ops.zeros_like(previous0)
            for t in range(self.max_hops):
                q, attention, logits = self.hop(keys, values, q, mask, training, t, coverage)
                coverage = coverage + attention
            return logits, ops.full((batch,), self.max_hops, dtype="int32")

        state0 = self.policy.initial_state(batch)
        final0 = ops.zeros((batch, self.num_answers), "float32")
        halted0 = ops.zeros((batch,), "bool")
        hops0 = ops.zeros((batch,), "int32")
        mass0 = ops.zeros((batch,), "float32")  # the cumulative halting probability (ACT's)

        def cond(t, q, previous, coverage, state, final, halted, hops, mass):
            return ops.logical_and(t < self.max_hops, ops.logical_not(ops.all(halted)))

        def body(t, q, previous, coverage, state, final, halted, hops, mass):
            q, attention, logits = self.hop(keys, values, q, mask, training, t, coverage)
            features = self.policy.features(self.hop_distance(attention, previous), logits)
            halt_logit, _, state = self.policy(features, hop=t, state=state)
            p_halt = ops.sigmoid(ops.cast(halt_logit, "float32"))
            final, mass, stop = self.policy.step(p_halt, logits, final, mass, halted, t + 1 >= self.max_hops)
            newly = ops.logical_and(stop, ops.logical_not(halted))
            hops = ops.where(newly, ops.cast(t + 1, "int32"), hops)
            halted = ops.logical_or(halted, stop)
            return t + 1, q, attention, coverage + attention, state, final, halted, hops, mass

        loop_vars = (ops.convert_to_tensor(0, "int32"), q0, previous0, ops.zeros_like(previous0), state0,
                     final0, halted0, hops0, mass0)
        if training or keras.backend.backend() == "jax":
            # A Python loop over the `max_hops` hops, which every backend can differentiate: on JAX always,
            # since gradients may be taken whatever `training` a caller passes (a subclassed model whose
            # `call` takes no `training` passes None) and JAX cannot reverse-differentiate `lax.while_loop`.
            # Hops after every row has halted change neither `final` nor `hops`, so the outputs are the
            # early-exit loop's.
            for _ in range(self.max_hops):
                loop_vars = body(*loop_vars)
            final, hops = loop_vars[5], loop_vars[7]
        else:
            # TensorFlow and torch differentiate their while loops. Bounded by max_hops so that XLA
            # (jit_compile=True on TensorFlow) can compile it; it stops early once every row has halted.
            _, _, _, _, _, final, _, hops, _ = ops.while_loop(cond, body, loop_vars,
                                                              maximum_iterations=self.max_hops)
        return self.policy.answer(final), hops

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs, mask=None, training=False):
        facts = inputs[0]
        return (
            keras.KerasTensor((facts.shape[0], self.num_answers), dtype="float32"),
            keras.KerasTensor((facts.shape[0],), dtype="int32"),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_answers": self.num_answers,
                "key_size": self.key_size,
                "num_heads": self.num_heads,
                "max_hops": self.max_hops,
                "answer_units": self.answer_units,
                "attention_dropout": self.attention_dropout,
                "answer_dropout": self.answer_dropout,
                "halting": None if self.policy is None else keras.saving.serialize_keras_object(self.policy),
                "logit_mixing": self.logit_mixing,
                "share_hop_weights": self.share_hop_weights,
                "logit_scale": self.logit_scale,
                "coverage_penalty": self.coverage_penalty,
                "kernel_initializer": "bags" if self.bags else keras.initializers.serialize(self.kernel_initializer),
                "seed": self.seed,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**from_1_1(config))

    def load_own_variables(self, store):
        # A MEMO saved by 1.1 without linear start has no `linear_phase` (the last of its own variables): it
        # loads with the phase at 0, the softmax alone.
        own = self._trainable_variables + self._non_trainable_variables
        if len(store.keys()) == len(own) - 1 and own[-1] is self.linear_phase:
            phase = ops.convert_to_numpy(self.linear_phase)
            store = {**{key: store[key] for key in store.keys()}, str(len(own) - 1): phase}
        super().load_own_variables(store)


# The arguments of 1.1's MEMO and MEMOClassifier that are gone, and what to write now.
_ARGUMENTS_1_1 = {
    **{old: f"halting={policy or 'HaltingPolicy'}({new}=...)"
       for old, (new, policy) in halting_policies.ARGUMENTS_1_1.items()},
    "bag_init": "kernel_initializer='bags'",
    "linear_start": "nothing: every MEMO can start linear; keras_relmem.callbacks.LinearStart sets its linear_phase",
}


def refuse_1_1_arguments(kwargs, owner="MEMO"):
    """A `TypeError` naming what to write now, for an argument of 1.1 among `kwargs`."""
    for name in _ARGUMENTS_1_1:
        if name in kwargs:
            raise TypeError(f"{owner}({name}=...) is gone in keras-relmem 2.0; write {_ARGUMENTS_1_1[name]}.")


def from_1_1(config):
    """A MEMO or MEMOClassifier config as 1.1 wrote it (the halting policy's arguments beside MEMO's, `bag_init`,
    `linear_start`) in 2.0's form; a 2.0 config is returned as it is."""
    config = halting_policies.policy_from_1_1(config)
    if config.pop("bag_init", False):
        config["kernel_initializer"] = "bags"
    config.pop("linear_start", None)
    return config
