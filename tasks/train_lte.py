#!/usr/bin/env python
"""Learning to Execute, the RMC paper's Table 1 (see --help; `relmem-train-lte`)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.train_lte())
