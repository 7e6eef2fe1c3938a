"""The memory layers (backend-agnostic: their math is written in `keras.ops`)."""

from keras_relmem.layers.entnet import EntNetCell, EntNetEncoder, EntNetReadout
from keras_relmem.layers.halting import ACTHalting, HaltingPolicy
from keras_relmem.layers.memo import MEMO
from keras_relmem.layers.relational_memory import RelationalMemory, RelationalMemoryCell
from keras_relmem.layers.reversible_embedding import ReversibleEmbedding

__all__ = [
    "ACTHalting",
    "EntNetCell",
    "EntNetEncoder",
    "EntNetReadout",
    "HaltingPolicy",
    "MEMO",
    "RelationalMemory",
    "RelationalMemoryCell",
    "ReversibleEmbedding",
]
