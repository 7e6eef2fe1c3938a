#!/usr/bin/env python
"""A TF-Serving-compatible model server (see --help and docs/serving.md; `relmem-serve`)."""

import sys

from keras_relmem import cli

if __name__ == "__main__":
    sys.exit(cli.serve())
