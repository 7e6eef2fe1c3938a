"""Test utilities (as `keras.testing`): what the test suite and the benches share, not the library's API.

- `keras_relmem.testing.soak`: the catalogue of bad serving requests and the
  clients that send them, run by the serving tests and `bench.serving.soak`.
"""
