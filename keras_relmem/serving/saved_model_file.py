"""A version's `saved_model.pb` read as the server needs it: its graph functions kept as bytes.

The graph functions are most of a SavedModel file (444 of the bAbI export's
486 KB). Parsing them into protobuf objects is one call that holds Python's
interpreter lock for about 1.5 ms, and for up to 16 ms when their several
megabytes of objects need memory the process has not touched before: every
request in flight waits for it. Yet the server needs the functions only as
bytes, to tell whether a new version's functions are the served version's
(`keras_relmem.serving.reuse`); `tf.saved_model.load` reads the file itself.
So the file is split at the protobuf wire level: each `FunctionDef` of the
graph's library is kept as its serialized bytes (parsed later only if
someone needs its contents), and the rest of the `MetaGraphDef` (signatures,
object graph, the graph's nodes) is parsed as usual. A text-format file, or
bytes the split does not understand, are parsed in full instead, which gives
the same result (or the same error).

Reference: the protobuf wire format
(https://protobuf.dev/programming-guides/encoding/) and TensorFlow's
`saved_model.proto`, `meta_graph.proto`, `graph.proto` and `function.proto`.

Example:

```python
meta_graph, functions = read_serve_graph("exports/babi/1")
sorted(meta_graph.signature_def)     # ['answer', 'serving_default']
len(functions["__inference_answer_4500"])   # its FunctionDef's serialized bytes
```
"""

import pathlib

from google.protobuf import message, text_format
from tensorflow.core.framework import function_pb2, graph_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

_META_GRAPHS = saved_model_pb2.SavedModel.DESCRIPTOR.fields_by_name["meta_graphs"].number
_GRAPH_DEF = meta_graph_pb2.MetaGraphDef.DESCRIPTOR.fields_by_name["graph_def"].number
_LIBRARY = graph_pb2.GraphDef.DESCRIPTOR.fields_by_name["library"].number
_FUNCTION = function_pb2.FunctionDefLibrary.DESCRIPTOR.fields_by_name["function"].number
_SIGNATURE = function_pb2.FunctionDef.DESCRIPTOR.fields_by_name["signature"].number
_NAME = 1  # OpDef.name
_LENGTH_DELIMITED = 2


class WireError(ValueError):
    """Bytes that are not protobuf wire format as these messages use it."""


def read_serve_graph(path):
    """The `MetaGraphDef` tagged `serve` of version folder `path`, and its functions as bytes.

    Args:
        path: the version folder (holding `saved_model.pb`, or its text form `saved_model.pbtxt`).

    Returns:
        `(meta_graph, functions)`: the `MetaGraphDef` whose graph's library
        holds no functions, and `{function name: serialized FunctionDef}`.

    Raises:
        OSError: no SavedModel file, or one that cannot be parsed.
        ValueError: no MetaGraph is tagged `serve`.
    """
    path = pathlib.Path(path)
    binary, text = path / "saved_model.pb", path / "saved_model.pbtxt"
    if not binary.is_file() and not text.is_file():
        raise OSError(f"SavedModel file does not exist at: {path}/{{saved_model.pbtxt|saved_model.pb}}")
    if binary.is_file():
        data = binary.read_bytes()
        try:
            meta_graphs = split_saved_model(data)
        except (WireError, message.DecodeError):
            meta_graphs = _parse_in_full(binary, data)  # raises the parser's own error, or agrees with the split
    else:
        meta_graphs = _parse_in_full(text, text.read_text())
    for meta_graph, functions in meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return meta_graph, functions
    raise ValueError(f"{path} has no MetaGraph tagged 'serve'.")


def split_saved_model(data):
    """`[(MetaGraphDef without library functions, {name: FunctionDef bytes})]` of a serialized SavedModel.

    The functions are `memoryview`s into `data` (no copy). A field that
    appears more than once is merged, as a parser merges it.

    Raises:
        WireError: `data` is not the wire format of a SavedModel.
        google.protobuf.message.DecodeError: a part other than the functions does not parse.
    """
    view = memoryview(data)
    meta_graphs = []
    for number, wire_type, _, value, end in fields(view):
        if number == _META_GRAPHS and wire_type == _LENGTH_DELIMITED:
            meta_graphs.append(_split_meta_graph(view[value:end]))
    return meta_graphs


def _split_meta_graph(view):
    rest, functions = [], {}
    for number, wire_type, start, value, end in fields(view):
        if number != _GRAPH_DEF or wire_type != _LENGTH_DELIMITED:
            rest.append(view[start:end])
            continue
        graph_rest = []
        graph = view[value:end]
        for number_, wire_type_, start_, value_, end_ in fields(graph):
            if number_ != _LIBRARY or wire_type_ != _LENGTH_DELIMITED:
                graph_rest.append(graph[start_:end_])
                continue
            # The library's other fields (gradients) are not read by the server: dropped with it.
            library = graph[value_:end_]
            for n, w, _, v, e in fields(library):
                if n == _FUNCTION and w == _LENGTH_DELIMITED:
                    function = library[v:e]
                    functions[function_name(function)] = function
        graph_bytes = b"".join(graph_rest)
        rest.append(_key(_GRAPH_DEF) + _varint(len(graph_bytes)) + graph_bytes)
    meta_graph = meta_graph_pb2.MetaGraphDef()
    meta_graph.ParseFromString(b"".join(rest))
    return meta_graph, functions


def function_name(function):
    """The name of a serialized `FunctionDef` (its `signature.name`), read without parsing the rest."""
    name = None
    for number, wire_type, _, value, end in fields(function):
        if number == _SIGNATURE and wire_type == _LENGTH_DELIMITED:
            signature = function[value:end]
            for number_, wire_type_, _, value_, end_ in fields(signature):
                if number_ == _NAME and wire_type_ == _LENGTH_DELIMITED:
                    name = bytes(signature[value_:end_])  # the last one wins, as in a parser
    if name is None:
        raise WireError("a function of the library has no name")
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError as error:
        raise WireError(f"a function name is not UTF-8: {error}") from None


def fields(view):
    """Each field of one message's bytes: `(number, wire type, start, value start, end)`.

    `view[start:end]` is the whole field (key included) and `view[value:end]`
    its value (for length-delimited fields, without the length).

    Raises:
        WireError: a group, an unknown wire type, a field number 0 or bytes that end inside a field.
    """
    position, size = 0, len(view)
    while position < size:
        start = position
        key, position = _read_varint(view, position)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {start}")
        if wire_type == 0:
            _, position = _read_varint(view, position)
            value = start
        elif wire_type == 1:
            value, position = position, position + 8
        elif wire_type == 5:
            value, position = position, position + 4
        elif wire_type == _LENGTH_DELIMITED:
            length, value = _read_varint(view, position)
            position = value + length
        else:  # groups (3, 4) are not used by these messages; 6 and 7 do not exist
            raise WireError(f"wire type {wire_type} at byte {start}")
        if position > size:
            raise WireError(f"field {number} at byte {start} runs past the end")
        yield number, wire_type, start, value, position


def _read_varint(view, position):
    result = shift = 0
    while True:
        if position >= len(view) or shift > 63:
            raise WireError(f"a varint at byte {position} is cut off or too long")
        byte = view[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _varint(value):
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _key(number):
    return _varint(number << 3 | _LENGTH_DELIMITED)


def _parse_in_full(source, content):
    """The split's result from a full parse (text or binary); OSError naming `source` when it does not parse."""
    saved_model = saved_model_pb2.SavedModel()
    try:
        if isinstance(content, str):
            text_format.Parse(content, saved_model)
        else:
            saved_model.ParseFromString(content)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as error:
        raise OSError(f"Cannot parse {source}: {error}") from error
    meta_graphs = []
    for meta_graph in saved_model.meta_graphs:
        functions = {f.signature.name: f.SerializeToString(deterministic=True)
                     for f in meta_graph.graph_def.library.function}
        meta_graph.graph_def.ClearField("library")
        meta_graphs.append((meta_graph, functions))
    return meta_graphs
