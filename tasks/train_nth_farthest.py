#!/usr/bin/env python
"""The RMC paper's Nth Farthest task, RMC vs LSTM (see --help)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem.tasks.nth_farthest import main  # noqa: E402

if __name__ == "__main__":
    main()
