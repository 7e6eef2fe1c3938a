"""Task models built around the memory layers, one file per task."""

from keras_relmem.layers.reversible_embedding import ReversibleEmbedding
from keras_relmem.models.babi_qa import build_babi_model
from keras_relmem.models.entnet_qa import EntNetQA
from keras_relmem.models.language_model import build_language_model
from keras_relmem.models.memo import MEMOClassifier
from keras_relmem.models.seq2seq import ReadThenWrite

__all__ = ["EntNetQA", "MEMOClassifier", "ReadThenWrite", "ReversibleEmbedding", "build_babi_model",
           "build_language_model"]
