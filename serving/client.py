#!/usr/bin/env python
"""Query a TF Serving endpoint (see --help; `relmem-client`)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_relmem import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli.client())
