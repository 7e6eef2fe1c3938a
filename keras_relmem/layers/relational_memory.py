"""The Relational Memory Core (Santoro et al. 2018) as a Keras 3 RNN cell."""

import contextlib
import inspect
import itertools

import keras
from keras import ops
from keras.layers import LayerNormalization

from keras_relmem._keras_internals import DropoutRNNCell, cell_dropout_mask, set_cell_dropout_mask
from keras_relmem.layers import utils

GATE_STYLES = ("unit", "memory", None)

# Sonnet 1's LayerNorm epsilon; Keras' default (1e-3) would change the numbers.
LAYER_NORM_EPSILON = 1e-5


def sonnet_linear_initializer(seed=None):
    """Sonnet 1's `Linear` default: truncated normal, stddev 1/sqrt(fan_in).

    `VarianceScaling` corrects its stddev for the truncation, so the spread is a
    few percent wider than Sonnet's; the scale (1/sqrt(fan_in)) is the same.
    """
    return keras.initializers.VarianceScaling(
        scale=1.0, mode="fan_in", distribution="truncated_normal", seed=seed
    )


@keras.saving.register_keras_serializable(package="keras_relmem")
class RelationalMemoryCell(DropoutRNNCell, keras.layers.Layer):
    """Relational Memory Core: memory slots that attend to each other and the input.

    At each step the input `x` is projected to `mem_size = head_size * num_heads`
    and appended to the memory `M` (shape `(mem_slots, mem_size)`) as extra
    row(s). `num_blocks` rounds then update `[M; x]`: multi-head dot-product
    attention whose queries, keys and values come from one linear map followed by
    LayerNorm, a residual connection and LayerNorm, then a row-wise ReLU MLP
    (no activation on its last layer, shared by all blocks), a residual and
    LayerNorm. The input rows are dropped again, giving the candidate `M~`.
    With gating, `i, f = Linear(x) + Linear(tanh(M))` and
    `M' = sigmoid(i + input_bias) * tanh(M~) + sigmoid(f + forget_bias) * M`;
    `gate_style='unit'` gates every unit, `'memory'` one scalar per slot, and
    `None` takes `M' = M~`. The output is `M'` flattened.

    The memory travels between steps flattened to `mem_slots * mem_size`
    values (Keras 3 RNN states are vectors), and starts as the identity matrix,
    zero-padded or truncated to `mem_size` columns. This follows DeepMind
    Sonnet's `relational_memory.py`: each block has its own q/k/v projection
    and LayerNorms while the attention MLP is shared across blocks.

    Args:
        mem_slots: int, number of memory rows (slots).
        head_size: int, size of each attention head's values.
        num_heads: int, number of attention heads (default 1).
            `mem_size = head_size * num_heads`.
        num_blocks: int, rounds of attention + MLP per step (default 1).
        forget_bias: float added to the forget gate logits (default 1.0).
        input_bias: float added to the input gate logits (default 0.0).
        gate_style: `'unit'` (default), `'memory'` or `None`.
        attention_mlp_layers: int, layers of the row-wise MLP (default 2).
        key_size: int, size of queries and keys per head; defaults to
            `head_size`.
        treat_input_as_matrix: bool (default False). If True, each step's
            input has shape `(batch, n, features)` and every one of its `n` rows
            becomes an extra memory row; otherwise the input is flattened into
            one row.
        dropout: float in [0, 1), dropout rate on the attention weights during
            training (default 0). As in Keras' recurrent cells, one mask is
            drawn per sequence and reused at every step.
        kernel_initializer: initializer of every weight matrix (default
            Sonnet's truncated normal with stddev 1/sqrt(fan_in)).
        bias_initializer: initializer of every bias (default `"zeros"`).
        kernel_regularizer: optional regularizer of the weight matrices.
        bias_regularizer: optional regularizer of the biases.
        seed: optional int seed for the dropout masks.
        **kwargs: standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: one step's input, `(batch, features)`, or `(batch, n,
            features)` with `treat_input_as_matrix=True`.
        states: a list holding the flattened memory, `(batch, mem_slots *
            mem_size)` (`get_initial_state(batch_size)` gives the identity
            memory).
        training: bool, whether dropout on the attention weights is applied.

    Returns:
        `(output, [new_state])`: both the new memory, flattened.

    Example:

    ```python
    >>> import keras, keras_relmem, numpy as np
    >>> cell = keras_relmem.RelationalMemoryCell(mem_slots=4, head_size=32,
    ...                                          num_heads=2)
    >>> rnn = keras.layers.RNN(cell)  # the final memory, flattened
    >>> tuple(rnn(np.zeros((8, 10, 16), "float32")).shape)  # 4 slots * 64
    (8, 256)

    ```

    Reference:
        Santoro et al., "Relational recurrent neural networks", NeurIPS 2018,
        arXiv:1806.01822 (§2-3, Fig. 1).
    """

    # {layer name: transposed kernel} inside `with cell.transposed_kernels(...)`, else None
    _transposed_kernels = None

    def __init__(
        self,
        mem_slots,
        head_size,
        num_heads=1,
        num_blocks=1,
        forget_bias=1.0,
        input_bias=0.0,
        gate_style="unit",
        attention_mlp_layers=2,
        key_size=None,
        treat_input_as_matrix=False,
        dropout=0.0,
        kernel_initializer=None,
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        utils.check_positive_int("mem_slots", mem_slots)
        utils.check_positive_int("head_size", head_size)
        utils.check_positive_int("num_heads", num_heads)
        utils.check_positive_int("num_blocks", num_blocks)
        utils.check_positive_int("attention_mlp_layers", attention_mlp_layers)
        if key_size is not None:
            utils.check_positive_int("key_size", key_size)
        if gate_style not in GATE_STYLES:
            raise ValueError(
                f"gate_style must be one of 'unit', 'memory' or None; "
                f"received gate_style={gate_style!r}."
            )
        utils.check_rate("dropout", dropout)
        self.mem_slots = mem_slots
        self.head_size = head_size
        self.num_heads = num_heads
        self.num_blocks = num_blocks
        self.forget_bias = float(forget_bias)
        self.input_bias = float(input_bias)
        self.gate_style = gate_style
        self.attention_mlp_layers = attention_mlp_layers
        self.key_size = key_size or head_size
        self.treat_input_as_matrix = bool(treat_input_as_matrix)
        self.dropout = float(dropout)
        self.recurrent_dropout = 0.0  # DropoutRNNCell expects the attribute.
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        """@private the dropout masks' seed state (Keras tracks it as a variable of the layer)."""
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or sonnet_linear_initializer()
        )
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)

        self.mem_size = head_size * num_heads
        self.state_size = [self.mem_slots * self.mem_size]
        self.output_size = self.mem_slots * self.mem_size
        self._num_input_rows = None  # input rows per step, known once built

    # -- sub-layers ---------------------------------------------------------
    def _dense(self, units, name, activation=None):
        return utils.dense(self, units, name, activation=activation)

    def _layer_norm(self, name):
        return LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name=name
        )

    def build(self, input_shape):
        if self.treat_input_as_matrix:
            if len(input_shape) != 3:
                raise ValueError(
                    "With treat_input_as_matrix=True each step's input must have "
                    f"shape (batch, rows, features); received {tuple(input_shape)}."
                )
            row_shape = (input_shape[0], input_shape[1], input_shape[2])
        else:
            features = utils.prod(input_shape[1:])
            if features is None:
                raise ValueError(
                    "RelationalMemoryCell needs the step input's feature "
                    f"dimensions to be known; received {tuple(input_shape)}."
                )
            row_shape = (input_shape[0], features)
        self._num_input_rows = row_shape[1] if self.treat_input_as_matrix else 1
        memory_shape = (input_shape[0], self.mem_slots, self.mem_size)
        qkv_size = (2 * self.key_size + self.head_size) * self.num_heads

        self.input_projection = self._dense(self.mem_size, "input_projection")
        self.input_projection.build(row_shape)

        self.qkv_projections, self.qkv_norms = [], []
        self.attention_norms, self.mlp_norms = [], []
        for b in range(self.num_blocks):
            qkv = self._dense(qkv_size, f"block{b}_qkv")
            qkv.build(memory_shape)
            qkv_norm = self._layer_norm(f"block{b}_qkv_norm")
            qkv_norm.build(memory_shape[:-1] + (qkv_size,))
            attention_norm = self._layer_norm(f"block{b}_attention_norm")
            attention_norm.build(memory_shape)
            mlp_norm = self._layer_norm(f"block{b}_mlp_norm")
            mlp_norm.build(memory_shape)
            self.qkv_projections.append(qkv)
            self.qkv_norms.append(qkv_norm)
            self.attention_norms.append(attention_norm)
            self.mlp_norms.append(mlp_norm)

        self.attention_mlp = []
        for i in range(self.attention_mlp_layers):
            last = i == self.attention_mlp_layers - 1
            layer = self._dense(
                self.mem_size, f"attention_mlp_{i}", None if last else "relu"
            )
            layer.build(memory_shape)
            self.attention_mlp.append(layer)

        gate_size = self._gate_size()
        if gate_size:
            # Sonnet's _create_gates flattens every projected input row into
            # one vector before its Linear: the input gate sees all n rows.
            rows = input_shape[1] if self.treat_input_as_matrix else 1
            if rows is None:
                raise ValueError(
                    "With treat_input_as_matrix=True and gating, the number of "
                    f"input rows must be known; received {tuple(input_shape)}."
                )
            self.input_gate_projection = self._dense(2 * gate_size, "input_gates")
            self.input_gate_projection.build((input_shape[0], rows * self.mem_size))
            self.memory_gate_projection = self._dense(2 * gate_size, "memory_gates")
            self.memory_gate_projection.build(memory_shape)
        self.built = True

    def _gate_size(self):
        return {"unit": self.mem_size, "memory": 1, None: 0}[self.gate_style]

    # -- the computation ----------------------------------------------------
    @contextlib.contextmanager
    def transposed_kernels(self, kernels):
        """Within the block, the steps' dense layers named in `kernels` ({layer name: its kernel
        transposed}) multiply their input gradients by that copy (same values and gradients);
        `RelationalMemory` transposes them once per sequence. Outside it, nothing changes."""
        self._transposed_kernels = kernels
        try:
            yield self
        finally:
            self._transposed_kernels = None

    def get_initial_state(self, batch_size=None):
        """The identity memory, padded or truncated to `mem_size`, flattened."""
        eye = ops.eye(self.mem_slots, self.mem_size, dtype=self.compute_dtype)
        flat = ops.reshape(eye, (1, self.mem_slots * self.mem_size))
        return [ops.tile(flat, (batch_size, 1))]

    def get_dropout_mask(self, step_input):
        # One attention-weight mask per sequence, shaped like the weights
        # (batch, heads, rows, rows); Keras' RNN primes it before its loop.
        if cell_dropout_mask(self) is None and self.dropout > 0:
            rows = self.mem_slots + self._input_rows(step_input)
            batch = ops.shape(step_input)[0]
            template = ops.ones(
                (batch, self.num_heads, rows, rows), dtype=self.compute_dtype
            )
            set_cell_dropout_mask(self, keras.random.dropout(template, self.dropout, seed=self.seed_generator))
        return cell_dropout_mask(self)

    def _input_rows(self, step_input):
        return step_input.shape[1] if self.treat_input_as_matrix else 1

    def _project_input(self, inputs):
        if self.treat_input_as_matrix:
            return utils.dense_on_rows(self.input_projection, inputs)
        flat = ops.reshape(inputs, (ops.shape(inputs)[0], -1))
        return ops.expand_dims(self.input_projection(flat), 1)

    def _qkv(self, block, rows):
        """LayerNorm(Linear(rows)): the block's queries, keys and values."""
        return self.qkv_norms[block](self._dense_on_rows(self.qkv_projections[block], rows))

    def _dense_on_rows(self, layer, rows):
        """`utils.dense_on_rows`, or, inside a `RelationalMemory` whose call set transposed kernels, the same
        values with an input gradient that multiplies by the kernel transposed once per sequence."""
        if not self._transposed_kernels or layer.name not in self._transposed_kernels:
            return utils.dense_on_rows(layer, rows)
        return utils.dense_on_rows_with_transposed_kernel(layer, rows, self._transposed_kernels[layer.name])

    def _input_terms(self, inputs):
        """What a step computes from its input alone, never from the memory.

        Returns `(input_rows, input_qkv, input_gates)`: the projected input
        rows `(batch, n, mem_size)`, their first-block queries/keys/values
        (after that block's LayerNorm, which is row-wise) and the input side of
        the gates `(batch, 2 * gate_size)` (None without gating).
        """
        input_rows = self._project_input(inputs)
        input_qkv = self._qkv(0, input_rows)
        input_gates = None
        if self.gate_style is not None:
            # Sonnet's _create_gates flattens all projected input rows.
            rows = input_rows.shape[1]
            flat_rows = ops.reshape(input_rows, (-1, rows * self.mem_size))
            input_gates = self.input_gate_projection(flat_rows)
        return input_rows, input_qkv, input_gates

    def _multihead_attention(self, qkv, dropout_mask, query_rows):
        rows = qkv.shape[1]
        qkv = ops.reshape(
            qkv, (-1, rows, self.num_heads, 2 * self.key_size + self.head_size)
        )
        qkv = ops.transpose(qkv, (0, 2, 1, 3))  # (batch, heads, rows, size)
        # Split, not slicing: on TensorFlow the gradient of a strided slice
        # (StridedSliceGrad) cost more than the attention itself.
        q, k, v = ops.split(qkv, [self.key_size, 2 * self.key_size], axis=-1)
        if query_rows < rows:
            q = ops.split(q, [query_rows], axis=2)[0]
        q = q * (self.key_size**-0.5)
        logits = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        # Softmax in float32 so that mixed precision does not saturate it.
        weights = ops.cast(ops.softmax(ops.cast(logits, "float32"), axis=-1), v.dtype)
        if dropout_mask is not None:
            weights = weights * dropout_mask[:, :, :query_rows, :]
        attended = ops.matmul(weights, v)  # (batch, heads, query_rows, head_size)
        attended = ops.transpose(attended, (0, 2, 1, 3))
        return ops.reshape(attended, (-1, query_rows, self.mem_size)), weights

    def _attend_over_memory(self, memory, input_rows, input_qkv, dropout_mask=None):
        # With one block only the memory rows' outputs are kept (below), so
        # the input rows take part through their keys and values alone.
        rows = memory
        if self.num_blocks > 1:
            rows = ops.concatenate([memory, input_rows], axis=1)
        attention = []
        for block in range(self.num_blocks):
            # The input rows are dropped after the last block, and every
            # operation after attention is row-wise: the last block only needs
            # queries, LayerNorms and the MLP for the memory rows (same result
            # as Sonnet, less work; half the MLP with one slot).
            last = block == self.num_blocks - 1
            if block == 0:
                qkv = ops.concatenate([self._qkv(0, memory), input_qkv], axis=1)
            else:
                qkv = self._qkv(block, rows)
            query_rows = self.mem_slots if last else qkv.shape[1]
            attended, weights = self._multihead_attention(qkv, dropout_mask, query_rows)
            attention.append(weights)
            if last and self.num_blocks > 1:
                rows = ops.split(rows, [self.mem_slots], axis=1)[0]
            rows = self.attention_norms[block](rows + attended)
            hidden = rows
            for layer in self.attention_mlp:
                hidden = self._dense_on_rows(layer, hidden)
            rows = self.mlp_norms[block](hidden + rows)
        return rows, attention

    def _gated(self, candidate, memory, input_gates):
        if self.gate_style is None:
            return candidate
        gates = self._dense_on_rows(self.memory_gate_projection, ops.tanh(memory))
        gates = gates + ops.expand_dims(input_gates, 1)
        input_gate, forget_gate = ops.split(gates, 2, axis=-1)
        input_gate = ops.sigmoid(input_gate + self.input_bias)
        forget_gate = ops.sigmoid(forget_gate + self.forget_bias)
        return input_gate * ops.tanh(candidate) + forget_gate * memory

    def _update(self, memory, input_terms, dropout_mask):
        input_rows, input_qkv, input_gates = input_terms
        candidate, attention = self._attend_over_memory(
            memory, input_rows, input_qkv, dropout_mask
        )
        return self._gated(candidate, memory, input_gates), attention

    def step(self, inputs, memory, training=False):
        """One step on an unflattened memory.

        Returns `(next_memory, attention)` where `attention` is a list with one
        weight tensor per block, `(batch, heads, rows, rows)` (rows = slots +
        input rows), except the last block's `(batch, heads, slots, rows)`:
        what the memory slots attend to. Useful for inspection; `call` wraps it for `keras.layers.RNN`.
        """
        # NumPy arrays from a caller become backend tensors (torch will not
        # multiply a grad-tracking tensor by an ndarray).
        memory = ops.convert_to_tensor(memory, dtype=self.compute_dtype)
        dropout_mask = self.get_dropout_mask(inputs) if training else None
        return self._update(memory, self._input_terms(inputs), dropout_mask)

    # -- the input-only terms of a whole sequence at once ------------------
    def _feature_sizes(self):
        rows = self._num_input_rows
        qkv_size = (2 * self.key_size + self.head_size) * self.num_heads
        return (
            rows * self.mem_size if self.num_blocks > 1 else 0,
            rows * qkv_size,
            2 * self._gate_size(),
        )

    def precompute_inputs(self, sequences):
        """The input-only terms of every step at once, `(batch, time, features)`.

        `RelationalMemory` calls this before its recurrence: one large matrix
        product per weight for the whole sequence replaces one small product
        per step inside the loop (and likewise for the gradients). A cell
        whose `RelationalMemory` has switched it to precomputed inputs reads
        these features as its step input.

        Args:
            sequences: `(batch, time, ...)` raw inputs, as `keras.layers.RNN`
                would receive them.
        """
        batch, time = ops.shape(sequences)[0], ops.shape(sequences)[1]
        steps = ops.reshape(sequences, (-1,) + tuple(sequences.shape[2:]))
        input_rows, input_qkv, input_gates = self._input_terms(steps)
        parts = [ops.reshape(input_qkv, (-1, utils.prod(input_qkv.shape[1:])))]
        if self.num_blocks > 1:
            parts.insert(0, ops.reshape(input_rows, (-1, utils.prod(input_rows.shape[1:]))))
        if input_gates is not None:
            parts.append(input_gates)
        features = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
        return ops.reshape(features, (batch, time, features.shape[-1]))

    def _split_features(self, features):
        rows_size, qkv_size, gates_size = self._feature_sizes()
        rows = self._num_input_rows
        sizes = [size for size in (rows_size, qkv_size, gates_size) if size]
        parts = [features]
        if len(sizes) > 1:
            parts = ops.split(features, list(itertools.accumulate(sizes[:-1])), axis=-1)
        input_rows = input_gates = None
        if rows_size:
            input_rows = ops.reshape(parts.pop(0), (-1, rows, self.mem_size))
        input_qkv = ops.reshape(parts.pop(0), (-1, rows, qkv_size // rows))
        if gates_size:
            input_gates = parts.pop(0)
        return input_rows, input_qkv, input_gates

    def call(self, inputs, states, training=False):
        memory = ops.reshape(states[0], (-1, self.mem_slots, self.mem_size))
        next_memory, _ = self.step(inputs, memory, training=training)
        flat = ops.reshape(next_memory, (-1, self.mem_slots * self.mem_size))
        return flat, [flat]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mem_slots": self.mem_slots,
                "head_size": self.head_size,
                "num_heads": self.num_heads,
                "num_blocks": self.num_blocks,
                "forget_bias": self.forget_bias,
                "input_bias": self.input_bias,
                "gate_style": self.gate_style,
                "attention_mlp_layers": self.attention_mlp_layers,
                "key_size": self.key_size,
                "treat_input_as_matrix": self.treat_input_as_matrix,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
                "kernel_regularizer": keras.regularizers.serialize(
                    self.kernel_regularizer
                ),
                "bias_regularizer": keras.regularizers.serialize(
                    self.bias_regularizer
                ),
                "seed": self.seed,
            }
        )
        return config


class _PrecomputedInputsCell(RelationalMemoryCell):
    """The cell `RelationalMemory` runs: its step input is one step of `precompute_inputs(sequence)`
    (the input-only terms, already computed for the whole sequence), not a raw input row.

    Same weights, arguments and config as `RelationalMemoryCell`; only what a
    step receives differs, so it is a class of its own rather than a mode.
    """

    def loop_dense_layers(self):
        """The projections applied at every step: the memory's q/k/v, the attention MLP, the memory gates."""
        gates = [self.memory_gate_projection] if self.gate_style is not None else []
        return [*self.qkv_projections, *self.attention_mlp, *gates]

    def _input_rows(self, step_input):
        return self._num_input_rows

    def call(self, inputs, states, training=False):
        memory = ops.reshape(states[0], (-1, self.mem_slots, self.mem_size))
        dropout_mask = self.get_dropout_mask(inputs) if training else None
        next_memory, _ = self._update(memory, self._split_features(inputs), dropout_mask)
        flat = ops.reshape(next_memory, (-1, self.mem_slots * self.mem_size))
        return flat, [flat]


# Backends on which RelationalMemory transposes its per-step kernels once per sequence by default
# (bench/lm/speed.py measured it faster there).
TRANSPOSED_KERNELS_BACKENDS = ("tensorflow",)

# The RelationalMemoryCell arguments that RelationalMemory passes to its cell.
_CELL_ARGUMENTS = tuple(
    name
    for name in inspect.signature(RelationalMemoryCell.__init__).parameters
    if name not in ("self", "kwargs")
)


@keras.saving.register_keras_serializable(package="keras_relmem")
class RelationalMemory(keras.layers.RNN):
    """A Relational Memory Core over a whole sequence: the fast form of `RNN(cell)`.

    Computes exactly what `keras.layers.RNN(RelationalMemoryCell(...))`
    computes, but takes everything that depends on the input alone out of the
    recurrence: the input projection, the first block's queries, keys and
    values of the input rows (with their LayerNorm) and the input side of the
    gates are computed for all steps in one matrix product each, before the
    loop (`RelationalMemoryCell.precompute_inputs`). Inside the loop only the
    memory's own terms remain. This is the layer to use in models; the cell
    stays the reference for custom loops and `keras.layers.RNN` wrappers (for
    instance stacked with other cells).

    The weights are those of `keras.layers.RNN(RelationalMemoryCell(...))` in
    the same order: `fast.set_weights(reference.get_weights())` moves a
    trained model from one form to the other. (Weights files key layers by
    class, so `load_weights` of one form's file into the other does not.)

    Args:
        mem_slots, head_size: as for `RelationalMemoryCell`.
        return_sequences: bool, return the memory after every step
            `(batch, time, mem_slots * mem_size)` rather than the last.
        return_state: bool, also return the final (flattened) memory.
        go_backwards: bool, read the sequence in reverse.
        stateful: bool, carry the memory from batch to batch (truncated BPTT);
            needs a fixed batch size.
        unroll: bool, unroll the loop (short sequences only).
        transposed_kernels: bool or None. True transposes the kernels used at
            every step once per sequence, so that the backward pass's input
            gradients multiply by a transposed copy instead of transposing
            inside every step; same values and gradients. None (default)
            turns it on where it measured faster (tensorflow, graph and XLA;
            `bench/lm/speed.py`) and off elsewhere (on jax it measured
            within noise of off; torch's Keras backend has no
            `custom_gradient`, so True is refused there with a ValueError).
        **kwargs: any other `RelationalMemoryCell` argument (`num_heads`,
            `num_blocks`, `gate_style`, `key_size`, `treat_input_as_matrix`,
            `dropout`, initializers, ...) and the usual layer arguments
            (`name`, `dtype`, `zero_output_for_mask`, ...).

    Call arguments:
        sequences: `(batch, time, features)` (or `(batch, time, n, features)`
            with `treat_input_as_matrix=True`).
        initial_state: optional list holding the flattened initial memory
            (default: the identity memory).
        mask: optional `(batch, time)` booleans; masked steps leave the memory
            as it was.
        training: bool, whether dropout is applied.

    Example:

    ```python
    >>> import numpy as np, keras_relmem
    >>> layer = keras_relmem.RelationalMemory(mem_slots=4, head_size=32,
    ...                                       num_heads=2, return_sequences=True)
    >>> tuple(layer(np.zeros((8, 10, 16), "float32")).shape)
    (8, 10, 256)

    ```

    Reference:
        Santoro et al., "Relational recurrent neural networks", NeurIPS 2018,
        arXiv:1806.01822; the cell follows DeepMind Sonnet's
        `relational_memory.py`.
    """

    def __init__(
        self,
        mem_slots,
        head_size,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        transposed_kernels=None,
        **kwargs,
    ):
        cell_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in _CELL_ARGUMENTS}
        cell = _PrecomputedInputsCell(
            mem_slots,
            head_size,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="relational_memory_cell",
            **cell_kwargs,
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            **kwargs,
        )
        # The argument as given: None (the backend's choice) stays None in the config, so a model saved
        # on one backend takes the speed setting of the backend it is loaded on.
        self.transposed_kernels = None if transposed_kernels is None else bool(transposed_kernels)
        if self.transposed_kernels and keras.backend.backend() == "torch":
            raise ValueError("RelationalMemory(transposed_kernels=True) needs keras.ops.custom_gradient, which Keras' "
                             "torch backend does not have; leave it None (each backend's faster choice) or False: "
                             "the values and gradients are the same")

    @property
    def uses_transposed_kernels(self):
        """Whether calls transpose the step kernels once per sequence: the argument, else the backend's default."""
        if self.transposed_kernels is not None:
            return self.transposed_kernels
        return keras.backend.backend() in TRANSPOSED_KERNELS_BACKENDS

    def call(self, sequences, initial_state=None, mask=None, training=False):
        features = self.cell.precompute_inputs(sequences)
        if not self.uses_transposed_kernels:
            return super().call(features, initial_state=initial_state, mask=mask, training=training)
        dtype = self.cell.compute_dtype
        kernels = {layer.name: ops.transpose(ops.cast(layer.kernel, dtype)) for layer in self.cell.loop_dense_layers()}
        with self.cell.transposed_kernels(kernels):
            return super().call(features, initial_state=initial_state, mask=mask, training=training)

    def get_config(self):
        cell_config = self.cell.get_config()
        config = {name: cell_config[name] for name in _CELL_ARGUMENTS}
        base_config = super().get_config()
        del base_config["cell"]
        return {**base_config, **config, "transposed_kernels": self.transposed_kernels}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
