"""The console scripts: `relmem-train-babi`, `relmem-serve` and the rest (see the README).

Each command imports TensorFlow with its start-up noise filtered out of stderr
(`keras_relmem._startup`), then runs its `main()`. The scripts under `tasks/`,
`serving/` and `tuning/` are thin wrappers around the same functions.

Example:
    >>> from keras_relmem import cli
    >>> cli.train_babi.__doc__.split(":")[0]
    '`relmem-train-babi`'
"""

import importlib

from keras_relmem._startup import quiet_tensorflow


def _start_tensorflow():
    with quiet_tensorflow():
        import tensorflow as tf

        tf.config.list_physical_devices()  # where cuInit is called, and complains


def _run(module):
    """Run `module.main()`; its return value is the exit status when it is one (the servers')."""
    _start_tensorflow()
    status = importlib.import_module(module).main()
    return status if isinstance(status, int) else 0


def train_babi():
    """`relmem-train-babi`: bAbI question answering (EntNet, RMC, LSTM or MEMO)."""
    return _run("keras_relmem.tasks.babi")


def train_lm():
    """`relmem-train-lm`: next-word language modelling on PTB or WikiText."""
    return _run("keras_relmem.tasks.lm")


def train_nth_farthest():
    """`relmem-train-nth-farthest`: the RMC paper's Nth Farthest task."""
    return _run("keras_relmem.tasks.nth_farthest")


def explain():
    """`relmem-explain`: a trained bAbI model's answer and a picture of its memory."""
    return _run("keras_relmem.tasks.explain")


def search():
    """`relmem-search`: a KerasTuner search over the memory models."""
    return _run("keras_relmem.tasks.search")


def serve():
    """`relmem-serve`: the TF-Serving-compatible gRPC and REST model server."""
    return _run("keras_relmem.serving.server")


def client():
    """`relmem-client`: query a TF Serving endpoint (ours or the official one)."""
    return _run("keras_relmem.serving.client")
