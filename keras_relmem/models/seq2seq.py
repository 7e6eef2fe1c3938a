"""Read a program, then write its output: the RMC paper's sequence-to-sequence model for Learning to Execute.

The set-up of Sonnet's `rmc_learn_to_execute.py` (Santoro et al. 2018,
§4.4): a recurrent core reads the program's characters, then runs on for the
answer's steps with zero inputs (non-autoregressive: it never sees its own
output); an MLP and a softmax give one character per answer step. Any Keras
RNN layer with `return_sequences=True` is the core: `RelationalMemory`,
`keras.layers.RNN(EntNetCell)`, `keras.layers.LSTM`, ...

The answer steps are trained with the answer's characters and one end mark;
steps after it are padding (id 0) and count in neither the loss nor the
metrics. `CharacterAccuracy` is the paper's per-character accuracy (the
answer's characters, not the end mark) and `SolvedRate` the share of answers
whose every character is right (Sonnet's "solved").
"""

import keras
from keras import ops

from keras_relmem.data.lte import EOS, PAD


@keras.saving.register_keras_serializable(package="keras_relmem")
class DecodeSteps(keras.layers.Layer):
    """Appends `steps` zero vectors to a sequence, unmasked: the steps on which the core writes its answer.

    Args:
        steps: int, steps to append.

    Example:

    ```python
    >>> import numpy as np
    >>> tuple(DecodeSteps(3)(np.ones((2, 5, 4), "float32")).shape)
    (2, 8, 4)

    ```
    """

    def __init__(self, steps, **kwargs):
        super().__init__(**kwargs)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive integer; received {steps!r}.")
        self.steps = steps
        self.supports_masking = True

    def call(self, inputs):
        # Built from the input's own slice so the batch size may be unknown (symbolic) until called.
        zeros = ops.repeat(ops.zeros_like(inputs[:, :1]), self.steps, axis=1)
        return ops.concatenate([inputs, zeros], axis=1)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        mask = ops.cast(mask, "bool")
        return ops.concatenate([mask, ops.repeat(ops.ones_like(mask[:, :1]), self.steps, axis=1)], axis=1)

    def compute_output_shape(self, input_shape):
        time = None if input_shape[1] is None else input_shape[1] + self.steps
        return (input_shape[0], time, input_shape[2])

    def get_config(self):
        return {**super().get_config(), "steps": self.steps}


@keras.saving.register_keras_serializable(package="keras_relmem")
class LastSteps(keras.layers.Layer):
    """The last `steps` steps of a sequence (the answer steps), with no mask (they are never padding).

    Args:
        steps: int.
    """

    def __init__(self, steps, **kwargs):
        super().__init__(**kwargs)
        self.steps = int(steps)
        self.supports_masking = True

    def call(self, inputs):
        return inputs[:, -self.steps:]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.steps, *input_shape[2:])

    def get_config(self):
        return {**super().get_config(), "steps": self.steps}


def _answer_positions(y_true):
    """The answer's characters (not the end mark, not the padding) of a batch of target ids."""
    y_true = ops.cast(y_true, "int32")
    return ops.logical_and(ops.not_equal(y_true, PAD), ops.not_equal(y_true, EOS))


class _Share(keras.metrics.Metric):
    """A ratio of two counts summed over batches; subclasses say what they count."""

    def __init__(self, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.counted = self.add_variable((), initializer="zeros", name="counted")
        self.total = self.add_variable((), initializer="zeros", name="total")

    def counts(self, y_true, y_pred):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        counted, total = self.counts(y_true, y_pred)
        self.counted.assign_add(ops.cast(counted, "float32"))
        self.total.assign_add(ops.cast(total, "float32"))

    def result(self):
        return ops.divide_no_nan(self.counted, self.total)


@keras.saving.register_keras_serializable(package="keras_relmem")
class CharacterAccuracy(_Share):
    """Share of the answers' characters predicted right (the end mark and padding excluded).

    Example:

    ```python
    >>> import numpy as np
    >>> metric = CharacterAccuracy()
    >>> y_true = np.array([[5, 6, 1, 0]])            # two characters, end mark, padding
    >>> logits = np.eye(8, dtype="float32")[[[5, 7, 1, 0]]]  # second character wrong
    >>> metric.update_state(y_true, logits)
    >>> float(metric.result())
    0.5

    ```
    """

    def __init__(self, name="character_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def counts(self, y_true, y_pred):
        answer = ops.cast(_answer_positions(y_true), "float32")
        right = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), ops.cast(y_true, "int32")), "float32")
        return ops.sum(right * answer), ops.sum(answer)


@keras.saving.register_keras_serializable(package="keras_relmem")
class SolvedRate(_Share):
    """Share of answers whose every character is right (Sonnet's "solved"; the end mark is not counted).

    Example:

    ```python
    >>> import numpy as np
    >>> metric = SolvedRate()
    >>> y_true = np.array([[5, 6, 1], [5, 1, 0]])
    >>> logits = np.eye(8, dtype="float32")[[[5, 6, 0], [4, 1, 0]]]
    >>> metric.update_state(y_true, logits)
    >>> float(metric.result())
    0.5

    ```
    """

    def __init__(self, name="solved", **kwargs):
        super().__init__(name=name, **kwargs)

    def counts(self, y_true, y_pred):
        answer = _answer_positions(y_true)
        wrong = ops.logical_and(answer, ops.not_equal(ops.argmax(y_pred, axis=-1), ops.cast(y_true, "int32")))
        solved = ops.logical_not(ops.any(wrong, axis=-1))
        return ops.sum(ops.cast(solved, "float32")), ops.shape(solved)[0]


def answer_loss():
    """Cross-entropy over the answers' characters and end marks; padding (id 0) is ignored."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD)


def answer_metrics():
    """The paper's per-character accuracy and the solved rate, for `compile(metrics=...)`."""
    return [CharacterAccuracy(), SolvedRate()]


@keras.saving.register_keras_serializable(package="keras_relmem")
class ReadThenWrite(keras.Model):
    """A sequence-to-sequence model: `core` reads the program, then writes the answer on zero inputs.

    Embedding (id 0 = padding, masked, so a program's padding leaves the
    core's state as its last character left it), `DecodeSteps`, the core
    over program + answer steps, `LastSteps`, a ReLU MLP applied at every
    answer step and a linear layer to character logits. A functional model
    whose config holds its arguments and the core's own config, so a `.keras`
    file loads back as the same model.

    Args:
        core: a Keras RNN layer with `return_sequences=True` whose step input
            has `embedding_dim` features, e.g.
            `RelationalMemory(4, 64, return_sequences=True)`,
            `keras.layers.LSTM(256, return_sequences=True)` or
            `keras.layers.RNN(EntNetCell(20, 64), return_sequences=True)`.
        vocab_size: int, characters (with padding, end mark and unknown).
        answer_length: int, decoding steps (the longest answer plus its end mark).
        embedding_dim: int, character embedding size (default 64).
        mlp_units: sizes of the ReLU layers after the core (default
            `(256, 256)`; Sonnet's example: four of 256).
        name: model name.

    Input `program (batch, time)` int32 character ids (0 after the end);
    output `(batch, answer_length, vocab_size)` logits. Compile with
    `loss=answer_loss()` (padding ignored) and `metrics=answer_metrics()`.

    Example:

    ```python
    >>> import keras, numpy as np
    >>> model = ReadThenWrite(keras.layers.LSTM(16, return_sequences=True),
    ...                       vocab_size=49, answer_length=6, embedding_dim=8)
    >>> tuple(model(np.ones((2, 10), "int32")).shape)
    (2, 6, 49)

    ```

    Reference: Santoro et al., "Relational recurrent neural networks",
    NeurIPS 2018, §4.4 (Sonnet's `rmc_learn_to_execute.py`); Zaremba &
    Sutskever, "Learning to Execute", arXiv:1410.4615.
    """

    def __init__(self, core, vocab_size, answer_length, embedding_dim=64, mlp_units=(256, 256),
                 name="read_then_write", **kwargs):
        if isinstance(core, dict):
            core = keras.saving.deserialize_keras_object(core)
        if not getattr(core, "return_sequences", False):
            raise ValueError(f"core must be an RNN layer with return_sequences=True (the answer is read from "
                             f"its last answer_length steps); received {core!r}.")
        mlp_units = [int(u) for u in mlp_units]
        program = keras.Input((None,), dtype="int32", name="program")
        h = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True, name="embedding")(program)
        h = DecodeSteps(answer_length, name="decode_steps")(h)
        h = core(h)
        h = LastSteps(answer_length, name="answer_steps")(h)
        for i, units in enumerate(mlp_units):
            h = keras.layers.Dense(units, activation="relu", name=f"mlp_{i}")(h)
        logits = keras.layers.Dense(vocab_size, name="logits")(h)
        super().__init__(inputs=program, outputs=logits, name=name, **kwargs)
        self.core = core
        self.config_args = {
            "core": keras.saving.serialize_keras_object(core), "vocab_size": int(vocab_size),
            "answer_length": int(answer_length), "embedding_dim": int(embedding_dim), "mlp_units": mlp_units,
        }

    def get_config(self):
        return {**self.config_args, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _rmc_core(embedding_dim, mem_slots, head_size, num_heads, num_blocks, units, entnet_blocks, return_sequences,
              **rmc_kwargs):
    from keras_relmem.layers import RelationalMemory

    return RelationalMemory(mem_slots, head_size, num_heads=num_heads, num_blocks=num_blocks,
                            return_sequences=return_sequences, name="core", **rmc_kwargs)


def _lstm_core(embedding_dim, mem_slots, head_size, num_heads, num_blocks, units, entnet_blocks, return_sequences):
    return keras.layers.LSTM(units, return_sequences=return_sequences, name="core")


def _entnet_core(embedding_dim, mem_slots, head_size, num_heads, num_blocks, units, entnet_blocks,
                 return_sequences):
    from keras_relmem.layers import EntNetCell

    return keras.layers.RNN(EntNetCell(entnet_blocks, embedding_dim), return_sequences=return_sequences, name="core")


def _flat_core(embedding_dim, mem_slots, head_size, num_heads, num_blocks, units, entnet_blocks, return_sequences):
    if return_sequences:
        raise ValueError("core 'mlp' reads the whole sequence at once: it has no output per step")
    return keras.layers.Flatten(name="core")


# The sequence cores by name (ReadThenWrite's, and Nth Farthest's, whose "mlp" reads the flattened sequence).
CORE_BUILDERS = {"rmc": _rmc_core, "lstm": _lstm_core, "entnet": _entnet_core, "mlp": _flat_core}
CORES = ("rmc", "lstm", "entnet")  # those that read a sequence step by step (ReadThenWrite's)


def build_core(kind, embedding_dim=64, mem_slots=4, head_size=64, num_heads=4, num_blocks=1, units=256,
               entnet_blocks=20, return_sequences=True, **rmc_kwargs):
    """A recurrent core by name (`CORE_BUILDERS`), named "core".

    Args:
        kind: `"rmc"` (`RelationalMemory`), `"lstm"` (`keras.layers.LSTM`
            with `units`), `"entnet"` (`RNN(EntNetCell)` with
            `entnet_blocks` blocks of `embedding_dim` units, since the cell
            reads inputs of its block size) or `"mlp"` (no recurrence: the
            sequence flattened, a reference; `return_sequences=False` only).
        embedding_dim: the model's embedding size.
        mem_slots, head_size, num_heads, num_blocks: the RMC's.
        units: the LSTM's.
        entnet_blocks: the EntNet cell's memory blocks.
        return_sequences: an output per step (True, `ReadThenWrite`'s) or the last step's.
        **rmc_kwargs: other `RelationalMemory` arguments (`gate_style`, ...).
    """
    if kind not in CORE_BUILDERS:
        raise ValueError(f"core must be one of {', '.join(CORE_BUILDERS)}; received {kind!r}.")
    return CORE_BUILDERS[kind](embedding_dim, mem_slots, head_size, num_heads, num_blocks, units, entnet_blocks,
                               return_sequences, **rmc_kwargs)


__all__ = ["CORES", "CharacterAccuracy", "DecodeSteps", "LastSteps", "ReadThenWrite", "SolvedRate",
           "answer_loss", "answer_metrics", "build_core"]
