"""The console scripts: `relmem-train-babi`, `relmem-serve` and the rest (see the README).

Each command imports TensorFlow with its start-up noise filtered out of stderr
(`keras_relmem._startup`), then runs its command function. The training commands only parse flags
into a config and call `kr.train` (`keras_relmem.commands`). The scripts under `tasks/`, `serving/` and
`tuning/` are thin wrappers around the same functions.

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

        # --threads before anything runs: TensorFlow fixes its thread pools at its first op
        threads = _flag("--threads")
        if threads and threads.isdigit() and int(threads):
            tf.config.threading.set_inter_op_parallelism_threads(int(threads))
            tf.config.threading.set_intra_op_parallelism_threads(int(threads))
        tf.config.list_physical_devices()  # where cuInit is called, and complains
        # oneDNN's "supports DT_<type> only on platforms with AVX-512" comes once per process, at the first graph
        # op it would take but cannot (a 2x2 boolean transpose is one): drawn out here, inside the filter. Not
        # for a multi-worker or TPU run, whose strategy must be set up before any op runs.
        if not _distributed():
            tf.function(lambda x: tf.transpose(x > 0))(tf.ones((2, 2)))


def _flags(name, argv=None):
    """Every value of flag `name` in the command's arguments (`--name V` or `--name=V`)."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    return [a.split("=", 1)[1] for a in argv if a.startswith(name + "=")] + \
        [b for a, b in zip(argv, argv[1:]) if a == name]


def _flag(name, argv=None):
    """The value of flag `name` in the command's arguments, the last given (as argparse takes it), or None."""
    values = _flags(name, argv)
    return values[-1] if values else None


def _distributed(argv=None):
    """Whether this command will set up a multi-worker or TPU strategy (`--strategy`, TF_CONFIG, TPU_NAME)."""
    import os

    return (any(s in ("multiworker", "tpu") for s in _flags("--strategy", argv))
            or "TF_CONFIG" in os.environ or "TPU_NAME" in os.environ)


# The modules that the extras bring, by the extra that brings them (pyproject.toml).
EXTRA_OF = {"grpc_health": "serving", "aiohttp": "serving", "prometheus_client": "serving",
            "keras_tuner": "tuning", "sklearn": "tuning", "matplotlib": "viz"}


def _run(module, function="main"):
    """Run `module.function()`; its return value is the exit status when it is one (the servers').

    A module that one of the extras brings and is not installed is a one-line error naming the extra.
    """
    _start_tensorflow()
    try:
        status = getattr(importlib.import_module(module), function)()
    except ModuleNotFoundError as error:
        extra = EXTRA_OF.get((error.name or "").split(".")[0])
        if extra is None:
            raise
        raise SystemExit(f"error: this command needs the [{extra}] extra ({error.name} is not installed): "
                         f'pip install "keras-relmem[{extra}]"') from None
    return status if isinstance(status, int) else 0


def train_babi():
    """`relmem-train-babi`: bAbI question answering (EntNet, RMC, LSTM or MEMO)."""
    return _run("keras_relmem.commands.train", "babi")


def train_lm():
    """`relmem-train-lm`: next-word language modelling on PTB or WikiText."""
    return _run("keras_relmem.commands.train", "lm")


def train_nth_farthest():
    """`relmem-train-nth-farthest`: the RMC paper's Nth Farthest task."""
    return _run("keras_relmem.commands.train", "nth_farthest")


def train_lte():
    """`relmem-train-lte`: Learning to Execute (programs and memorization), the RMC paper's Table 1."""
    return _run("keras_relmem.commands.train", "lte")


def train_memo():
    """`relmem-train-memo`: MEMO on paired associative inference or shortest paths (Banino et al. 2020)."""
    return _run("keras_relmem.commands.train", "memo")


def explain():
    """`relmem-explain`: a trained bAbI model's answer and a picture of its memory."""
    return _run("keras_relmem.commands.explain")


def search():
    """`relmem-search`: a KerasTuner search over the memory models."""
    return _run("keras_relmem.commands.search")


def serve():
    """`relmem-serve`: the TF-Serving-compatible gRPC and REST model server."""
    return _run("keras_relmem.serving.server")


def client():
    """`relmem-client`: query a TF Serving endpoint (ours or the official one)."""
    return _run("keras_relmem.serving.client")
