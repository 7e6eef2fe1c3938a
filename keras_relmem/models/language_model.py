"""Word-level language models: embedding, a recurrent core, tied or untied softmax."""

import keras
from keras import ops

from keras_relmem.layers.reversible_embedding import ReversibleEmbedding
from keras_relmem.models.babi_qa import rmc_layer, settings_of


def build_language_model(model, vocab_size, batch_size=None, sequence_length=None, stateful=False,
                         precompute_inputs=True, transposed_kernels=None, **settings):
    """A next-word model: `(batch, time)` ids -> `(batch, time, vocab)` logits.

    Args:
        model: `"rmc"` (`rmc_lm`: a RelationalMemoryCell core) or `"lstm"` (`lstm_lm`: Keras LSTMs) (`LM_MODELS`).
        vocab_size: int.
        batch_size: int, required with `stateful=True` (truncated BPTT).
        sequence_length: int or None (any length).
        stateful: carry the recurrent state from batch to batch.
        precompute_inputs: for the RMC, use `RelationalMemory` (default; the
            input-only terms of all steps computed before the recurrence)
            rather than `keras.layers.RNN(RelationalMemoryCell(...))`. Same
            weights and outputs; False is kept for `bench/lm/speed.py`.
        transposed_kernels: `RelationalMemory`'s argument (None: its
            backend default); kept for `bench/lm/speed.py`.
        **settings: the model's settings under its builder's argument names (`lm_defaults(model)` lists them with
            their defaults; None leaves one at its default). `tied=True` shares the embedding matrix with the
            softmax (with a linear projection from the core's output to `embedding_dim` when their sizes
            differ). The LSTM also takes Zaremba et al.'s (2014) settings: `num_layers` stacked LSTMs, `dropout`
            on the non-recurrent connections (the embedding, between layers, before the softmax) and
            `init_scale` (every weight matrix uniform in `[-s, s]`; None keeps Keras' initializers).

    Returns:
        An uncompiled `keras.Model` named `lm_<model>`.

    Example:

    ```python
    >>> model = build_language_model("rmc", 10000, batch_size=64, stateful=True)
    >>> tuple(model.output.shape)
    (64, None, 10000)

    ```
    """
    known = lm_defaults(model)
    settings = {name: value for name, value in settings.items() if value is not None}
    unknown = set(settings) - set(known)
    if unknown:
        raise ValueError(f"Unknown hyper-parameters for {model}: {sorted(unknown)}; known: {sorted(known)}.")
    if stateful and not batch_size:
        raise ValueError("stateful=True needs a fixed batch_size.")
    ids = keras.Input((sequence_length,), batch_size=batch_size, dtype="int32", name="ids")
    core = {"stateful": stateful, "precompute_inputs": precompute_inputs, "transposed_kernels": transposed_kernels}
    return keras.Model(ids, LM_MODELS[model](ids, vocab_size, core, **settings), name=f"lm_{model}")


# The RMC's defaults are the PyTorch RMC port's PTB configuration (the RMC paper's LM set-up scaled to a CPU: one
# memory slot with a large head); the LSTM baseline has a similar number of parameters.
def rmc_lm(ids, vocab_size, core, embedding_dim=192, tied=True, mem_slots=1, head_size=192, num_heads=4,
           key_size=64, attention_mlp_layers=3, num_blocks=1, gate_style="unit"):
    """The RMC language model's logits for `ids`: embedding, an RMC core, the (tied) softmax."""
    embedding = ReversibleEmbedding(vocab_size, embedding_dim, use_bias=tied, name="embedding")
    precompute = core["precompute_inputs"]
    extra = {"transposed_kernels": core["transposed_kernels"]} if precompute else {}
    h = rmc_layer(mem_slots, head_size, precompute, num_heads=num_heads, key_size=key_size,
                  attention_mlp_layers=attention_mlp_layers, num_blocks=num_blocks, gate_style=gate_style,
                  return_sequences=True, stateful=core["stateful"], name="core", **extra)(embedding(ids))
    return _softmax(h, embedding, vocab_size, embedding_dim, tied, lambda *names: {})


def lstm_lm(ids, vocab_size, core, embedding_dim=192, tied=True, units=1000, num_layers=1, dropout=0.0,
            init_scale=None):
    """The LSTM language model's logits for `ids`: embedding, `num_layers` LSTMs, the (tied) softmax."""
    uniform = _uniform_initializers(init_scale)
    embedding = ReversibleEmbedding(vocab_size, embedding_dim, use_bias=tied, name="embedding",
                                    **uniform("embeddings_initializer"))
    h = embedding(ids)
    for i in range(num_layers):
        h = _dropout(h, dropout)
        h = keras.layers.LSTM(units, return_sequences=True, stateful=core["stateful"],
                              name="core" if i == 0 else f"core_{i + 1}",
                              **uniform("kernel_initializer", "recurrent_initializer"))(h)
    return _softmax(_dropout(h, dropout), embedding, vocab_size, embedding_dim, tied, uniform)


def _softmax(h, embedding, vocab_size, embedding_dim, tied, uniform):
    if tied:
        if h.shape[-1] != embedding_dim:
            h = keras.layers.Dense(embedding_dim, name="projection")(h)
        return embedding(h, reverse=True)
    return keras.layers.Dense(vocab_size, name="softmax", **uniform("kernel_initializer"))(h)


LM_MODELS = {"rmc": rmc_lm, "lstm": lstm_lm}


def lm_defaults(model):
    """`{setting: default}` of language model `model` (from its builder's signature)."""
    if model not in LM_MODELS:
        raise ValueError(f"model must be one of {sorted(LM_MODELS)}; received {model!r}.")
    return {k: v for k, v in settings_of(LM_MODELS[model]).items() if k != "core"}


def _uniform_initializers(scale):
    """`uniform(*arguments)`: {argument: a fresh U(-scale, scale) initializer} (nothing when scale is None).

    A fresh instance per weight: Keras 3 fixes an unseeded initializer's seed
    when it is created, so one instance would give same-shaped weights
    identical values.
    """
    def uniform(*arguments):
        if scale is None:
            return {}
        return {name: keras.initializers.RandomUniform(-scale, scale) for name in arguments}

    return uniform


def _dropout(x, rate):
    return keras.layers.Dropout(rate)(x) if rate else x


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
