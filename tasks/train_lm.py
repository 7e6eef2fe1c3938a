#!/usr/bin/env python
"""Train a next-word language model (RMC or LSTM) on PTB or WikiText (see --help; `relmem-train-lm`)."""

import sys

from keras_relmem import cli

if __name__ == "__main__":
    sys.exit(cli.train_lm())
