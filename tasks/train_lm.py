#!/usr/bin/env python
"""Train a next-word language model (RMC or LSTM) on PTB or WikiText (see --help; `relmem-train-lm`)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.train_lm())
