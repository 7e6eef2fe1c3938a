"""A tied input embedding and output softmax with the softmax's own bias (language models)."""

import keras
from keras import ops


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

    Call arguments:
        inputs: token ids, or with `reverse=True` vectors `(..., output_dim)`.
        reverse: bool; False embeds ids, True maps vectors back to logits over
            the vocabulary (plus the reverse bias).

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
