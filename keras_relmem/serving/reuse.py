"""A new version whose program is unchanged runs on the served version's graph functions.

`tf.saved_model.load` rebuilds every function of a SavedModel as a Python
graph. On a CPU that is a fifth of a second of work for the bAbI export, in
pieces that hold Python's interpreter lock for up to tens of milliseconds at a
time, and every request in flight waits for each piece. Yet a new version
exported by the same code (a retrained model, or a copy of the same export)
usually differs from the one serving only in its variables: its signatures run
the very same functions. The manager then builds the new version from the
served one: the same graph functions, called with new variables read from the
new version's checkpoint, and sharing the served version's lookup tables and
constants where those are provably equal (same creating functions, same asset
files, same constant values). Anything else that differs, and the new version
is loaded in full.

Reference: the SavedModel format's object graph (`SavedObjectGraph`: every
concrete function names the objects it captures, `bound_inputs`) and its
checkpoint's object graph (`TrackableObjectGraph`), as `tf.saved_model.load`
reads them.
"""

import collections
import filecmp
import pathlib

import tensorflow as tf
from google.protobuf import message
from tensorflow.core.framework import function_pb2
from tensorflow.core.protobuf import trackable_object_graph_pb2

CHECKPOINT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class NotReusable(Exception):
    """Why a new version cannot run on a served version's functions; it is then loaded in full."""


class Program:
    """What a version's `saved_model.pb` says its signatures compute and capture.

    Args:
        path: the version directory.
        meta_graph: its `MetaGraphDef` tagged `serve`.
        functions: `{name: serialized FunctionDef}` of its graph's library
            (`saved_model_file.read_serve_graph`); None takes them from
            `meta_graph.graph_def.library`.

    Example:

    ```python
    program = Program("exports/babi/1", *saved_model_file.read_serve_graph("exports/babi/1"))
    program.signature_function("answer")   # '__inference_signature_wrapper_answer_4543'
    ```
    """

    def __init__(self, path, meta_graph, functions=None):
        self.path = pathlib.Path(path)
        self.meta_graph = meta_graph
        self.objects = meta_graph.object_graph_def
        if functions is None:
            functions = {f.signature.name: f.SerializeToString(deterministic=True)
                         for f in meta_graph.graph_def.library.function}
        self._serialized = functions  # function name -> its bytes as the file holds them
        self._parsed = {}  # function name -> FunctionDef, parsed when first needed
        self._constants = {n.name: n for n in meta_graph.graph_def.node if n.op == "Const"}
        self._paths = None
        self._closures = {}  # function name -> names of it and all it calls
        self._bytes = {}  # (function name, shared names blanked) -> deterministically serialized FunctionDef

    def function(self, name):
        """FunctionDef `name`, parsed from the file's bytes the first time it is asked for.

        Raises:
            NotReusable: no such function, or bytes that do not parse (the
                full load then reports the file as damaged).
        """
        if name not in self._parsed:
            if name not in self._serialized:
                raise NotReusable(f"function {name} is missing from the library")
            try:
                self._parsed[name] = function_pb2.FunctionDef.FromString(bytes(self._serialized[name]))
            except message.DecodeError as error:
                raise NotReusable(f"function {name} cannot be parsed: {error}") from None
        return self._parsed[name]

    def signature_function(self, key):
        """The concrete function name behind signature `key` (the root's `signatures` child)."""
        nodes = self.objects.nodes
        for child in nodes[0].children if nodes else ():
            if child.local_name == "signatures":
                for signature in nodes[child.node_id].children:
                    if signature.local_name == key:
                        node = nodes[signature.node_id]
                        if node.HasField("bare_concrete_function"):
                            return node.bare_concrete_function.concrete_function_name
        raise NotReusable(f"signature {key} has no concrete function in the object graph")

    def bound_inputs(self, function_name):
        """Node ids of the objects `function_name` captures, in the order of its captured inputs."""
        if function_name not in self.objects.concrete_functions:
            raise NotReusable(f"{function_name} is not a concrete function of the object graph")
        return list(self.objects.concrete_functions[function_name].bound_inputs)

    def closure(self, function_name):
        """The names of `function_name` and of every library function it calls, sorted."""
        if function_name not in self._closures:
            seen, pending = set(), [function_name]
            while pending:
                name = pending.pop()
                if name in seen:
                    continue
                function = self.function(name)
                seen.add(name)
                pending.extend(_called_functions(function, self._serialized))
            self._closures[function_name] = tuple(sorted(seen))
        return self._closures[function_name]

    def function_bytes(self, name, ignore_shared_names=False):
        """FunctionDef `name` serialized deterministically; `ignore_shared_names` blanks the `shared_name` of
        resource ops (a lookup table's holds the temporary path it was exported from)."""
        key = (name, ignore_shared_names)
        if key not in self._bytes:
            function = self.function(name)
            if ignore_shared_names:
                function = _without_shared_names(function)
            self._bytes[key] = function.SerializeToString(deterministic=True)
        return self._bytes[key]

    def same_function(self, name, served, ignore_shared_names=False):
        """Whether function `name` is `served`'s function of that name.

        The same bytes in both files are the same function, so they are
        compared first and nothing is parsed (TensorFlow writes functions
        deterministically serialized: a copy or a retrained export of the same
        code has the same bytes). Other bytes, or shared names to ignore, are
        compared as deterministic serializations of the parsed functions.
        """
        if name not in self._serialized or name not in served._serialized:
            return False
        if not ignore_shared_names and self._serialized[name] == served._serialized[name]:
            return True
        return self.function_bytes(name, ignore_shared_names) == served.function_bytes(name, ignore_shared_names)

    def same_functions(self, name, served, ignore_shared_names=False):
        """Whether function `name` and all it calls are `served`'s functions of the same names.

        Only the served program's calls are walked: a function alike calls
        the same functions, so the new program's closure is the served one's
        and is remembered without a walk of its own.
        """
        names = served.closure(name)
        if not all(self.same_function(n, served, ignore_shared_names) for n in names):
            return False
        self._closures[name] = names
        return True

    def check_other_functions(self, served):
        """Parse every function whose bytes are not `served`'s, so a damaged file is not served.

        A full parse of the file would have refused it; the functions equal
        to the served version's parsed when that version was loaded.

        Raises:
            NotReusable: a function does not parse.
        """
        for name, serialized in self._serialized.items():
            if served._serialized.get(name) != serialized:
                self.function(name)

    def prepare(self, keys):
        """Walk the functions of signatures `keys` now (as part of a full load), so a later version's comparison
        with this one parses none of them."""
        for key in keys:
            try:
                self.closure(self.signature_function(key))
            except NotReusable:
                continue

    def constant_value(self, node_id):
        operation = self.objects.nodes[node_id].constant.operation
        if operation not in self._constants:
            raise NotReusable(f"constant {operation} is missing from the graph")
        return self._constants[operation].attr["value"].SerializeToString(deterministic=True)

    def asset_file(self, node_id):
        index = self.objects.nodes[node_id].asset.asset_file_def_index
        return self.path / "assets" / self.meta_graph.asset_file_def[index].filename

    def object_path(self, node_id):
        """The children's local names leading from the root to `node_id` (the shortest such path)."""
        if self._paths is None:
            self._paths = _shortest_paths(self.objects.nodes)
        if node_id not in self._paths:
            raise NotReusable(f"object {node_id} cannot be reached from the root")
        return self._paths[node_id]


def reused_captures(new, old, old_captures):
    """The captures with which `old`'s signature functions compute `new`'s signatures.

    Args:
        new: the new version's `Program`.
        old: the served version's `Program`.
        old_captures: `{signature key: [captured tensor]}` of the served
            version, in each signature function's capture order.

    Returns:
        `({signature key: [captured tensor]}, [tf.Variable])`: captures for the
        new version (its own variables, the served version's tables, assets and
        constants), and the new variables, which the caller keeps alive.

    Raises:
        NotReusable: naming the first difference that needs a full load.
    """
    if dict(new.meta_graph.signature_def) != dict(old.meta_graph.signature_def):
        raise NotReusable("the signatures differ")
    reader = _Checkpoint(new.path)
    variables = {}  # node id -> tf.Variable, shared by the signatures that capture it
    captures = {}
    for key, served in old_captures.items():
        name = new.signature_function(key)
        if name != old.signature_function(key) or not new.same_functions(name, old):
            raise NotReusable(f"the graph functions of signature {key} differ")
        new_ids, old_ids = new.bound_inputs(name), old.bound_inputs(name)
        if not len(new_ids) == len(old_ids) == len(served):
            raise NotReusable(f"signature {key} captures {len(new_ids)} objects, the served version {len(old_ids)}")
        captures[key] = []
        for new_id, old_id, capture in zip(new_ids, old_ids, served):
            kind = new.objects.nodes[new_id].WhichOneof("kind")
            if kind != old.objects.nodes[old_id].WhichOneof("kind"):
                raise NotReusable(f"capture {new_id} of signature {key} is a {kind}, the served version's is not")
            if kind == "variable":
                if new_id not in variables:
                    variables[new_id] = reader.variable(new, new_id, old.objects.nodes[old_id].variable)
                captures[key].append(variables[new_id].handle)
            else:
                _check_shareable(new, new_id, old, old_id, reader)
                captures[key].append(capture)
    new.check_other_functions(old)
    return captures, list(variables.values())


def _check_shareable(new, new_id, old, old_id, reader, depth=0):
    """A captured table, asset or constant of `new` equals `old`'s, so `old`'s may serve both."""
    kind = new.objects.nodes[new_id].WhichOneof("kind")
    if kind == "constant":
        if new.constant_value(new_id) != old.constant_value(old_id):
            raise NotReusable(f"constant {new.objects.nodes[new_id].constant.operation} differs")
    elif kind == "asset":
        new_file, old_file = new.asset_file(new_id), old.asset_file(old_id)
        if not (new_file.is_file() and old_file.is_file() and filecmp.cmp(new_file, old_file, shallow=False)):
            raise NotReusable(f"asset {new_file.name} differs")
    elif kind == "resource" and depth == 0:
        # A resource whose state is checkpointed (a mutable table) holds the new
        # version's own values; one made only by its functions from its assets
        # (a vocabulary table) is the same resource when those are the same.
        if reader.has_state(new, new_id):
            raise NotReusable(f"resource {new_id} has state in the checkpoint")
        new_children = _function_children(new, new_id)
        if new_children.keys() != _function_children(old, old_id).keys():
            raise NotReusable(f"resource {new_id}'s functions differ")
        old_children = _function_children(old, old_id)
        for local_name, new_function in new_children.items():
            old_function = old_children[local_name]
            if new_function != old_function or not new.same_functions(new_function, old, ignore_shared_names=True):
                raise NotReusable(f"resource {new_id}'s {local_name} differs")
            new_bound, old_bound = new.bound_inputs(new_function), old.bound_inputs(old_function)
            if len(new_bound) != len(old_bound):
                raise NotReusable(f"resource {new_id}'s {local_name} captures differ")
            for a, b in zip(new_bound, old_bound):
                if (a == new_id) != (b == old_id) or (
                        new.objects.nodes[a].WhichOneof("kind") != old.objects.nodes[b].WhichOneof("kind")):
                    raise NotReusable(f"resource {new_id}'s {local_name} captures differ")
                if a != new_id:  # the resource's own handle, which its initializer and destroyer take
                    _check_shareable(new, a, old, b, reader, depth + 1)
    else:
        raise NotReusable(f"a captured {kind} cannot be shared between versions")


def _function_children(program, node_id):
    """`{local name: concrete function name}` of a resource's functions (`_create_resource`, `_initialize`...)."""
    children = {}
    for child in program.objects.nodes[node_id].children:
        node = program.objects.nodes[child.node_id]
        if node.HasField("function"):
            names = list(node.function.concrete_functions)
        elif node.HasField("bare_concrete_function"):
            names = [node.bare_concrete_function.concrete_function_name]
        else:
            continue
        if len(names) != 1:
            raise NotReusable(f"resource {node_id}'s {child.local_name} has {len(names)} traces")
        children[child.local_name] = names[0]
    return children


class _Checkpoint:
    """The new version's `variables/` checkpoint: its values and its object graph."""

    def __init__(self, path):
        prefix = pathlib.Path(path) / "variables" / "variables"
        try:
            self._reader = tf.train.load_checkpoint(str(prefix))
            graph = trackable_object_graph_pb2.TrackableObjectGraph()
            graph.ParseFromString(self._reader.get_tensor(CHECKPOINT_GRAPH_KEY))
        except (tf.errors.OpError, ValueError) as error:
            raise NotReusable(f"cannot read {prefix}: {str(error).splitlines()[0]}") from None
        self._nodes = graph.nodes

    def _node(self, program, node_id):
        """The checkpoint's node at the saved object graph's path to `node_id`."""
        current = 0
        for local_name in program.object_path(node_id):
            children = {c.local_name: c.node_id for c in self._nodes[current].children}
            if local_name not in children:
                return None
            current = children[local_name]
        return self._nodes[current]

    def has_state(self, program, node_id):
        node = self._node(program, node_id)
        return node is not None and len(node.attributes) > 0

    def variable(self, program, node_id, served):
        """A new `tf.Variable` with the checkpoint's value of object `node_id`, shaped as the `served` one."""
        saved = program.objects.nodes[node_id].variable
        node = self._node(program, node_id)
        keys = [a.checkpoint_key for a in node.attributes if a.name == "VARIABLE_VALUE"] if node else []
        if not keys:
            raise NotReusable(f"variable {saved.name} has no value in the checkpoint")
        value = self._reader.get_tensor(keys[0])
        dtype = tf.dtypes.as_dtype(saved.dtype)
        shape = tf.TensorShape(saved.shape)
        if (saved.dtype != served.dtype or shape != tf.TensorShape(served.shape)
                or tf.dtypes.as_dtype(value.dtype) != dtype or not shape.is_compatible_with(value.shape)):
            raise NotReusable(f"variable {saved.name} changed dtype or shape")
        return tf.Variable(value, dtype=dtype, trainable=False, name=saved.name or None)


def _called_functions(function, library):
    """Names of the library functions that `function`'s nodes call (as ops or through function attributes)."""
    for node in function.node_def:
        if node.op in library:
            yield node.op
        for value in node.attr.values():
            if value.HasField("func"):
                yield value.func.name
            elif value.HasField("list"):
                yield from (f.name for f in value.list.func)


def _without_shared_names(function):
    copy = type(function)()
    copy.CopyFrom(function)
    for node in copy.node_def:
        if "shared_name" in node.attr:
            node.attr["shared_name"].s = b""
    return copy


def _shortest_paths(nodes):
    paths = {0: ()}
    queue = collections.deque([0])
    while queue:
        current = queue.popleft()
        for child in nodes[current].children:
            if child.node_id not in paths:
                paths[child.node_id] = paths[current] + (child.local_name,)
                queue.append(child.node_id)
    return paths
