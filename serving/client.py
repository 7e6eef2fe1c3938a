#!/usr/bin/env python
"""Query a TF Serving endpoint (see --help; `relmem-client`)."""

import sys

from keras_relmem import cli

if __name__ == "__main__":
    sys.exit(cli.client())
