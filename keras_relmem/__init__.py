"""keras-relmem: memory architectures from the literature as Keras 3 layers.

- `RelationalMemoryCell`: the Relational Memory Core (Santoro et al. 2018);
  `RelationalMemory` runs it over a sequence with the input-only terms
  computed before the recurrence (faster than `keras.layers.RNN(cell)`).
- `EntNetCell`, `EntNetEncoder`, `EntNetReadout`: the Recurrent Entity Network
  (Henaff et al. 2017).
- `MEMO`: multi-head recurrent attention over separate facts with adaptive
  hops (Banino et al. 2020).
"""

__version__ = "0.1.0"

from keras_relmem import models  # noqa: E402,F401  (registers the task models for .keras loading)
from keras_relmem.layers import (
    MEMO,  # noqa: E402
    EntNetCell,  # noqa: E402
    EntNetEncoder,  # noqa: E402
    EntNetReadout,  # noqa: E402
    RelationalMemory,  # noqa: E402
    RelationalMemoryCell,  # noqa: E402
    ReversibleEmbedding,  # noqa: E402
)

__all__ = [
    "EntNetCell",
    "EntNetEncoder",
    "EntNetReadout",
    "MEMO",
    "RelationalMemory",
    "RelationalMemoryCell",
    "ReversibleEmbedding",
    "__version__",
]
