"""The Recurrent Entity Network (Henaff et al. 2017): cell, encoder and readout."""

import keras
import numpy as np
from keras import ops
from keras.layers import PReLU

from keras_relmem.layers import utils

# The paper initialises its weights from N(0, 0.1).
PAPER_STDDEV = 0.1


def _paper_initializer():
    return keras.initializers.RandomNormal(stddev=PAPER_STDDEV)


def _serialize(obj):
    return keras.saving.serialize_keras_object(obj)


@keras.saving.register_keras_serializable(package="keras_relmem")
class EntNetCell(keras.layers.Layer):
    """Dynamic memory of the Recurrent Entity Network: gated blocks with keys.

    The memory holds `num_blocks` blocks `h_j` of size `units`, each with a key
    `w_j`. For each encoded sentence `s` (the step input, size `units`), block
    `j` is updated by

        g_j  = sigmoid(s.h_j + s.w_j + b_j)            (gate)
        h~_j = PReLU(U h_j + c + V w_j + W s)           (candidate)
        h_j <- h_j + g_j * h~_j
        h_j <- h_j / ||h_j||                            (forgetting)

    with `U, V, W` shared by all blocks. The authors' code (facebookarchive
    MemNN, `EntNet-babi/entnet.lua`) adds two biases the paper does not
    write: the per-block gate bias `b_j`, and `c`, the bias of its
    `nn.Linear` on the memories (`candidate_bias`). The norm is guarded by
    `epsilon` so a zero block stays zero instead of becoming NaN. The memory
    starts at the keys; under `keras.layers.RNN` masked (padded) steps leave
    it untouched. It travels flattened to `num_blocks * units` values, which
    is also the output.

    Keys tied to entities (the authors' `-tied 1`): pass `keys` a callable
    that returns the key rows, e.g. `lambda: embedding(entity_ids)`; the keys
    and the initial memory are then those rows, computed at every call, so
    they train with the embedding. Such a cell, and one given a shared
    `activation`, belongs to the model that built it (it cannot be
    serialized alone): `keras_relmem.models.EntNetQA` rebuilds both ties
    when a `.keras` file is loaded.

    Args:
        num_blocks: int, number of memory blocks (default 20).
        units: int, size of every block, key and sentence encoding (default 100).
        keys: optional initial keys: an array `(num_blocks, units)` (the
            starting value of the cell's own key weights), or a callable
            returning the key rows as a tensor (tied keys: the cell has no
            key weights of its own).
        trainable_keys: bool, learn the cell's own keys (default True). False
            with an array keeps them fixed at that array: a frozen copy, not
            a tie.
        keys_initializer: initializer of the keys when `keys` is not given
            (default N(0, 0.1), as in the paper).
        kernel_initializer: initializer of `U`, `V`, `W` (default N(0, 0.1)).
        gate_bias_initializer: initializer of `b_j` (default `"zeros"`).
        alpha_initializer: initializer of the PReLU slopes, one per unit
            (default `"ones"`: linear at first, as in the authors' code).
        candidate_bias: bool, the bias `c` on the `U h_j` term (default True,
            as in the authors' code; cells saved before this argument existed
            load with False).
        activation: optional `keras.layers.PReLU` to use instead of the
            cell's own, e.g. one shared with `EntNetReadout` as the authors'
            code shares one slope vector (`EntNetReadout.shared_prelu(units)`
            makes it).
        kernel_regularizer: optional regularizer of `U`, `V`, `W`.
        epsilon: float, floor of the block norm in the normalisation
            (default 1e-6).
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: one encoded sentence `s`, `(batch, units)` (`EntNetEncoder`'s
            output; under `keras.layers.RNN` a masked, padded sentence leaves
            the memory as it was).
        states: a list holding the blocks' memory, flattened: `(batch,
            num_blocks * units)` (`get_initial_state` gives the keys).

    Returns:
        `(output, [new_state])`: both the new memory, flattened.

    Example:

    ```python
    >>> import keras, keras_relmem, numpy as np
    >>> encoded_story = np.ones((2, 7, 100), "float32")  # 7 encoded sentences
    >>> cell = keras_relmem.EntNetCell(num_blocks=20, units=100)
    >>> tuple(keras.layers.RNN(cell)(encoded_story).shape)  # 20 blocks * 100
    (2, 2000)

    ```

    Reference:
        Henaff, Weston, Szlam, Bordes, LeCun, "Tracking the world state with
        recurrent entity networks", ICLR 2017, arXiv:1612.03969 (§2, eq. 1-4).
    """

    def __init__(
        self,
        num_blocks=20,
        units=100,
        keys=None,
        trainable_keys=True,
        keys_initializer=None,
        kernel_initializer=None,
        gate_bias_initializer="zeros",
        alpha_initializer="ones",
        kernel_regularizer=None,
        epsilon=1e-6,
        candidate_bias=True,
        activation=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        utils.check_positive_int("num_blocks", num_blocks)
        utils.check_positive_int("units", units)
        if keys is not None and not callable(keys):
            keys = np.asarray(keys, dtype="float32")
            if keys.shape != (num_blocks, units):
                raise ValueError(
                    f"keys must have shape (num_blocks, units) = ({num_blocks}, "
                    f"{units}); received an array of shape {keys.shape}."
                )
        if not epsilon > 0:
            raise ValueError(f"epsilon must be positive; received epsilon={epsilon!r}.")
        self.num_blocks = num_blocks
        self.units = units
        self.keys = keys
        self.trainable_keys = bool(trainable_keys)
        self.keys_initializer = keras.initializers.get(
            keys_initializer or _paper_initializer()
        )
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or _paper_initializer()
        )
        self.gate_bias_initializer = keras.initializers.get(gate_bias_initializer)
        self.alpha_initializer = keras.initializers.get(alpha_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.epsilon = float(epsilon)
        self.candidate_bias = bool(candidate_bias)
        self.shared_activation = activation
        self.bias_initializer = keras.initializers.get("zeros")
        self.state_size = [num_blocks * units]
        self.output_size = num_blocks * units

    @property
    def tied_keys(self):
        """True when the keys come from a callable (e.g. embedding rows)."""
        return callable(self.keys)

    def _linear(self, name, use_bias=False):
        return utils.dense(self, self.units, name, use_bias=use_bias)

    def key_rows(self):
        """The keys `(num_blocks, units)`: the cell's own weights or the tied rows."""
        if self.tied_keys:
            keys = self.keys()
            if tuple(keys.shape) != (self.num_blocks, self.units):
                raise ValueError(f"The keys callable must return shape ({self.num_blocks}, {self.units}); "
                                 f"it returned {tuple(keys.shape)}.")
            return keys
        return self.key_vectors

    def build(self, input_shape):
        if input_shape[-1] != self.units:
            raise ValueError(
                "EntNetCell takes encoded sentences of size units="
                f"{self.units}; received step inputs of shape {tuple(input_shape)}."
            )
        if not self.tied_keys:
            initializer = (
                keras.initializers.Constant(self.keys)
                if self.keys is not None
                else utils.clone_initializer(self.keys_initializer, "keys")
            )
            self.key_vectors = self.add_weight(
                shape=(self.num_blocks, self.units),
                initializer=initializer,
                trainable=self.trainable_keys,
                name="keys",
            )
        self.gate_bias = self.add_weight(
            shape=(self.num_blocks,),
            initializer=self.gate_bias_initializer,
            name="gate_bias",
        )
        blocks_shape = (input_shape[0], self.num_blocks, self.units)
        self.memory_kernel = self._linear("U", use_bias=self.candidate_bias)
        self.memory_kernel.build(blocks_shape)
        self.key_kernel = self._linear("V")
        self.key_kernel.build((self.num_blocks, self.units))
        self.input_kernel = self._linear("W")
        self.input_kernel.build((input_shape[0], self.units))
        if self.shared_activation is not None:
            self.activation = self.shared_activation
            if not self.activation.built:
                self.activation.build((None, 1, self.units))
        else:
            self.activation = PReLU(
                alpha_initializer=utils.clone_initializer(self.alpha_initializer, "prelu/alpha"),
                shared_axes=[1],
                dtype=self.dtype_policy,
                name="prelu",
            )
            self.activation.build(blocks_shape)
        self.built = True

    def get_initial_state(self, batch_size=None):
        """The keys, one copy per example, flattened."""
        keys = ops.cast(ops.reshape(self.key_rows(), (1, -1)), self.compute_dtype)
        return [ops.tile(keys, (batch_size, 1))]

    def step(self, sentence, memory):
        """One update of the unflattened memory `(batch, num_blocks, units)`.

        Returns `(next_memory, gates)` with `gates` of shape
        `(batch, num_blocks)`.
        """
        keys = ops.cast(self.key_rows(), memory.dtype)
        s = ops.expand_dims(sentence, 1)  # (batch, 1, units)
        gate_logits = ops.sum(s * memory, axis=-1) + ops.sum(s * keys, axis=-1)
        gates = ops.sigmoid(gate_logits + ops.cast(self.gate_bias, memory.dtype))
        candidate = self.activation(
            utils.dense_on_rows(self.memory_kernel, memory)
            + self.key_kernel(keys)
            + ops.expand_dims(self.input_kernel(sentence), 1)
        )
        memory = memory + ops.expand_dims(gates, -1) * candidate
        norm = ops.sqrt(ops.sum(ops.square(memory), axis=-1, keepdims=True))
        memory = memory / ops.maximum(norm, ops.cast(self.epsilon, memory.dtype))
        return memory, gates

    def call(self, inputs, states):
        memory = ops.reshape(states[0], (-1, self.num_blocks, self.units))
        memory, _ = self.step(inputs, memory)
        flat = ops.reshape(memory, (-1, self.num_blocks * self.units))
        return flat, [flat]

    def get_config(self):
        if self.tied_keys or self.shared_activation is not None:
            raise ValueError(
                f"{self.name}: a cell with tied keys or a shared activation is part of the model that "
                "ties them and cannot be serialized alone; save that model (e.g. "
                "keras_relmem.models.EntNetQA), whose config rebuilds the ties."
            )
        config = super().get_config()
        config.update(
            {
                "num_blocks": self.num_blocks,
                "units": self.units,
                "candidate_bias": self.candidate_bias,
                "keys": None if self.keys is None else self.keys.tolist(),
                "trainable_keys": self.trainable_keys,
                "keys_initializer": _serialize(self.keys_initializer),
                "kernel_initializer": _serialize(self.kernel_initializer),
                "gate_bias_initializer": _serialize(self.gate_bias_initializer),
                "alpha_initializer": _serialize(self.alpha_initializer),
                "kernel_regularizer": _serialize(self.kernel_regularizer),
                "epsilon": self.epsilon,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        # Cells saved before the candidate bias existed had none.
        config.setdefault("candidate_bias", False)
        return super().from_config(config)


@keras.saving.register_keras_serializable(package="keras_relmem")
class EntNetEncoder(keras.layers.Layer):
    """Sentence encoder of the EntNet: a learned multiplicative positional mask.

    For word embeddings `e_1..e_S` of one sentence, `s = sum_i f_i * e_i` where
    the `f_i` (one vector of size `d` per position) are learned and start at
    ones, i.e. as a bag of words. Works on any leading dimensions, e.g. a story
    `(batch, sentences, S, d) -> (batch, sentences, d)` or a query
    `(batch, S, d) -> (batch, d)`. Padded words (Keras mask from an
    `Embedding(mask_zero=True)`) are left out, and the output mask marks the
    sentences with at least one word, so a following `keras.layers.RNN`
    skips padded sentences. Use separate encoders for story and query, as the
    paper does.

    Args:
        mask_initializer: initializer of the positional mask (default `"ones"`).
        mask_regularizer: optional regularizer of the mask.
        **kwargs: standard layer arguments.

    Call arguments:
        inputs: embedded words, `(..., words, dim)` (a sentence, or a story's
            sentences `(batch, sentences, words, dim)`).
        mask: optional `(..., words)` booleans: padded words add nothing.

    Example:

    ```python
    >>> import keras, keras_relmem, numpy as np
    >>> story_ids = np.ones((2, 7, 5), "int32")  # 7 sentences of 5 words
    >>> query_ids = np.ones((2, 4), "int32")
    >>> embed = keras.layers.Embedding(30, 100, mask_zero=True)
    >>> tuple(keras_relmem.EntNetEncoder()(embed(story_ids)).shape)
    (2, 7, 100)
    >>> tuple(keras_relmem.EntNetEncoder()(embed(query_ids)).shape)
    (2, 100)

    ```

    Reference:
        Henaff et al., "Tracking the world state with recurrent entity
        networks", ICLR 2017, arXiv:1612.03969 (§2.1, Input Encoder).
    """

    def __init__(self, mask_initializer="ones", mask_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.mask_initializer = keras.initializers.get(mask_initializer)
        self.mask_regularizer = keras.regularizers.get(mask_regularizer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) < 3 or input_shape[-2] is None or input_shape[-1] is None:
            raise ValueError(
                "EntNetEncoder takes word embeddings (..., words, dim) with known "
                f"words and dim; received shape {tuple(input_shape)}."
            )
        self.positional_mask = self.add_weight(
            shape=tuple(input_shape[-2:]),
            initializer=self.mask_initializer,
            regularizer=self.mask_regularizer,
            name="positional_mask",
        )
        self.built = True

    def call(self, inputs, mask=None):
        weighted = inputs * ops.cast(self.positional_mask, inputs.dtype)
        if mask is not None:
            weighted = weighted * ops.expand_dims(ops.cast(mask, inputs.dtype), -1)
        return ops.sum(weighted, axis=-2)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        return ops.any(mask, axis=-1)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-2]) + (input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mask_initializer": _serialize(self.mask_initializer),
                "mask_regularizer": _serialize(self.mask_regularizer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_relmem")
class EntNetReadout(keras.layers.Layer):
    """Output module of the EntNet: attend over the blocks with the query.

    `p_j = softmax_j(q.h_j)`, `u = sum_j p_j h_j`,
    `y = R PReLU(q + H u)`: logits over `num_outputs` answers.

    Call it on `[memory, query]`: the final memory, flattened
    `(batch, num_blocks * units)` as `EntNetCell` gives it or
    `(batch, num_blocks, units)`, and the encoded query `(batch, units)`.

    Args:
        num_outputs: int, number of answer classes (the size of `y`).
        kernel_initializer: initializer of `R` and `H` (default N(0, 0.1)).
        alpha_initializer: initializer of the PReLU slopes (default `"ones"`).
        kernel_regularizer: optional regularizer of `R` and `H`.
        activation: optional `keras.layers.PReLU` to use instead of the
            layer's own: `EntNetReadout.shared_prelu(units)` gives one to
            share with `EntNetCell(activation=...)`, as the authors' code
            shares one slope vector between the memory and the output. A
            readout with a shared activation belongs to the model that
            shares it (see `keras_relmem.models.EntNetQA`).
        **kwargs: standard layer arguments.

    Call arguments:
        inputs: `[memory, query]`: the final memory `(batch, num_blocks *
            units)` (the cell's state) and the encoded question `(batch,
            units)`.

    Returns:
        The answer logits, `(batch, vocab_size)`.

    Example:

    ```python
    >>> import keras_relmem, numpy as np
    >>> memory = np.ones((2, 20 * 100), "float32")  # EntNetCell's final state
    >>> query = np.ones((2, 100), "float32")
    >>> logits = keras_relmem.EntNetReadout(num_outputs=30)([memory, query])
    >>> tuple(logits.shape)
    (2, 30)

    ```

    Reference:
        Henaff et al., "Tracking the world state with recurrent entity
        networks", ICLR 2017, arXiv:1612.03969 (§2.3, Output Module).
    """

    def __init__(
        self,
        num_outputs,
        kernel_initializer=None,
        alpha_initializer="ones",
        kernel_regularizer=None,
        activation=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        utils.check_positive_int("num_outputs", num_outputs)
        self.shared_activation = activation
        self.num_outputs = num_outputs
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or _paper_initializer()
        )
        self.alpha_initializer = keras.initializers.get(alpha_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def _linear(self, units, name):
        return utils.dense(self, units, name, use_bias=False)

    def build(self, input_shape):
        if not isinstance(input_shape, (list, tuple)) or len(input_shape) != 2:
            raise ValueError(
                "EntNetReadout is called on [memory, query]; received input "
                f"shape {input_shape}."
            )
        memory_shape, query_shape = input_shape
        units = query_shape[-1]
        if memory_shape[-1] is None or units is None or memory_shape[-1] % units:
            raise ValueError(
                f"The memory's last dimension ({memory_shape[-1]}) must be a "
                f"multiple of the query size ({units})."
            )
        self.units = units
        self.hidden_kernel = self._linear(units, "H")
        self.hidden_kernel.build((query_shape[0], units))
        if self.shared_activation is not None:
            self.activation = self.shared_activation
            if not self.activation.built:
                self.activation.build((None, 1, units))
        else:
            self.activation = PReLU(
                alpha_initializer=utils.clone_initializer(self.alpha_initializer, "prelu/alpha"),
                dtype=self.dtype_policy,
                name="prelu",
            )
            self.activation.build((query_shape[0], units))
        self.output_kernel = self._linear(self.num_outputs, "R")
        self.output_kernel.build((query_shape[0], units))
        self.built = True

    @staticmethod
    def shared_prelu(units, alpha_initializer="ones", dtype=None, name="prelu"):
        """One PReLU slope vector `(1, units)` for `EntNetCell` and `EntNetReadout` to share.

        Its slopes broadcast over the cell's blocks `(batch, blocks, units)`
        and the readout's `(batch, units)` alike.
        """
        prelu = PReLU(alpha_initializer=alpha_initializer, shared_axes=[1], dtype=dtype, name=name)
        prelu.build((None, 1, units))
        return prelu

    def attention(self, memory, query):
        """The read weights `p_j`, shape `(batch, num_blocks)`."""
        blocks = ops.reshape(memory, (ops.shape(memory)[0], -1, self.units))
        logits = ops.sum(blocks * ops.expand_dims(query, 1), axis=-1)
        return ops.cast(ops.softmax(ops.cast(logits, "float32"), axis=-1), query.dtype)

    def call(self, inputs):
        memory, query = inputs
        blocks = ops.reshape(memory, (ops.shape(memory)[0], -1, self.units))
        weights = self.attention(memory, query)
        read = ops.sum(blocks * ops.expand_dims(weights, -1), axis=1)
        hidden = query + self.hidden_kernel(read)
        if self.shared_activation is not None:
            # The shared slopes are laid out for the cell's (batch, blocks, units).
            hidden = self.activation(ops.expand_dims(hidden, 1))[:, 0]
        else:
            hidden = self.activation(hidden)
        return self.output_kernel(hidden)

    def compute_output_shape(self, input_shape):
        return (input_shape[1][0], self.num_outputs)

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        if self.shared_activation is not None:
            raise ValueError(
                f"{self.name}: a readout with a shared activation is part of the model that shares it and "
                "cannot be serialized alone; save that model (e.g. keras_relmem.models.EntNetQA)."
            )
        config = super().get_config()
        config.update(
            {
                "num_outputs": self.num_outputs,
                "kernel_initializer": _serialize(self.kernel_initializer),
                "alpha_initializer": _serialize(self.alpha_initializer),
                "kernel_regularizer": _serialize(self.kernel_regularizer),
            }
        )
        return config
