"""A new version with the served version's program runs on its graph functions, with its own variables.

The versions are exported by `reuse_exporter.py`, each in a process of its
own as a retrained model is; the expected answers are computed here from the
exporter's formula, so a version answering with another version's weights,
vocabulary or program fails.
"""

import concurrent.futures
import gc
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import message
from tensorflow.core.framework import function_pb2, node_def_pb2, op_def_pb2, tensor_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from tensorflow_serving.apis import predict_pb2

from keras_relmem.serving import reuse, saved_model_file
from keras_relmem.serving.manager import ModelManager
from keras_relmem.serving.servable import Servable
from tests.serving.conftest import configs_for, needs_data
from tests.serving.reuse_exporter import OFFSET

EXPORTER = pathlib.Path(__file__).with_name("reuse_exporter.py")
WORDS = np.array([b"a", b"c", b"zebra", b"b"], dtype=object)
VERSIONS = {  # version: (scale, vocabulary, variant)
    1: (1.0, ["a", "b", "c"], "plain"),
    2: (2.0, ["a", "b", "c"], "plain"),      # retrained: only the weights differ
    3: (3.0, ["c", "b", "a"], "plain"),      # another vocabulary
    4: (4.0, ["a", "b", "c"], "doubled"),    # another program
    6: (1.0, ["a", "b", "c"], "mutable"),
    7: (2.0, ["a", "b", "c"], "mutable"),    # a checkpointed table with other contents
}


def expected(version, words=WORDS):
    """The exporter's `score` and `extra`, computed in NumPy from its docstring."""
    scale, vocabulary, variant = VERSIONS[version]
    ids = np.array([vocabulary.index(w.decode()) if w.decode() in vocabulary else -1 for w in words])
    w, b = scale * np.array([1.0, 2.0, 3.0]), scale
    factor = 3.0 if variant == "doubled" else 2.0
    score = np.where(ids >= 0, factor * w[np.maximum(ids, 0)] + b, b) + OFFSET
    extra = np.where([word == b"a" for word in words], 10.0 * scale, -1.0)
    return ids, score, extra


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    base = tmp_path_factory.mktemp("reuse")
    processes = []
    for version, (scale, vocabulary, variant) in VERSIONS.items():
        processes.append(subprocess.Popen(
            [sys.executable, str(EXPORTER), str(base / "all" / str(version)), "--scale", str(scale),
             "--words", *vocabulary, "--variant", variant], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr.decode()[-2000:]
    return base / "all"


def answer(servable):
    outputs = servable.call("serving_default", servable.check_inputs("serving_default", {"word": WORDS}))
    return outputs


def check(servable, version):
    ids, score, extra = expected(version)
    outputs = answer(servable)
    np.testing.assert_array_equal(outputs["id"], ids)
    np.testing.assert_allclose(outputs["score"], score, rtol=1e-6)
    if "extra" in outputs:
        np.testing.assert_allclose(outputs["extra"], extra)


def test_a_retrained_version_runs_on_the_served_functions_with_its_own_weights(versions):
    first = Servable("m", 1, versions / "1")
    second = Servable("m", 2, versions / "2", donors=[first])
    assert first.reused_version is None and second.reused_version == 1
    check(second, 2)
    check(first, 1)  # the served version still answers with its own weights
    assert second.warm_up() == 1


def test_a_retrained_version_answers_in_graph_with_its_own_weights(versions):
    first = Servable("m", 1, versions / "1")
    second = Servable("m", 2, versions / "2", donors=[first], load_in_full=False)
    request = predict_pb2.PredictRequest()
    request.inputs["word"].CopyFrom(tf.make_tensor_proto(WORDS))
    for servable, version in ((second, 2), (first, 1)):
        got = servable.predict_in_graph("serving_default", request)
        assert got is not None
        ids, score, _ = expected(version)
        np.testing.assert_array_equal(tf.make_ndarray(tensor_pb2.TensorProto.FromString(got["id"])), ids)
        np.testing.assert_allclose(tf.make_ndarray(tensor_pb2.TensorProto.FromString(got["score"])), score,
                                   rtol=1e-6)


@pytest.mark.parametrize("version, why", [(3, "asset vocab.txt differs"), (4, "graph functions")])
def test_another_vocabulary_or_program_is_loaded_in_full(versions, version, why):
    first = Servable("m", 1, versions / "1")
    with pytest.raises(reuse.NotReusable, match=why):
        reuse.reused_captures(Servable("m", version, versions / str(version)).program, first.program,
                              {key: flat.captures for key, flat in first._flat_calls.items()})
    other = Servable("m", version, versions / str(version), donors=[first])
    assert other.reused_version is None
    check(other, version)


def test_a_table_with_checkpointed_contents_is_never_shared(versions):
    first = Servable("m", 6, versions / "6")
    second = Servable("m", 7, versions / "7", donors=[first])
    assert second.reused_version is None
    check(second, 7)
    assert answer(second)["extra"][0] == 20.0


def test_a_reused_version_outlives_its_donor_and_lends_on(versions):
    first = Servable("m", 1, versions / "1")
    second = Servable("m", 2, versions / "2", donors=[first])
    del first
    gc.collect()
    check(second, 2)
    # A third version built from the second runs on the same functions (those of the first full load).
    third = Servable("m", 1, versions / "1", donors=[second])
    assert third.reused_version == 2
    check(third, 1)
    check(second, 2)


def test_functions_serialized_otherwise_are_compared_as_functions():
    function = function_pb2.FunctionDef(signature=op_def_pb2.OpDef(name="f"),
                                        node_def=[node_def_pb2.NodeDef(name="n", op="Identity")])
    canonical = function.SerializeToString(deterministic=True)
    # The same fields in another order (a writer that does not sort them): other bytes, the same function.
    reordered = (function_pb2.FunctionDef(node_def=function.node_def).SerializeToString()
                 + function_pb2.FunctionDef(signature=function.signature).SerializeToString())
    assert reordered != canonical and function_pb2.FunctionDef.FromString(reordered) == function
    other = function_pb2.FunctionDef(signature=op_def_pb2.OpDef(name="f"),
                                     node_def=[node_def_pb2.NodeDef(name="n", op="Neg")])
    meta_graph = meta_graph_pb2.MetaGraphDef()
    a, b, c = (reuse.Program(name, meta_graph, {"f": serialized})
               for name, serialized in [("a", canonical), ("b", reordered), ("c", other.SerializeToString())])
    assert a.same_function("f", b) and b.same_function("f", a)
    assert not a.same_function("f", c)
    assert not a.same_function("g", b)


def test_a_damaged_function_the_signatures_do_not_call_is_not_served(versions, tmp_path):
    """Only the functions compared are parsed while checking; the others are parsed before a version is reused,
    so a file that a full parse refuses is never served (its full load then fails and reports it)."""
    first = Servable("m", 1, versions / "1")
    damaged = tmp_path / "2"
    shutil.copytree(versions / "2", damaged)
    data = (damaged / "saved_model.pb").read_bytes()
    library = saved_model_pb2.SavedModel.FromString(data).meta_graphs[0].graph_def.library
    (save,) = [f for f in library.function if "traced_save" in f.signature.name]
    node = max((n.SerializeToString(deterministic=True) for n in save.node_def), key=len)
    assert data.count(node) == 1
    data = data.replace(node, b"\xff" * len(node))  # its length kept: the file's structure still holds
    (damaged / "saved_model.pb").write_bytes(data)
    with pytest.raises(message.DecodeError):
        saved_model_pb2.SavedModel.FromString(data)
    program = reuse.Program(damaged, *saved_model_file.read_serve_graph(damaged))
    with pytest.raises(reuse.NotReusable, match="traced_save.* cannot be parsed"):
        reuse.reused_captures(program, first.program, {k: f.captures for k, f in first._flat_calls.items()})
    with pytest.raises(OSError, match="Cannot parse"):
        Servable("m", 2, damaged, donors=[first])


def test_the_manager_reuses_unless_told_not_to(versions, tmp_path):
    import shutil

    for reuse_functions in (True, False):
        base = tmp_path / str(reuse_functions)
        shutil.copytree(versions / "1", base / "m" / "1")
        manager = ModelManager(configs_for(base, ["m"]), poll_seconds=-1, reuse_functions=reuse_functions)
        manager.poll()
        shutil.copytree(versions / "2", base / "m" / "2")
        manager.poll()
        served = manager.get("m")
        assert served.version == 2
        assert served.reused_version == (1 if reuse_functions else None)
        check(served, 2)
        assert [state for _, state, _ in manager.status("m")] == ["AVAILABLE", "END"]


def test_a_full_load_rehearses_a_build_on_its_own_functions(versions, tmp_path, monkeypatch):
    from keras_relmem.serving import manager as manager_module

    built = []

    class Recorded(Servable):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append((self.name, self.version, self.reused_version))

    monkeypatch.setattr(manager_module, "Servable", Recorded)
    shutil.copytree(versions / "1", tmp_path / "m" / "1")
    shutil.copytree(versions / "6", tmp_path / "n" / "6")  # a checkpointed table: never built on other functions
    for reuse_functions, rehearsed in ((True, [("m", 1, 1)]), (False, [])):
        built.clear()
        manager = ModelManager(configs_for(tmp_path, ["m", "n"]), poll_seconds=-1, reuse_functions=reuse_functions)
        manager.poll()
        assert [b for b in built if b[2] is None] == [("m", 1, None), ("n", 6, None)]
        assert [b for b in built if b[2] is not None] == rehearsed
        # What serves is the full load, which answers as before.
        assert manager.get("m").reused_version is None and manager.get("n").reused_version is None
        check(manager.get("m"), 1)
        check(manager.get("n"), 6)


@needs_data
def test_a_retrained_babi_export_answers_as_its_own_full_load(tmp_path):
    """Our own export (Keras model, two signatures, vocabulary tables, a dozen variables), retrained as a
    separate process exports it: built on the served functions, it answers as the same files loaded in full."""
    from bench.serving_soak import export_retrained

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda seed: export_retrained(tmp_path / str(seed), seed), (1, 2))
    served = Servable("babi", 1, first)
    reused = Servable("babi", 2, second, donors=[served])
    assert reused.reused_version == 1
    full = Servable("babi", 2, second)
    inputs = {"story": np.array([["Mary went to the kitchen.", "John moved to the garden."]], dtype=object),
              "question": np.array(["Where is Mary?"], dtype=object)}
    answers = {name: s.call("answer", s.check_inputs("answer", inputs))["probabilities"]
               for name, s in (("served", served), ("reused", reused), ("full", full))}
    np.testing.assert_allclose(answers["reused"], answers["full"], rtol=1e-6)
    assert not np.allclose(answers["reused"], answers["served"])
