"""`saved_model.pb` split at the wire level gives what a full parse gives, functions as bytes.

The reference is protobuf's own parser (`SavedModel.FromString`): the split
must agree with it on every field the server reads, on every file, and a file
the parser refuses must be refused with the same error. The wire encodings
written by hand below follow https://protobuf.dev/programming-guides/encoding/.
"""

import pytest
import tensorflow as tf
from tensorflow.core.framework import function_pb2, graph_pb2, node_def_pb2, op_def_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from keras_relmem.serving import saved_model_file
from keras_relmem.serving.saved_model_file import WireError, fields, read_serve_graph, split_saved_model


def reference(data, tag="serve"):
    """The full parse's serve MetaGraphDef without its library, and its functions, parsed."""
    saved_model = saved_model_pb2.SavedModel.FromString(data)
    (meta_graph,) = [m for m in saved_model.meta_graphs if tag in m.meta_info_def.tags]
    functions = {f.signature.name: f for f in meta_graph.graph_def.library.function}
    meta_graph.graph_def.ClearField("library")
    return meta_graph, functions


def assert_agrees(meta_graph, functions, data):
    want_meta_graph, want_functions = reference(data)
    assert meta_graph == want_meta_graph
    assert sorted(functions) == sorted(want_functions)
    for name, serialized in functions.items():
        assert function_pb2.FunctionDef.FromString(bytes(serialized)) == want_functions[name]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A small TensorFlow export: a variable, a lookup table and two signatures."""
    path = tmp_path_factory.mktemp("saved") / "1"
    vocab = path.parent / "vocab.txt"
    vocab.write_text("a\nb\n")

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable([1.0, 2.0])
            self.table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
                str(vocab), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), default_value=0)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="word")])
        def score(self, word):
            return {"score": tf.gather(self.w, self.table.lookup(word))}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def double(self, x):
            return {"y": 2.0 * x}

    module = Module()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.score, "double": module.double})
    return path


def test_a_tensorflow_export_reads_as_its_full_parse(export):
    data = (export / "saved_model.pb").read_bytes()
    meta_graph, functions = read_serve_graph(export)
    assert_agrees(meta_graph, functions, data)
    assert sorted(meta_graph.signature_def) == ["__saved_model_init_op", "double", "serving_default"]
    assert len(functions) >= 2
    # TensorFlow writes each function deterministically serialized: the bytes kept are exactly those.
    _, parsed = reference(data)
    for name, serialized in functions.items():
        assert bytes(serialized) == parsed[name].SerializeToString(deterministic=True)


def test_the_text_form_reads_alike(export, tmp_path):
    data = (export / "saved_model.pb").read_bytes()
    (tmp_path / "saved_model.pbtxt").write_text(str(saved_model_pb2.SavedModel.FromString(data)))
    meta_graph, functions = read_serve_graph(tmp_path)
    assert_agrees(meta_graph, functions, data)


def handmade_saved_model():
    """Two meta graphs; the serving one's graph arrives as two `graph_def` fields, which a parser merges."""
    def function(name, op):
        return function_pb2.FunctionDef(
            signature=op_def_pb2.OpDef(name=name, input_arg=[op_def_pb2.OpDef.ArgDef(name="x", type=1)]),
            node_def=[node_def_pb2.NodeDef(name="n", op=op)])

    first = graph_pb2.GraphDef(node=[node_def_pb2.NodeDef(name="c", op="Const")])
    first.library.function.append(function("f1", "Identity"))
    first.library.gradient.add(function_name="f1", gradient_func="g1")
    second = graph_pb2.GraphDef()
    second.library.function.append(function("f2", "f1"))
    second.versions.producer = 7
    serve = meta_graph_pb2.MetaGraphDef()
    serve.meta_info_def.tags.append("serve")
    serve.signature_def["s"].method_name = "m"
    train = meta_graph_pb2.MetaGraphDef(graph_def=graph_pb2.GraphDef(node=[node_def_pb2.NodeDef(name="t")]))
    train.meta_info_def.tags.append("train")

    def field(number, payload):  # a length-delimited field: key, length, payload
        return saved_model_file._key(number) + saved_model_file._varint(len(payload)) + payload

    serve_bytes = (field(2, first.SerializeToString()) + serve.SerializeToString()
                   + field(2, second.SerializeToString()))
    return b"\x08\x01" + field(2, train.SerializeToString()) + field(2, serve_bytes)


def test_fields_given_twice_are_merged_as_a_parser_merges_them(tmp_path):
    data = handmade_saved_model()
    (tmp_path / "saved_model.pb").write_bytes(data)
    meta_graph, functions = read_serve_graph(tmp_path)
    assert_agrees(meta_graph, functions, data)
    assert sorted(functions) == ["f1", "f2"]
    assert meta_graph.graph_def.versions.producer == 7 and [n.name for n in meta_graph.graph_def.node] == ["c"]
    assert [tags for m, _ in split_saved_model(data) for tags in m.meta_info_def.tags] == ["train", "serve"]


def test_fields_of_every_wire_type():
    # field 1 varint 150, field 2 fixed64, field 3 length 3 "abc", field 4 fixed32 (encoding guide's examples)
    data = b"\x08\x96\x01" + b"\x11" + bytes(8) + b"\x1a\x03abc" + b"\x25" + bytes(4)
    assert list(fields(memoryview(data))) == [(1, 0, 0, 0, 3), (2, 1, 3, 4, 12), (3, 2, 12, 14, 17),
                                              (4, 5, 17, 18, 22)]
    for bad, why in [(b"\x0b", "wire type 3"), (b"\x08\x96", "cut off"), (b"\x1a\x05ab", "past the end"),
                     (b"\x00\x01", "field number 0")]:
        with pytest.raises(WireError, match=why):
            list(fields(memoryview(bad)))


@pytest.mark.parametrize("damage", ["not a SavedModel", "truncated"])
def test_a_damaged_file_is_refused_as_the_parser_refuses_it(export, tmp_path, damage):
    data = (export / "saved_model.pb").read_bytes()
    data = b"not a SavedModel" if damage == "not a SavedModel" else data[: len(data) - 7]
    (tmp_path / "saved_model.pb").write_bytes(data)
    with pytest.raises(Exception) as parser_error:
        saved_model_pb2.SavedModel.FromString(data)
    with pytest.raises(OSError, match="Cannot parse .*saved_model.pb") as ours:
        read_serve_graph(tmp_path)
    assert str(parser_error.value) in str(ours.value)


def test_bytes_the_split_does_not_take_are_parsed_in_full(tmp_path):
    # A function without a name: the parser takes it, the split does not.
    serve = meta_graph_pb2.MetaGraphDef(graph_def=graph_pb2.GraphDef(
        library=function_pb2.FunctionDefLibrary(function=[function_pb2.FunctionDef()])))
    serve.meta_info_def.tags.append("serve")
    data = saved_model_pb2.SavedModel(meta_graphs=[serve]).SerializeToString()
    with pytest.raises(WireError, match="no name"):
        split_saved_model(data)
    (tmp_path / "saved_model.pb").write_bytes(data)
    meta_graph, functions = read_serve_graph(tmp_path)
    assert_agrees(meta_graph, functions, data)
    assert list(functions) == [""]


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(OSError, match="SavedModel file does not exist"):
        read_serve_graph(tmp_path)
