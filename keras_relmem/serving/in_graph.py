"""A gRPC Predict answered in one graph call: the inputs' `TensorProto` bytes in, the outputs' bytes out.

Around a batch-1 model call, the Python path (`tensors.to_array`, checks,
`tf.constant` per input, `.numpy()` per output, `tensors.fill_proto`) takes
about 0.3 ms a request on a CPU, most of it because the model call leaves the
caches cold for whatever Python runs next. TF Serving's C++ server reads a
request's tensors with `Tensor::FromProto` and writes outputs with
`Tensor::AsProtoTensorContent`; `tf.io.parse_tensor` and
`tf.io.serialize_tensor` are those two functions as ops. So a signature's
Predict becomes one graph function: `parse_tensor` reads each input's
serialized proto, the signature's own graph function runs, and
`serialize_tensor` writes each output. Python is left with one string
tensor in and one out.

Python still decides whether a request may take this path (`InGraphPredict.accepts`):
names, dtype and shape checks on the protos (microseconds, no conversion), so a
request the Python path would refuse goes there and gets its error message,
and TensorFlow never logs a failed op for bad input.

Example:

```python
flat = FlatCall.of(tf.saved_model.load(path).signatures["answer"])
in_graph = InGraphPredict(flat, input_specs)
if in_graph.accepts(request):
    outputs = in_graph(request, flat.captures)  # {alias: serialized TensorProto}
```
"""

import math

import numpy as np
import tensorflow as tf


class InGraphPredict:
    """One signature's Predict as a graph function from its inputs' serialized protos to its outputs'.

    Args:
        flat_call: the signature's `FlatCall` (its graph function, input and
            output order, and the captures the function is traced with).
        input_specs: `{alias: tf.TensorSpec}` of the signature's inputs.

    Raises:
        ValueError, TypeError: when the function cannot be traced (an output
            that `serialize_tensor` cannot write, say); the caller then keeps
            the Python path only.

    Example:

    ```python
    in_graph = InGraphPredict(flat, servable.input_specs["answer"])
    in_graph(request, flat.captures)["top_answers"]   # bytes of a TensorProto
    ```
    """

    def __init__(self, flat_call, input_specs):
        self.input_aliases = flat_call.input_aliases
        self.output_aliases = flat_call.output_aliases
        specs = [input_specs[alias] for alias in self.input_aliases]
        # What `accepts` compares each input proto with: dtype enum, dims (None: any rank), bytes per value
        # in tensor_content (None: a string, whose values are in string_val).
        self._checks = {
            alias: (spec.dtype.as_datatype_enum, None if spec.shape.rank is None else spec.shape.as_list(),
                    None if spec.dtype == tf.string else np.dtype(spec.dtype.as_numpy_dtype).itemsize)
            for alias, spec in zip(self.input_aliases, specs)
        }
        graph_function, captures = flat_call.graph_function, list(flat_call.captures)

        def predict(protos):
            inputs = [tf.ensure_shape(tf.io.parse_tensor(proto, spec.dtype), spec.shape)
                      for proto, spec in zip(tf.unstack(protos, num=len(specs)), specs)]
            outputs = graph_function.call_flat(*inputs, *captures)
            return tf.stack([tf.io.serialize_tensor(output) for output in outputs])

        concrete = tf.function(predict, input_signature=[tf.TensorSpec([len(specs)], tf.string)]) \
            .get_concrete_function()
        self._function = concrete.inference_fn
        # The traced function takes the signature's captures as its own: a version that runs on these graph
        # functions with its own variables (`reuse`) passes its captures in the same places.
        index = {id(capture): i for i, capture in enumerate(captures)}
        try:
            self._capture_positions = [index[id(capture)] for capture in concrete.captured_inputs]
        except KeyError:
            raise ValueError("the in-graph Predict captured a tensor the signature does not") from None

    def accepts(self, request):
        """Whether every input of `request` (a `PredictRequest`) is what the signature takes, as the Python path
        checks it: the same names, dtypes and shapes, and values that fill the shape (strings in `string_val`,
        numbers in `tensor_content`). Anything else goes the Python way, which answers it or says what is wrong.
        """
        inputs = request.inputs
        if len(inputs) != len(self._checks):
            return False
        for alias, (dtype, dims, itemsize) in self._checks.items():
            if alias not in inputs:  # (`in` first: indexing a message map adds the key)
                return False
            proto = inputs[alias]
            if proto.dtype != dtype or proto.tensor_shape.unknown_rank:
                return False
            shape = [dim.size for dim in proto.tensor_shape.dim]
            if any(size < 0 for size in shape):
                return False
            if dims is not None and (len(shape) != len(dims) or any(
                    want is not None and want != got for want, got in zip(dims, shape))):
                return False
            count = math.prod(shape)
            if itemsize is None:
                if len(proto.string_val) != count or proto.tensor_content:
                    return False
            elif len(proto.tensor_content) != count * itemsize:
                return False
        return True

    def __call__(self, request, captures):
        """`{output alias: serialized TensorProto}` of one request.

        Args:
            request: a `PredictRequest` that `accepts` took.
            captures: the captures of the version answering (its `FlatCall.captures`).

        Raises:
            tf.errors.OpError: when the model refuses the inputs.
        """
        inputs = tf.constant([request.inputs[alias].SerializeToString() for alias in self.input_aliases], tf.string)
        (protos,) = self._function.call_flat(inputs, *[captures[i] for i in self._capture_positions])
        return dict(zip(self.output_aliases, protos.numpy().tolist()))
