#!/usr/bin/env python
"""Train a memory model on bAbI question answering (see --help).

With no arguments: EntNet on task 1 of bAbI en, about a minute on 2 CPU cores.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem.tasks.babi import main  # noqa: E402

if __name__ == "__main__":
    main()
