"""Query a TF Serving endpoint: see `keras_relmem/serving/client.py` and the README."""

import sys

from keras_relmem.serving.client import main

if __name__ == "__main__":
    sys.exit(main())
