#!/usr/bin/env python
"""Answer a story with a trained bAbI model and draw its memory (see --help; `relmem-explain`)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.explain())
