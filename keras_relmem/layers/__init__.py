"""The memory layers (backend-agnostic: their math is written in `keras.ops`)."""

from keras_relmem.layers.entnet import EntNetCell, EntNetEncoder, EntNetReadout
from keras_relmem.layers.memo import MEMO, HaltingPolicy
from keras_relmem.layers.relational_memory import RelationalMemory, RelationalMemoryCell

__all__ = [
    "EntNetCell",
    "EntNetEncoder",
    "EntNetReadout",
    "HaltingPolicy",
    "MEMO",
    "RelationalMemory",
    "RelationalMemoryCell",
]
