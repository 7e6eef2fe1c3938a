"""keras-relmem: memory architectures from the literature as Keras 3 layers.

- `RelationalMemoryCell`: the Relational Memory Core (Santoro et al. 2018);
  `RelationalMemory` runs it over a sequence with the input-only terms
  computed before the recurrence (faster than `keras.layers.RNN(cell)`).
- `EntNetCell`, `EntNetEncoder`, `EntNetReadout`: the Recurrent Entity Network
  (Henaff et al. 2017).
- `MEMO`: multi-head recurrent attention over separate facts with adaptive
  hops (Banino et al. 2020).

Training a task: `kr.train(config, workdir=...)` trains a task configuration
(`kr.configs`), such as a named recipe (`kr.recipes.get("memo_babi_joint")`):

```python
import dataclasses, keras_relmem as kr
config = dataclasses.replace(kr.recipes.get("memo_babi_joint"), seed=3)
results = kr.train(config, workdir="runs/memo_seed3")
```
"""

__version__ = "2.0.0"

import contextlib  # noqa: E402
import sys  # noqa: E402

from keras_relmem._startup import quiet_commands, quiet_tensorflow  # noqa: E402

quiet_commands()

# TensorFlow's pre-logging start-up lines ("Could not find cuda drivers", the
# oneDNN note) are dropped when this import is what first imports it; every
# other line it prints is kept (TF_CPP_MIN_LOG_LEVEL=0 keeps them all).
_FIRST_IMPORT = "tensorflow" not in sys.modules
with quiet_tensorflow() if _FIRST_IMPORT else contextlib.nullcontext():
    from keras_relmem import (
        callbacks,  # noqa: F401  (MEMO's training controls)
        configs,
        models,  # noqa: F401  (registers the task models for .keras loading)
        recipes,
        tasks,  # noqa: F401  (registers the task families with kr.train)
    )
    from keras_relmem.layers import (
        MEMO,
        ACTHalting,
        EntNetCell,
        EntNetEncoder,
        EntNetReadout,
        HaltingPolicy,
        RelationalMemory,
        RelationalMemoryCell,
        ReversibleEmbedding,
    )
    from keras_relmem.runs import train

    if _FIRST_IMPORT and "tensorflow" in sys.modules:
        # The first device query calls cuInit, which on a machine without a GPU logs "failed call to cuInit" as an
        # error: drawn out here, inside the filter, for the library's users as the commands do at their start.
        # Listing devices runs no op and leaves the runtime's settings (threads, visible devices) open.
        sys.modules["tensorflow"].config.list_physical_devices()

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
    "__version__",
    "configs",
    "recipes",
    "train",
]
