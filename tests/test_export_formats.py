"""Every layer, in a model, exports beyond SavedModel: ONNX and LiteRT, with their outputs checked.

`model.export(path, format="onnx")` (tf2onnx) runs in onnxruntime, and `format="litert"` with a fixed input
signature runs in the plain LiteRT interpreter, without the Flex delegate: the recurrent models with
`unroll=True` over their fixed sequence length, which leaves builtin ops only (a `keras.layers.RNN` loop is a
TensorList while loop, which needs Flex). MEMO's adaptive loop converts to a builtin WHILE. Each must give
Keras' outputs within 1e-5 (docs/layers.md, "Export beyond SavedModel"). TensorFlow only: both converters read
a TensorFlow graph.
"""

import keras
import numpy as np
import pytest

import keras_relmem as kr
from keras_relmem.models.memo import MEMOClassifier

if keras.backend.backend() != "tensorflow":
    pytest.skip("ONNX and LiteRT export read a TensorFlow graph", allow_module_level=True)
onnxruntime = pytest.importorskip("onnxruntime", reason="the [export] extra")
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="the [export] extra")
pytest.importorskip("tf2onnx", reason="the [export] extra")

T, D = 5, 8
RNG = np.random.default_rng(0)
SEQUENCE = RNG.normal(size=(3, T, D)).astype("float32")


def rnn_model(layer):
    inputs = keras.Input((T, D))
    return keras.Model(inputs, layer(inputs)), SEQUENCE


def entnet_model():
    story, query = keras.Input((4, 3), dtype="int32"), keras.Input((3,), dtype="int32")
    embed = keras.layers.Embedding(12, D)
    memory = keras.layers.RNN(kr.EntNetCell(num_blocks=3, units=D), unroll=True)(kr.EntNetEncoder()(embed(story)))
    logits = kr.EntNetReadout(num_outputs=5)([memory, kr.EntNetEncoder()(embed(query))])
    ids = {"story": RNG.integers(1, 12, (3, 4, 3)).astype("int32"),
           "query": RNG.integers(1, 12, (3, 3)).astype("int32")}
    return keras.Model({"story": story, "query": query}, logits), ids


def memo_model(halting, vocab_size=20):
    model = MEMOClassifier(3, vocab_size=vocab_size, embedding_dim=8, key_size=4, num_heads=2, max_hops=3,
                           max_time=6 if vocab_size else 0, halting=halting, seed=0)
    if vocab_size:
        x = {"facts": RNG.integers(1, vocab_size, (3, 6, 4)).astype("int32"),
             "query": RNG.integers(1, vocab_size, (3, 3)).astype("int32")}
        x["facts"][0, 4:] = 0  # a shorter story: padding facts
    else:  # vectors (paired associative inference)
        x = {"facts": RNG.normal(size=(3, 6, 2, 5)).astype("float32"),
             "query": RNG.normal(size=(3, 3, 5)).astype("float32")}
    model(x)  # a subclassed model exports what it was called with
    return model, x


MODELS = {
    "rmc_cell": lambda: rnn_model(keras.layers.RNN(kr.RelationalMemoryCell(mem_slots=2, head_size=4, num_heads=2),
                                                   unroll=True)),
    "relational_memory": lambda: rnn_model(kr.RelationalMemory(mem_slots=2, head_size=4, num_heads=2, unroll=True)),
    "entnet": entnet_model,
    "memo_reinforce": lambda: memo_model(kr.HaltingPolicy(gru_units=8, mlp_units=4, bias_init=0.0)),
    "memo_act": lambda: memo_model(kr.ACTHalting(gru_units=8, mlp_units=4, bias_init=-0.5)),
    "memo_fixed_hops": lambda: memo_model(None),
    "memo_vectors": lambda: memo_model("reinforce", vocab_size=None),
}


def as_feed(names, x):
    """The arrays of `x` under the exported inputs' `names` (a dict's keys in sorted order, as TensorFlow
    flattens it)."""
    arrays = [x[key] for key in sorted(x)] if isinstance(x, dict) else [x]
    assert len(names) == len(arrays)
    return dict(zip(names, arrays))


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    model, x = MODELS[request.param]()
    return model, x, keras.ops.convert_to_numpy(model(x)), tmp_path_factory.mktemp(request.param)


def test_onnx_matches_keras_in_onnxruntime(exported):
    model, x, expected, folder = exported
    model.export(str(folder / "model.onnx"), format="onnx", verbose=False)
    session = onnxruntime.InferenceSession(str(folder / "model.onnx"))
    inputs = session.get_inputs()
    arrays = as_feed([i.name for i in inputs], x)
    for spec in inputs:  # word ids stay integers: onnxruntime refuses ids fed to a float input
        assert spec.type == {"int32": "tensor(int32)", "float32": "tensor(float)"}[str(arrays[spec.name].dtype)]
    (outputs,) = session.run(None, arrays)
    np.testing.assert_allclose(outputs, expected, atol=1e-5, rtol=0)


def fixed_signature(x):
    """The input signature of `x`'s own shapes: LiteRT models take fixed shapes (with a dynamic batch the
    converted EntNet fails to prepare in the interpreter)."""
    spec = lambda array: keras.InputSpec(shape=array.shape, dtype=str(array.dtype))  # noqa: E731
    return [{k: spec(v) for k, v in x.items()} if isinstance(x, dict) else spec(x)]


def test_litert_runs_without_the_flex_delegate_and_matches_keras(exported):
    model, x, expected, folder = exported
    model.export(str(folder / "model.tflite"), format="litert", verbose=False, input_signature=fixed_signature(x))
    interpreter = litert.Interpreter(model_path=str(folder / "model.tflite"))
    (signature,) = interpreter.get_signature_list().values()
    runner = interpreter.get_signature_runner()
    (outputs,) = runner(**as_feed(signature["inputs"], x)).values()
    np.testing.assert_allclose(outputs, expected, atol=1e-5, rtol=0)
