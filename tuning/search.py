#!/usr/bin/env python
"""KerasTuner search over the memory models (see --help; `relmem-search`)."""

import sys

from keras_relmem import cli

if __name__ == "__main__":
    sys.exit(cli.search())
