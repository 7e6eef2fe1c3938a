#!/usr/bin/env python
"""Train a memory model on bAbI question answering (see --help; installed as `relmem-train-babi`).

With no arguments: EntNet on task 1 of bAbI en, about a minute on 2 CPU cores.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.train_babi())
