"""Task models built around the memory layers, one file per task."""

from keras_relmem.models.babi_qa import build_babi_model

__all__ = ["build_babi_model"]
