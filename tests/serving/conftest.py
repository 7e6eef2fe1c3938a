"""Tiny exported models and a running server on 127.0.0.1 for the serving tests."""

import contextlib
import os
import pathlib
import threading

import grpc
import numpy as np
import pytest

from keras_relmem import export
from keras_relmem.data import babi
from keras_relmem.data.vocab import Vocabulary
from keras_relmem.models import babi_qa, language_model
from keras_relmem.serving.errors import ServingError

needs_data = pytest.mark.skipif(
    not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA (../shared/data)"
)
LM_WORDS = "<eos> the company said it will sell shares of its stock to a new investor group".split()


class FakeServable:
    """Stands in for a loaded version with one input `x`: `y = x + version`, recording each call's rows;
    negative inputs are refused with INVALID_ARGUMENT. A `ModelManager(servable_factory=...)`."""

    def __init__(self, name, version, path):
        self.name, self.version = name, version
        self.input_specs = {"serving_default": {"x": None}}
        self.rows, self.lock = [], threading.Lock()

    def signature(self, signature_name):
        return signature_name or "serving_default", None

    def check_outputs(self, key, output_filter):
        pass

    def check_inputs(self, key, inputs, exact_dtypes=True):
        return {alias: np.asarray(value, "float32") for alias, value in inputs.items()}

    def call(self, key, checked, output_filter=(), deadline=None):
        with self.lock:
            self.rows.append(len(checked["x"]))
        if (checked["x"] < 0).any():
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "negative input")
        return {"y": checked["x"] + self.version}


@contextlib.contextmanager
def batch_rows(servable):
    """The rows of each call of `servable.call` while the block runs (a list, filled as calls come): batching
    merged requests when a call has more rows than one request."""
    rows, call = [], servable.call

    def recording(key, checked, output_filter=()):
        rows.append(len(next(iter(checked.values()))))
        return call(key, checked, output_filter)

    servable.call = recording
    try:
        yield rows
    finally:
        del servable.call


class Exports:
    """Where the models were exported and what is needed to make new versions."""

    def __init__(self, base, data, babi_model, lm_model, lm_vocab):
        self.base = base
        self.data = data
        self.babi_model = babi_model
        self.lm_model = lm_model
        self.lm_vocab = lm_vocab

    def new_babi_version(self, base=None, version=None, seed=1):
        """Export the bAbI model again with perturbed weights (so its answers differ)."""
        rng = np.random.default_rng(seed)
        weights = self.babi_model.get_weights()
        self.babi_model.set_weights([w + rng.normal(0, 0.5, w.shape).astype(w.dtype) for w in weights])
        try:
            return export.export_babi(self.babi_model, self.data, base or self.base, name="babi", version=version)
        finally:
            self.babi_model.set_weights(weights)


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    if not os.environ.get("KERAS_RELMEM_DATA"):
        pytest.skip("needs KERAS_RELMEM_DATA (../shared/data)")
    base = tmp_path_factory.mktemp("exports")
    data = babi.load_babi([1])
    babi_model = babi_qa.build_babi_model(
        "entnet", len(data.vocab), len(data.answer_vocab), data.story_length,
        data.sentence_length, data.query_length, embedding_dim=16,
    )
    export.export_babi(babi_model, data, base, name="babi")
    lm_vocab = Vocabulary(LM_WORDS, pad_token=None, oov_token="<unk>")
    lm_model = language_model.build_language_model("lstm", len(lm_vocab), embedding_dim=8, units=8)
    export.export_lm(lm_model, lm_vocab, base, name="lm", top_k=3)
    return Exports(pathlib.Path(base), data, babi_model, lm_model, lm_vocab)


def model_config_text(base, names=("babi", "lm")):
    entries = "".join(
        f'  config {{ name: "{n}" base_path: "{pathlib.Path(base) / n}" model_platform: "tensorflow" }}\n'
        for n in names
    )
    return "model_config_list {\n" + entries + "}\n"


def configs_for(base, names=("babi", "lm")):
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = text_format.Parse(model_config_text(base, names), model_server_config_pb2.ModelServerConfig())
    return list(config.model_config_list.config)


@pytest.fixture(scope="module")
def server(exports):
    """The server (gRPC and no REST) on the test exports."""
    from keras_relmem.serving.server import ModelServer

    running = ModelServer(configs_for(exports.base), port=0, rest_api_port=-1, poll_seconds=0,
                          max_request_bytes=1 << 20).start()
    yield running
    running.stop()
