#!/usr/bin/env python
"""The RMC paper's Nth Farthest task, RMC vs LSTM (see --help; `relmem-train-nth-farthest`)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.train_nth_farthest())
