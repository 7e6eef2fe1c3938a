"""A client for TF Serving's gRPC API (ours or the official `tensorflow/serving`).

Importable:

```python
from keras_relmem.serving.client import ServingClient
client = ServingClient("127.0.0.1:8500")
client.answer("babi", ["Mary went to the kitchen.", "John moved to the garden."], "Where is Mary?")
# [('kitchen', 0.93), ('garden', 0.04), ('office', 0.01)]
client.next_words("lm", "the company said")
client.status("babi"); client.metadata("babi")
```

Command line (`python serving/client.py --help`):

    python serving/client.py --server 127.0.0.1:8500 answer --model babi \\
        --story "Mary went to the kitchen." "John moved to the garden." --question "Where is Mary?"
    python serving/client.py next-words --model lm --prefix "the company said"
    python serving/client.py status --model babi
    python serving/client.py metadata --model babi
"""

import argparse
import json
import sys

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_relmem.serving import tensors


def predict_request(model, inputs, signature="serving_default", version=None, output_filter=()):
    """The `PredictRequest` that `ServingClient.predict` sends.

    Args:
        model: the model's name (`model_spec.name`).
        inputs: `{alias: array-like}`; strings, numbers or booleans of any shape.
        signature: the signature's name.
        version: a version number, or None for the newest.
        output_filter: the output aliases to return (empty: all of them).

    Returns:
        A `tensorflow_serving.apis.predict_pb2.PredictRequest`.

    Example:

    ```python
    request = predict_request("babi", {"story": [["Mary went home."]], "question": ["Where is Mary?"]}, "answer")
    raw = request.SerializeToString()  # e.g. for a load generator
    ```
    """
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = int(version)
    for alias, value in inputs.items():
        tensors.fill_proto(request.inputs[alias], value)
    request.output_filter.extend(output_filter)
    return request


class ServingClient:
    """Calls a model server through the official `tensorflow-serving-api` stubs.

    Args:
        target: `host:port` of the gRPC endpoint.
        timeout: seconds per call.

    Example:

    ```python
    with ServingClient("127.0.0.1:8500") as client:  # closes its channel on leaving
        print(client.answer("babi", ["Mary went home."], "Where is Mary?"))
    ```
    """

    def __init__(self, target="127.0.0.1:8500", timeout=30.0):
        self.channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)])
        self.timeout = timeout
        self.prediction = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(self.channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def predict(self, model, inputs, signature="serving_default", version=None, output_filter=(),
                return_version=False):
        """Raw Predict: `{alias: array-like}` in, `{alias: np.ndarray}` out.

        `return_version=True` returns `(outputs, version)`, the version that
        answered (the server picks the newest unless `version` names one).
        """
        request = predict_request(model, inputs, signature, version, output_filter)
        response = self.prediction.Predict(request, timeout=self.timeout)
        outputs = {alias: tensors.to_array(proto) for alias, proto in response.outputs.items()}
        return (outputs, response.model_spec.version.value) if return_version else outputs

    @staticmethod
    def _pairs(outputs, labels):
        return [
            [(label.decode("utf-8"), float(p)) for label, p in zip(row_labels, row_probabilities)]
            for row_labels, row_probabilities in zip(outputs[labels], outputs["top_probabilities"])
        ]

    def answer(self, model, story, question, version=None, with_notes=False):
        """Ask a bAbI model: `story` a list of sentences, `question` a string -> [(answer, p)].

        `with_notes=True` returns `([(answer, p)], notes)`, `notes` the export's account of what it
        did not use (sentences and words left out, unknown words) as sentences; an export from
        before 1.1 has none.
        """
        outputs = self.predict(
            model, {"story": np.array([story], dtype=object), "question": np.array([question], dtype=object)},
            signature="answer", version=version,
            output_filter=() if with_notes else ("top_answers", "top_probabilities"),
        )
        pairs = self._pairs(outputs, "top_answers")[0]
        return (pairs, input_notes(outputs)) if with_notes else pairs

    def next_words(self, model, prefix, version=None):
        """Ask a language model for the words after `prefix` -> [(word, p)]."""
        outputs = self.predict(
            model, {"prefix": np.array([prefix], dtype=object)}, signature="next_word", version=version,
            output_filter=("top_words", "top_probabilities"),
        )
        return self._pairs(outputs, "top_words")[0]

    def status(self, model, version=None):
        """GetModelStatus as a dict (the JSON form TF Serving's REST API shows)."""
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = model
        if version is not None:
            request.model_spec.version.value = int(version)
        response = self.models.GetModelStatus(request, timeout=self.timeout)
        return json_format.MessageToDict(response, preserving_proto_field_name=True)

    def metadata(self, model, version=None):
        """GetModelMetadata: `{signature name: {inputs: {alias: (dtype, shape)}, outputs: ...}}`."""
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        request.model_spec.name = model
        if version is not None:
            request.model_spec.version.value = int(version)
        request.metadata_field.append("signature_def")
        response = self.prediction.GetModelMetadata(request, timeout=self.timeout)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)

        def describe(tensors):
            return {
                alias: (
                    tf.dtypes.as_dtype(info.dtype).name,
                    [d.size if d.size >= 0 else None for d in info.tensor_shape.dim],
                )
                for alias, info in sorted(tensors.items())
            }

        return {
            "version": response.model_spec.version.value,
            "signatures": {
                key: {"inputs": describe(sig.inputs), "outputs": describe(sig.outputs)}
                for key, sig in sorted(signature_map.signature_def.items())
            },
        }


def input_notes(outputs, row=0):
    """What a bAbI `answer` response says it did not use, as sentences (none for an older export)."""
    notes = []
    if int(outputs.get("sentences_dropped", [0])[row]):
        notes.append(f"the first {int(outputs['sentences_dropped'][row])} sentence(s) were left out: the model "
                     "keeps the story's most recent ones")
    if int(outputs.get("words_dropped", [0])[row]):
        notes.append(f"{int(outputs['words_dropped'][row])} word(s) past the longest sentence or question the "
                     "model reads were left out")
    unknown = outputs.get("unknown_words", [b""])[row]
    if unknown:
        notes.append(f"not in the model's vocabulary, read as unknown: {unknown.decode('utf-8')}")
    return notes


def build_parser():
    parser = argparse.ArgumentParser(description="Query a TF Serving gRPC endpoint (ours or the official one).")
    parser.add_argument("--server", default="127.0.0.1:8500", help="host:port of the gRPC API (default 127.0.0.1:8500)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    commands = parser.add_subparsers(dest="command", required=True)
    ask = commands.add_parser("answer", help="ask a bAbI model a question about a story")
    ask.add_argument("--model", required=True)
    ask.add_argument("--story", nargs="+", required=True, help="the story's sentences, one argument each")
    ask.add_argument("--question", required=True)
    ask.add_argument("--version", type=int)
    nxt = commands.add_parser("next-words", help="ask a language model for the next word")
    nxt.add_argument("--model", required=True)
    nxt.add_argument("--prefix", required=True, help="the text so far (space-separated words)")
    nxt.add_argument("--version", type=int)
    for name in ("status", "metadata"):
        sub = commands.add_parser(name, help=f"print the model's {name} as JSON")
        sub.add_argument("--model", required=True)
        sub.add_argument("--version", type=int)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    client = ServingClient(args.server, args.timeout)
    try:
        if args.command == "answer":
            pairs, notes = client.answer(args.model, args.story, args.question, args.version, with_notes=True)
            for note in notes:
                print(f"note: {note}", file=sys.stderr)
            for label, p in pairs:
                print(f"{label}\t{p:.4f}")
        elif args.command == "next-words":
            for word, p in client.next_words(args.model, args.prefix, args.version):
                print(f"{word}\t{p:.4f}")
        elif args.command == "status":
            print(json.dumps(client.status(args.model, args.version), indent=2))
        else:
            print(json.dumps(client.metadata(args.model, args.version), indent=2))
    except grpc.RpcError as error:
        print(f"error: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
