"""A TF-Serving-compatible model server: see `keras_relmem/serving/server.py` and the README."""

import sys

from keras_relmem.serving.server import main

if __name__ == "__main__":
    sys.exit(main())
