"""Word-level language models: embedding, a recurrent core, tied or untied softmax."""

import keras
from keras import ops

from keras_relmem.models.babi_qa import rmc_layer

# The RMC defaults are the PyTorch RMC port's PTB configuration (the RMC
# paper's LM set-up scaled to a CPU: one memory slot with a large head); the
# LSTM baseline has a similar number of parameters.
DEFAULTS = {
    "rmc": {
        "embedding_dim": 192,
        "mem_slots": 1,
        "head_size": 192,
        "num_heads": 4,
        "key_size": 64,
        "attention_mlp_layers": 3,
        "num_blocks": 1,
        "gate_style": "unit",
        "tied": True,
    },
    "lstm": {"embedding_dim": 192, "units": 1000, "tied": True},
}


@keras.saving.register_keras_serializable(package="keras_relmem")
class ReversibleEmbedding(keras.layers.ReversibleEmbedding):
    """Keras' `ReversibleEmbedding` plus the output bias of a tied softmax.

    `layer(ids)` embeds; `layer(h, reverse=True)` returns `h E^T + b`. Keras'
    layer gives `h E^T` only; a tied language model's softmax keeps its own
    per-word bias (Press & Wolf; the PyTorch word-LM example's decoder), which
    lets frequent words be likely without stretching their embeddings. With
    `use_bias=False` this is exactly `keras.layers.ReversibleEmbedding`.

    Files saved before this class built on Keras' load unchanged: the weights
    are stored in the same order (embeddings, then the bias).

    Args:
        input_dim, output_dim: vocabulary size and embedding width.
        use_bias: bool, add a trainable `(input_dim,)` bias to reverse logits.
        **kwargs: as for `keras.layers.ReversibleEmbedding` (`tie_weights`,
            `reverse_dtype`, ...). `logit_soft_cap` is refused with a bias,
            whose logits would no longer be capped.

    Example:

    >>> import numpy as np
    >>> layer = ReversibleEmbedding(10, 4)
    >>> vectors = layer(np.array([[1, 2, 3]]))
    >>> tuple(layer(vectors, reverse=True).shape)
    (1, 3, 10)

    Reference: Press & Wolf, "Using the output embedding to improve language
    models", EACL 2017; Inan et al., ICLR 2017.
    """

    def __init__(self, input_dim, output_dim, use_bias=True, **kwargs):
        if use_bias and kwargs.get("logit_soft_cap") is not None:
            raise ValueError(
                "ReversibleEmbedding: logit_soft_cap needs use_bias=False "
                "(a bias added after the cap would undo it)."
            )
        super().__init__(input_dim, output_dim, **kwargs)
        self.use_bias = use_bias

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.use_bias:
            self.reverse_bias = self.add_weight(
                shape=(self.input_dim,), initializer="zeros", name="reverse_bias"
            )

    def call(self, inputs, reverse=False):
        outputs = super().call(inputs, reverse=reverse)
        if reverse and self.use_bias:
            outputs = outputs + ops.cast(self.reverse_bias, outputs.dtype)
        return outputs

    @property
    def variable_serialization_spec(self):
        spec = super().variable_serialization_spec
        if self.use_bias:
            spec = {mode: names + ["reverse_bias"] for mode, names in spec.items()}
        return spec

    def get_config(self):
        return {**super().get_config(), "use_bias": self.use_bias}


def lm_defaults(model):
    if model not in DEFAULTS:
        raise ValueError(f"model must be one of {sorted(DEFAULTS)}; received {model!r}.")
    return dict(DEFAULTS[model])


def build_language_model(
    model,
    vocab_size,
    batch_size=None,
    sequence_length=None,
    stateful=False,
    precompute_inputs=True,
    **hparams,
):
    """A next-word model: `(batch, time)` ids -> `(batch, time, vocab)` logits.

    Args:
        model: `"rmc"` (RelationalMemoryCell core) or `"lstm"` (keras LSTM).
        vocab_size: int.
        batch_size: int, required with `stateful=True` (truncated BPTT).
        sequence_length: int or None (any length).
        stateful: carry the recurrent state from batch to batch.
        precompute_inputs: for the RMC, use `RelationalMemory` (default; the
            input-only terms of all steps computed before the recurrence)
            rather than `keras.layers.RNN(RelationalMemoryCell(...))`. Same
            weights and outputs; False is kept for `bench/lm_speed.py`.
        **hparams: overrides of `DEFAULTS[model]`; `tied=True` shares the
            embedding matrix with the softmax (with a linear projection from
            the core's output to `embedding_dim` when their sizes differ).

    Returns:
        An uncompiled `keras.Model` named `lm_<model>`.

    Example:

    ```python
    >>> model = build_language_model("rmc", 10000, batch_size=64, stateful=True)
    >>> tuple(model.output.shape)
    (64, None, 10000)

    ```
    """
    config = lm_defaults(model)
    unknown = set(hparams) - set(config)
    if unknown:
        raise ValueError(f"Unknown hyper-parameters for {model}: {sorted(unknown)}; known: {sorted(config)}.")
    config.update({k: v for k, v in hparams.items() if v is not None})
    if stateful and not batch_size:
        raise ValueError("stateful=True needs a fixed batch_size.")
    ids = keras.Input((sequence_length,), batch_size=batch_size, dtype="int32", name="ids")
    embedding = ReversibleEmbedding(vocab_size, config["embedding_dim"], name="embedding")
    x = embedding(ids)
    if model == "rmc":
        h = rmc_layer(
            config, precompute_inputs, return_sequences=True, stateful=stateful, name="core"
        )(x)
    else:
        h = keras.layers.LSTM(
            config["units"], return_sequences=True, stateful=stateful, name="core"
        )(x)
    if config["tied"]:
        if h.shape[-1] != config["embedding_dim"]:
            h = keras.layers.Dense(config["embedding_dim"], name="projection")(h)
        logits = embedding(h, reverse=True)
    else:
        logits = keras.layers.Dense(vocab_size, name="softmax")(h)
    return keras.Model(ids, logits, name=f"lm_{model}")


def reset_memory(model):
    """Set every stateful RNN of `model` to its cell's initial state.

    Keras' `reset_state()` zeroes states; the RMC's memory starts at the
    identity, so use this between epochs or documents instead.
    """
    for layer in model.layers:
        if isinstance(layer, keras.layers.RNN) and layer.stateful and layer.states is not None:
            batch = layer.states[0].shape[0]
            initial = layer.get_initial_state(batch)
            for variable, value in zip(layer.states, initial):
                variable.assign(ops.cast(value, variable.dtype))


class ResetMemory(keras.callbacks.Callback):
    """Start every epoch and every evaluation from the initial memory."""

    def on_epoch_begin(self, epoch, logs=None):
        reset_memory(self.model)

    def on_test_begin(self, logs=None):
        reset_memory(self.model)


class Perplexity(keras.callbacks.Callback):
    """Adds `perplexity` and `val_perplexity` (exp of the mean cross-entropy) to the logs."""

    def on_epoch_end(self, epoch, logs=None):
        import math

        if logs is None:
            return
        for key in ("loss", "val_loss"):
            if key in logs:
                logs[key.replace("loss", "perplexity")] = math.exp(min(float(logs[key]), 50.0))
