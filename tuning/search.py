#!/usr/bin/env python
"""KerasTuner search over the memory models (see --help)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem.tasks.search import main  # noqa: E402

if __name__ == "__main__":
    main()
