#!/usr/bin/env python
"""KerasTuner search over the memory models (see --help; `relmem-search`)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.search())
