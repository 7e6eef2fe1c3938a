#!/usr/bin/env python
"""The RMC paper's Nth Farthest task, RMC vs LSTM (see --help; `relmem-train-nth-farthest`)."""

import sys

from keras_relmem import cli

if __name__ == "__main__":
    sys.exit(cli.train_nth_farthest())
