"""Word-level language models: embedding, a recurrent core, tied or untied softmax."""

import keras
from keras import ops

from keras_relmem.layers.reversible_embedding import ReversibleEmbedding
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
    "lstm": {"embedding_dim": 192, "units": 1000, "tied": True, "num_layers": 1, "dropout": 0.0, "init_scale": None},
}


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
    transposed_kernels=None,
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
            weights and outputs; False is kept for `bench/lm/speed.py`.
        transposed_kernels: `RelationalMemory`'s argument (None: its
            backend default); kept for `bench/lm/speed.py`.
        **hparams: overrides of `DEFAULTS[model]`; `tied=True` shares the
            embedding matrix with the softmax (with a linear projection from
            the core's output to `embedding_dim` when their sizes differ).
            The LSTM also takes Zaremba et al.'s (2014) settings:
            `num_layers` stacked LSTMs, `dropout` on the non-recurrent
            connections (the embedding, between layers, before the softmax)
            and `init_scale` (every weight matrix uniform in `[-s, s]`;
            None keeps Keras' initializers).

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
    uniform = _uniform_initializers(config.get("init_scale"))
    embedding = ReversibleEmbedding(
        vocab_size, config["embedding_dim"], use_bias=config["tied"], name="embedding",
        **uniform("embeddings_initializer"),
    )
    h = embedding(ids)
    if model == "rmc":
        extra = {"transposed_kernels": transposed_kernels} if precompute_inputs else {}
        h = rmc_layer(
            config, precompute_inputs, return_sequences=True, stateful=stateful, name="core", **extra
        )(h)
    else:
        for i in range(config["num_layers"]):
            h = _dropout(h, config["dropout"])
            h = keras.layers.LSTM(
                config["units"], return_sequences=True, stateful=stateful,
                name="core" if i == 0 else f"core_{i + 1}",
                **uniform("kernel_initializer", "recurrent_initializer"),
            )(h)
        h = _dropout(h, config["dropout"])
    if config["tied"]:
        if h.shape[-1] != config["embedding_dim"]:
            h = keras.layers.Dense(config["embedding_dim"], name="projection")(h)
        logits = embedding(h, reverse=True)
    else:
        logits = keras.layers.Dense(vocab_size, name="softmax", **uniform("kernel_initializer"))(h)
    return keras.Model(ids, logits, name=f"lm_{model}")


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
