#!/usr/bin/env python
"""Answer a story with a trained bAbI model and draw its memory (see --help; `relmem-explain`)."""

import sys

from keras_relmem import cli

if __name__ == "__main__":
    sys.exit(cli.explain())
