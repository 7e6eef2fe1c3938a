"""A MEMO question-answering model and its REINFORCE training step.

`MEMOClassifier` embeds facts and a query (word ids with a shared `Embedding`,
or vectors with a shared linear map `W_c`), runs `keras_relmem.MEMO` and is
trained by the standard `fit` of every Keras backend: MEMO by Adam on the
answers' cross-entropy, the halting network by RMSProp on its REINFORCE loss
(`compile` wraps both in a `SplitOptimizer`), or, with an `ACTHalting` policy,
one optimizer on cross-entropy + ponder cost. Gradients never cross between
the two under REINFORCE.
"""

import contextlib

import keras
from keras import ops

from keras_relmem.layers import memo as memo_layer
from keras_relmem.layers.halting import ACTHalting, HaltingPolicy
from keras_relmem.layers.memo import MEMO
from keras_relmem.optimizers import SplitOptimizer

ANSWER_LOSSES = ("visited", "all", "last", "halted", "halted+last")


def story_time(mask):
    """MEMO's time index from a left-aligned fact mask `(batch, I)`.

    With the oldest fact first, fact `j` of `n` valid facts gets `n - j`
    (1 = the most recent) and padding gets 0, as `BabiData.arrays()["time"]`.
    """
    valid = ops.cast(mask, "int32")
    count = ops.sum(valid, axis=-1, keepdims=True)
    position = ops.cumsum(ops.ones_like(valid), axis=-1) - 1  # 0, 1, ...: also for an unknown number of facts
    return (count - position) * valid


@keras.saving.register_keras_serializable(package="keras_relmem")
class MEMOClassifier(keras.Model):
    """MEMO over embedded facts answering with one of `num_answers` labels.

    Args:
        num_answers: int.
        embedding_dim: int, `d_c` (default 64).
        vocab_size: int for word-id inputs (bAbI), or None for vector inputs
            (paired associative inference), embedded by a linear map.
        max_time: int, with word ids: adds a learned time embedding of each
            fact's `time` index (1 = most recent, 0 = padding) as an extra item
            of every fact (MEMO's bAbI time encoding); 0 for none.
        sum_fact_items: bool, sum the embedded items of each fact into one
            item (default False). True gives the end-to-end memory network
            style input that MEMO's paper ablates (a fact is one vector, its
            items no longer separate): our benches' single-hop baseline.
        key_size, num_heads, max_hops, answer_units, attention_dropout, answer_dropout, halting, logit_mixing,
            share_hop_weights, logit_scale, coverage_penalty, kernel_initializer: `keras_relmem.MEMO`'s
            arguments, with its defaults. `halting` is the policy layer (`HaltingPolicy`, with the REINFORCE
            discount `gamma`, value weight `alpha` and cost per hop `beta`; `ACTHalting`, with `ponder_cost`;
            or None).
        halting_learning_rate: RMSProp learning rate of a `HaltingPolicy` (default 1e-4).
        answer_loss: under REINFORCE, which hops' answers the cross-entropy
            trains: `"all"` (default: every hop 1..N whatever the policy
            samples) or `"visited"` (hops 1..T of the sampled episode, so
            the answer is trained where the policy looks; the default
            before 1.0). With `"visited"`
            a policy that learns to halt at hop 1 stops the later hops from
            learning, and they never get good enough to pay for continuing:
            on joint bAbI the policy collapsed to one hop that way.
            `"all"` keeps every hop's answer trained, so the reward can tell
            where more hops help. `"last"` trains hop N's answer alone, so
            no earlier hop is pushed to answer before it has read what the
            answer needs (the reward still comes from the halting hop).
            `"halted"` trains the sampled halting hop T's answer alone (the
            answer the episode gives), and `"halted+last"` the mean of hop
            T's and hop N's (hop N's once when T = N): an early hop learns to
            answer only on the queries where the policy stops there. On
            bAbI tasks 1 and 16 neither let the policy learn to stop early
            (docs/results.md); `"last"` while the halting network waits,
            then `"all"`, did. All five cost the same: all N hops are
            unrolled.
        attention_supervision: float (default 0: none). With a `support`
            input (`(b, I)` ints: 0 for an ordinary fact, `r` for the `r`-th
            supporting fact, as `BabiData.arrays()["support"]`), adds this
            weight times the mean over hops `t = 1..supervised_hops` of
            `-log(attention on the t-th supporting fact)` (mean over heads),
            over the questions that have a `t`-th supporting fact: the strong
            supervision of Weston et al. (2015, memory networks), which tells
            hop `t` which fact to read. A diagnostic: whether a task fails at
            finding its facts or at using them. Without `support` it does
            nothing.
        supervised_hops: int, how many of the first hops `attention_supervision`
            supervises (default 1: only the first read is shown).
        seed: optional int seed of MEMO's dropout and the sampled halting hops.
        **kwargs: standard model arguments (`name`, `dtype`).

    Inputs: a dict with `facts` (or `story`; `(b, I, S)` ids or `(b, I, S, E)`
    vectors; id 0, or a fact whose vectors are all zero, is padding),
    `query` (`(b, Sq)` ids or `(b, Sq, E)` vectors) and, optionally
    with `max_time`, `time (b, I)` (derived from the padding of a
    left-aligned story when absent). Calling the model gives answer logits; `return_hops=True`
    gives `{"logits", "hops"}`.

    Example:

    ```python
    >>> import keras, numpy as np
    >>> rng = np.random.default_rng(0)
    >>> facts = rng.integers(1, 20, size=(8, 6, 4))  # word ids, 0 = padding
    >>> query = rng.integers(1, 20, size=(8, 3))
    >>> target = rng.integers(0, 2, size=(8,))
    >>> model = MEMOClassifier(num_answers=2, vocab_size=20, embedding_dim=16,
    ...                        key_size=8, max_hops=5)
    >>> model.compile(keras.optimizers.Adam(1e-3))
    >>> history = model.fit({"facts": facts, "query": query}, target, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'halting_loss', 'hops', 'loss']

    ```

    Reference: Banino et al., arXiv:2001.10913 (§2.3, appendix D).
    """

    def __init__(
        self,
        num_answers,
        embedding_dim=64,
        vocab_size=None,
        max_time=0,
        sum_fact_items=False,
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
        halting_learning_rate=1e-4,
        answer_loss="all",
        attention_supervision=0.0,
        supervised_hops=1,
        seed=None,
        **kwargs,
    ):
        memo_layer.refuse_1_1_arguments(kwargs, owner="MEMOClassifier")
        kwargs.setdefault("name", "memo_classifier")
        super().__init__(**kwargs)
        self._step_outputs = "logits"  # see returning()
        self.num_answers = num_answers
        self.embedding_dim = embedding_dim
        self.vocab_size = vocab_size
        self.max_time = max_time
        self.sum_fact_items = bool(sum_fact_items)
        self.halting_learning_rate = float(halting_learning_rate)
        if answer_loss not in ANSWER_LOSSES:
            raise ValueError(f"answer_loss must be one of {ANSWER_LOSSES}, got {answer_loss!r}")
        self.answer_loss = answer_loss
        self.seed = seed
        if vocab_size:
            self.embed = keras.layers.Embedding(vocab_size, embedding_dim, name="W_c")
        else:
            self.embed = keras.layers.Dense(embedding_dim, use_bias=False, name="W_c")
        self.time_embed = (
            keras.layers.Embedding(max_time + 1, embedding_dim, name="time") if vocab_size and max_time else None
        )
        self.memo = MEMO(num_answers, key_size=key_size, num_heads=num_heads, max_hops=max_hops,
                         answer_units=answer_units, attention_dropout=attention_dropout,
                         answer_dropout=answer_dropout, halting=halting, logit_mixing=logit_mixing,
                         share_hop_weights=share_hop_weights, logit_scale=logit_scale,
                         coverage_penalty=coverage_penalty, kernel_initializer=kernel_initializer, seed=seed,
                         name="memo")
        self.set_attention_supervision(attention_supervision, supervised_hops)
        self.sample_seed = keras.random.SeedGenerator(seed)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.accuracy_tracker = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        self.hops_tracker = keras.metrics.Mean(name="hops")
        self.policy_tracker = keras.metrics.Mean(name="halting_loss")

    @property
    def input_dtype(self):
        """Word ids are int32 (what `model.export` types the inputs as); vectors take the compute dtype."""
        return "int32" if self.vocab_size else super().input_dtype

    def _reinforce(self):
        """The MEMO's halting policy when it is trained by REINFORCE, else None."""
        return self.memo.policy if isinstance(self.memo.policy, HaltingPolicy) else None

    def set_attention_supervision(self, weight, hops):
        """Set the supporting-fact attention loss: its `weight` (0 turns it off) and how many of the first
        `hops` it applies to. Read when the training step is traced, so a resumed model can withdraw the
        supervision it was trained with (call before `fit`).

        Args:
            weight: float >= 0, as the constructor's `attention_supervision`.
            hops: int in [1, max_hops], as the constructor's `supervised_hops`.
        """
        if weight < 0:
            raise ValueError(f"attention_supervision must be >= 0; got {weight!r}")
        if isinstance(hops, bool) or not isinstance(hops, int) or not 1 <= hops <= self.memo.max_hops:
            raise ValueError(f"supervised_hops must be an int in [1, max_hops={self.memo.max_hops}]; got {hops!r}")
        self.attention_supervision = float(weight)
        self.supervised_hops = hops

    # -- building ------------------------------------------------------------
    def build(self, input_shape):
        """Build from `{"facts": shape, "query": shape[, "time": shape]}`."""
        shapes = {k: tuple(v) for k, v in dict(input_shape).items()}
        facts, query = shapes.get("facts", shapes.get("story")), shapes["query"]
        items = (1 if self.sum_fact_items else facts[2]) + (1 if self.time_embed is not None else 0)
        if self.vocab_size:
            self.embed.build(None)
            if self.time_embed is not None:
                self.time_embed.build(None)
        else:
            self.embed.build((None, facts[-1]))
        self.memo.build([(None, facts[1], items, self.embedding_dim), (None, query[1], self.embedding_dim)])
        self._input_shapes = shapes
        self.built = True

    def get_build_config(self):
        return {"input_shape": getattr(self, "_input_shapes", None)}

    def build_from_config(self, config):
        if config.get("input_shape"):
            self.build(config["input_shape"])

    # -- the forward pass ----------------------------------------------------
    def embed_inputs(self, inputs):
        facts = inputs["facts"] if "facts" in inputs else inputs["story"]
        query = inputs["query"]
        mask = None
        if self.vocab_size:
            mask = ops.any(ops.not_equal(facts, 0), axis=-1)
            items = self.embed(facts) * ops.expand_dims(ops.cast(ops.not_equal(facts, 0), self.compute_dtype), -1)
            if self.sum_fact_items:
                items = ops.sum(items, axis=2, keepdims=True)
            if self.time_embed is not None:
                time = inputs["time"] if "time" in inputs else story_time(mask)
                time = ops.minimum(time, self.max_time)
                items = ops.concatenate([items, ops.expand_dims(self.time_embed(time), 2)], axis=2)
            question = self.embed(query) * ops.expand_dims(
                ops.cast(ops.not_equal(query, 0), self.compute_dtype), -1
            )
        else:
            # A fact whose item vectors are all zero is padding (e.g. graphs
            # with fewer edges than the batch's widest).
            mask = ops.any(ops.any(ops.not_equal(facts, 0), axis=-1), axis=-1)
            items = self.embed(facts)
            if self.sum_fact_items:
                items = ops.sum(items, axis=2, keepdims=True)
            question = self.embed(query)
        return [items, question], mask

    OUTPUTS = ("logits", "hops", "training")

    def call(self, inputs, training=False, return_hops=False, outputs=None):
        """The answer logits `(b, A)` by adaptive inference.

        Args:
            inputs: `{"facts", "query"}` (and `"time"` for bAbI).
            training: bool.
            return_hops: bool, return `{"logits", "hops"}` (`outputs="hops"`).
            outputs: "logits", "hops" (`{"logits", "hops"}`) or "training"
                (`training_outputs(inputs)`: every hop unrolled, what
                `compute_loss` needs). Default: "logits", or what
                `returning()` set for the Keras train or test step running.
        """
        outputs = outputs or ("hops" if return_hops else self._step_outputs)
        if outputs not in self.OUTPUTS:
            raise ValueError(f"outputs must be one of {self.OUTPUTS}; got {outputs!r}")
        if outputs == "training":
            return self.training_outputs(inputs, training=training)
        embedded, mask = self.embed_inputs(inputs)
        logits, hops = self.memo(embedded, mask=mask, training=training)
        if outputs == "hops":
            return {"logits": logits, "hops": hops}
        return logits

    # -- training ------------------------------------------------------------
    def policy_variables(self):
        """The halting network's variables (trained by REINFORCE), or []."""
        policy = self._reinforce()
        return [] if policy is None else policy.trainable_variables

    def _is_policy_variable(self, variable):
        return any(variable is v for v in self.policy_variables())

    def compile(self, optimizer="adam", **kwargs):
        """Compile with `optimizer` for MEMO and RMSProp for the halting network.

        Under REINFORCE the optimizer is wrapped in a
        `keras_relmem.optimizers.SplitOptimizer` that sends the halting
        network's variables to `RMSprop(halting_learning_rate)` (the paper's
        set-up), so the standard `fit` of every backend trains both.
        `model.optimizer.learning_rate` is MEMO's;
        `model.halting_optimizer` is the RMSProp.
        """
        optimizer = keras.optimizers.get(optimizer)
        if self._reinforce() is not None:
            if not isinstance(optimizer, SplitOptimizer):
                optimizer = SplitOptimizer(
                    optimizer, keras.optimizers.RMSprop(self.halting_learning_rate)
                )
            optimizer.route = self._is_policy_variable
        super().compile(optimizer=optimizer, **kwargs)

    def compile_from_config(self, config):
        # Keras skips compiling on load when `compile` is overridden; ours
        # only adds the routing, so replay it as Keras' default would.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    @property
    def halting_optimizer(self):
        """The halting network's optimizer (None unless compiled under REINFORCE)."""
        optimizer = getattr(self, "optimizer", None)
        return optimizer.second if isinstance(optimizer, SplitOptimizer) else None

    def training_outputs(self, inputs, training=True):
        """All hops unrolled, with the sampled halting hop under REINFORCE.

        A dict of `answer_logits (b, N, A)` and, with a halting network,
        `halt_logits` and `values (b, N)`, and `halt_hop (b,)` (REINFORCE).
        What `compute_loss` needs; `fit` gets it as the model's output.
        """
        embedded, mask = self.embed_inputs(inputs)
        unrolled = self.memo.unrolled(embedded, mask=mask, training=training)
        out = {k: v for k, v in unrolled.items() if k in ("answer_logits", "halt_logits", "values")}
        if self.attention_supervision and "support" in inputs:
            out.update(attention=unrolled["attention"], support=inputs["support"])
        policy = self._reinforce()
        if policy is not None:
            out["halt_hop"] = policy.sample(ops.stop_gradient(out["halt_logits"]), seed=self.sample_seed)
        return out

    def losses_from_outputs(self, out, target):
        """The losses of one batch from `training_outputs` (backend-agnostic).

        Returns a dict with `task` (MEMO's loss), `policy` (the halting
        network's REINFORCE loss, under REINFORCE), `hops (b,)` and the
        `logits (b, A)` the episode answered with.
        """
        logits = out["answer_logits"]  # (b, N, A)
        n_hops = logits.shape[1]
        target = ops.cast(ops.reshape(target, (-1,)), "int32")
        per_hop_ce = keras.losses.sparse_categorical_crossentropy(
            ops.repeat(ops.expand_dims(target, 1), n_hops, axis=1), logits, from_logits=True
        )
        steps = ops.arange(1, n_hops + 1)[None, :]
        result, policy = {}, self.memo.policy
        if isinstance(policy, HaltingPolicy):
            halt_hop = out["halt_hop"]
            trained = self._trained_hops(steps, ops.expand_dims(halt_hop, -1), n_hops)
            task = ops.mean(ops.sum(per_hop_ce * trained, axis=1) / ops.sum(trained, axis=1))
            final = ops.take_along_axis(logits, ops.reshape(halt_hop - 1, (-1, 1, 1)), axis=1)[:, 0]
            reward = ops.cast(ops.equal(ops.argmax(final, axis=-1), target), "float32")
            policy_loss = policy.loss(out["halt_logits"], out["values"], halt_hop, reward)
            result.update(task=task, policy=policy_loss["loss"], hops=ops.cast(halt_hop, "float32"), logits=final)
        elif isinstance(policy, ACTHalting):
            weights, ponder, stop_hop = policy.mixture_weights(out["halt_logits"])
            mixture = ops.sum(ops.expand_dims(weights, -1) * ops.softmax(logits, axis=-1), axis=1)
            final = ops.log(ops.maximum(mixture, 1e-12))
            ce = keras.losses.sparse_categorical_crossentropy(target, final, from_logits=True)
            task = ops.mean(ce + policy.ponder_cost * ponder)
            result.update(task=task, hops=ops.cast(stop_hop, "float32"), logits=final)
        else:
            task = ops.mean(per_hop_ce[:, -1])
            result.update(task=task, hops=ops.full((ops.shape(target)[0],), float(n_hops)), logits=logits[:, -1])
        if "support" in out:
            result["task"] = result["task"] + self.attention_supervision * self.supervision_loss(
                out["attention"], out["support"])
        return result

    def _trained_hops(self, steps, halt_hop, n_hops):
        """`(b, N)` 1.0 on the hops whose answers `answer_loss` trains, 0.0 elsewhere.

        `steps (1, N)` are 1..N and `halt_hop (b, 1)` the sampled halting hops.
        """
        at_halt = ops.equal(steps, halt_hop)
        at_last = ops.equal(steps, n_hops)
        hops = {
            "all": ops.ones_like(at_halt),
            "last": ops.logical_and(ops.ones_like(at_halt), at_last),
            "visited": steps <= halt_hop,
            "halted": at_halt,
            "halted+last": ops.logical_or(at_halt, at_last),
        }[self.answer_loss]
        return ops.cast(hops, "float32")

    def supervision_loss(self, attention, support):
        """Mean over the supervised hops of `-log` the attention (mean over heads) on hop t's fact.

        `attention (b, N, H, I)`; `support (b, I)`: `r` on the `r`-th supporting fact, else 0.
        """
        support = ops.cast(support, "int32")
        read = ops.mean(ops.cast(attention, "float32"), axis=2)  # (b, N, I)
        losses = []
        for t in range(self.supervised_hops):
            target = ops.cast(ops.equal(support, t + 1), "float32")  # (b, I)
            has = ops.cast(ops.sum(target, axis=-1) > 0, "float32")
            nll = -ops.log(ops.sum(read[:, t] * target, axis=-1) + 1e-6)
            losses.append(ops.sum(nll * has) / ops.maximum(ops.sum(has), 1.0))
        return ops.mean(ops.stack(losses))

    @contextlib.contextmanager
    def returning(self, outputs):
        """Within the block, `model(x)` returns `outputs` ("logits", "hops" or "training") by default.

        Keras' own train and test steps (one per backend) call `model(x)`
        with no other argument, then `compute_loss` and `compute_metrics`;
        `train_step` and `test_step` run inside `returning("training")` and
        `returning("hops")` so that the model hands those what they need. It
        is read when the step is traced, so it holds inside jitted (JAX, XLA)
        and `tf.function` steps.
        """
        if outputs not in self.OUTPUTS:
            raise ValueError(f"outputs must be one of {self.OUTPUTS}; got {outputs!r}")
        previous, self._step_outputs = self._step_outputs, outputs
        try:
            yield self
        finally:
            self._step_outputs = previous

    def train_step(self, *args, **kwargs):
        with self.returning("training"):
            return super().train_step(*args, **kwargs)

    def test_step(self, *args, **kwargs):
        with self.returning("hops"):
            return super().test_step(*args, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """MEMO's task loss plus, under REINFORCE, the halting network's loss.

        No gradient crosses between the two (the halting network reads
        stop-gradient distances; the task loss only sees the sampled hop), so
        one gradient of the sum gives each part its own loss's gradient.
        """
        extra = ops.sum(self.losses) if self.losses else 0.0
        if "answer_logits" in y_pred:
            losses = self.losses_from_outputs(y_pred, y)
            self.loss_tracker.update_state(losses["task"])
            total = losses["task"] + extra
            if "policy" in losses:
                self.policy_tracker.update_state(losses["policy"])
                total = total + losses["policy"]
            return total
        loss = ops.mean(keras.losses.sparse_categorical_crossentropy(y, y_pred["logits"], from_logits=True))
        self.loss_tracker.update_state(loss)
        return loss + extra

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if "answer_logits" in y_pred:
            losses = self.losses_from_outputs(y_pred, y)
            logits, hops, metrics = losses["logits"], losses["hops"], self.metrics
        else:
            logits, hops = y_pred["logits"], ops.cast(y_pred["hops"], "float32")
            metrics = [m for m in self.metrics if m is not self.policy_tracker]
        self.accuracy_tracker.update_state(y, logits)
        self.hops_tracker.update_state(hops)
        return {m.name: m.result() for m in metrics}

    @property
    def metrics(self):
        trackers = [self.loss_tracker, self.accuracy_tracker, self.hops_tracker]
        return trackers + ([self.policy_tracker] if self._reinforce() is not None else [])

    def get_config(self):
        memo = self.memo.get_config()
        return {
            "num_answers": self.num_answers,
            "embedding_dim": self.embedding_dim,
            "vocab_size": self.vocab_size,
            "max_time": self.max_time,
            "sum_fact_items": self.sum_fact_items,
            **{name: memo[name] for name in _MEMO_ARGUMENTS},
            "halting_learning_rate": self.halting_learning_rate,
            "answer_loss": self.answer_loss,
            "attention_supervision": self.attention_supervision,
            "supervised_hops": self.supervised_hops,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**memo_layer.from_1_1(config))


# The MEMO arguments a MEMOClassifier takes under their own names.
_MEMO_ARGUMENTS = ("key_size", "num_heads", "max_hops", "answer_units", "attention_dropout", "answer_dropout",
                   "halting", "logit_mixing", "share_hop_weights", "logit_scale", "coverage_penalty",
                   "kernel_initializer")
