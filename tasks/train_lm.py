#!/usr/bin/env python
"""Train a next-word language model (RMC or LSTM) on PTB or WikiText (see --help)."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem.tasks.lm import main  # noqa: E402

if __name__ == "__main__":
    main()
