"""A TF-Serving-compatible model server and client for keras-relmem's exports.

Needs the `serving` extra (`pip install "keras-relmem[serving]"`):
`tensorflow-serving-api` for the official protos and `grpcio-health-checking`.

- `server`: `ModelServer` and the `tensorflow_model_server`-style command line.
- `client`: `ServingClient` and its command line.
"""
