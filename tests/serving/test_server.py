"""The server on 127.0.0.1: same answers as in-process over gRPC and REST, TF Serving's codes on bad requests."""

import json
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    prediction_service_pb2_grpc,
)

from keras_relmem.serving.client import ServingClient
from keras_relmem.testing.soak import predict_request

STORIES = [
    ["Mary went to the kitchen.", "John moved to the garden.", "Mary travelled to the office."],
    ["Sandra journeyed to the hallway.", "", ""],
]
QUESTIONS = ["Where is Mary?", "Where is Sandra?"]


def rest(server, path, body=None, raw=None):
    """(HTTP status, parsed JSON) of a REST call."""
    url = f"http://127.0.0.1:{server.rest_port}{path}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture(scope="module")
def stubs(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    yield (prediction_service_pb2_grpc.PredictionServiceStub(channel),
           model_service_pb2_grpc.ModelServiceStub(channel), channel)
    channel.close()


def test_grpc_and_rest_answer_exactly_as_in_process(server, stubs, exports):
    in_process = tf.saved_model.load(str(exports.base / "babi" / "1")).signatures["answer"]
    want = in_process(story=tf.constant(STORIES), question=tf.constant(QUESTIONS))
    prediction, _, _ = stubs
    response = prediction.Predict(predict_request(
        "babi", "answer", {"story": np.array(STORIES, dtype=object), "question": np.array(QUESTIONS, dtype=object)}
    ), timeout=60)
    assert response.model_spec.name == "babi" and response.model_spec.version.value == 1
    assert response.model_spec.signature_name == "answer"
    got = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
    np.testing.assert_array_equal(got["probabilities"], want["probabilities"].numpy())
    np.testing.assert_array_equal(got["top_answers"], want["top_answers"].numpy())

    status, rows = rest(server, "/v1/models/babi:predict", {
        "signature_name": "answer",
        "instances": [{"story": s, "question": q} for s, q in zip(STORIES, QUESTIONS)],
    })
    assert status == 200
    assert [r["top_answers"] for r in rows["predictions"]] == [
        [a.decode() for a in row] for row in want["top_answers"].numpy()
    ]
    np.testing.assert_array_equal(
        np.array([r["probabilities"] for r in rows["predictions"]], "float32"), want["probabilities"].numpy()
    )
    status, cols = rest(server, "/v1/models/babi/versions/1:predict", {
        "signature_name": "answer", "inputs": {"story": STORIES, "question": QUESTIONS},
    })
    assert status == 200
    np.testing.assert_array_equal(np.array(cols["outputs"]["top_probabilities"], "float32"),
                                  want["top_probabilities"].numpy())


def test_id_signature_over_both_apis_and_b64_strings(server, stubs, exports):
    data = exports.data
    arrays = data.arrays("test")
    story, query = arrays["story"][:3], arrays["query"][:3]
    want = tf.saved_model.load(str(exports.base / "babi" / "1")).signatures["serving_default"](
        story=tf.constant(story), query=tf.constant(query))
    prediction, _, _ = stubs
    response = prediction.Predict(predict_request("babi", "", {"story": story, "query": query}), timeout=60)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["probabilities"]), want["probabilities"].numpy())
    status, body = rest(
        server, "/v1/models/babi:predict", {"inputs": {"story": story.tolist(), "query": query.tolist()}}
    )
    assert status == 200
    np.testing.assert_array_equal(np.array(body["outputs"]["probabilities"], "float32"), want["probabilities"].numpy())
    import base64
    b64 = {"b64": base64.b64encode(b"the company said").decode()}
    status, body = rest(server, "/v1/models/lm:predict", {"signature_name": "next_word", "instances": [b64]})
    assert status == 200 and len(body["predictions"][0]["top_words"]) == 3


def test_status_metadata_and_health(server, stubs):
    prediction, models, channel = stubs
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "lm"
    status = models.GetModelStatus(request, timeout=30)
    assert [(s.version, s.state) for s in status.model_version_status] == [
        (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE)
    ]
    metadata_request = get_model_metadata_pb2.GetModelMetadataRequest()
    metadata_request.model_spec.name = "babi"
    metadata_request.metadata_field.append("signature_def")
    metadata = prediction.GetModelMetadata(metadata_request, timeout=30)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    metadata.metadata["signature_def"].Unpack(signature_map)
    assert set(signature_map.signature_def) == {"serving_default", "answer"}
    assert set(signature_map.signature_def["answer"].inputs) == {"story", "question"}
    code, body = rest(server, "/v1/models/babi/metadata")
    assert code == 200 and set(body["metadata"]["signature_def"]["signature_def"]) == {"serving_default", "answer"}
    code, body = rest(server, "/v1/models/lm")
    assert code == 200 and body["model_version_status"][0]["state"] == "AVAILABLE"
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "babi", "lm", "tensorflow.serving.PredictionService"):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_client_helpers(server):
    with ServingClient(f"127.0.0.1:{server.port}") as client:
        answers = client.answer("babi", STORIES[0], QUESTIONS[0])
        assert len(answers) == 3 and all(isinstance(a, str) for a, _ in answers)
        assert answers[0][1] >= answers[1][1] >= answers[2][1]
        words = client.next_words("lm", "the company")
        assert len(words) == 3
        assert client.status("babi")["model_version_status"][0]["state"] == "AVAILABLE"
        assert client.metadata("babi")["signatures"]["answer"]["inputs"]["story"] == ("string", [None, None])
    # Leaving the block closes the channel.
    with pytest.raises(ValueError, match="closed channel"):
        client.status("babi")


def test_client_command_line(server, capsys):
    from keras_relmem.serving import client

    assert client.main(["--server", f"127.0.0.1:{server.port}", "answer", "--model", "babi",
                        "--story", *STORIES[0], "--question", QUESTIONS[0]]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all("\t" in line for line in lines)
    # what the model did not use is said (issue 104): the oldest sentences of a long story, unknown words
    story = ["Mary went to the pub."] + ["John went to the garden."] * 12
    assert client.main(["--server", f"127.0.0.1:{server.port}", "answer", "--model", "babi",
                        "--story", *story, "--question", "Where is Mary?"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 3
    assert "note: the first 3 sentence(s) were left out" in captured.err
    assert "note: not in the model's vocabulary, read as unknown: pub" not in captured.err  # it was left out
    assert client.main(["--server", f"127.0.0.1:{server.port}", "answer", "--model", "babi",
                        "--story", "Mary went to the pub.", "--question", "Where is Mary?"]) == 0
    assert "note: not in the model's vocabulary, read as unknown: pub" in capsys.readouterr().err
    assert client.main(["--server", f"127.0.0.1:{server.port}", "status", "--model", "nope"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err


GOOD_IDS = {"story": np.zeros((1, 10, 6), np.int32), "query": np.zeros((1, 3), np.int32)}
BAD_GRPC = [
    ("unknown model", "nope", None, "", GOOD_IDS, grpc.StatusCode.NOT_FOUND, "nope"),
    ("unknown version", "babi", 7, "", GOOD_IDS, grpc.StatusCode.NOT_FOUND, "Specific(babi, 7)"),
    ("unknown signature", "babi", None, "classify_me", GOOD_IDS, grpc.StatusCode.FAILED_PRECONDITION, "classify_me"),
    (
        "wrong input name",
        "babi",
        None,
        "",
        {"story": GOOD_IDS["story"], "qury": GOOD_IDS["query"]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "qury",
    ),
    ("missing input", "babi", None, "", {"story": GOOD_IDS["story"]}, grpc.StatusCode.INVALID_ARGUMENT, "query"),
    (
        "wrong dtype",
        "babi",
        None,
        "",
        {"story": GOOD_IDS["story"].astype("float32"), "query": GOOD_IDS["query"]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "int32",
    ),
    (
        "wrong shape",
        "babi",
        None,
        "",
        {"story": np.zeros((1, 4, 6), np.int32), "query": GOOD_IDS["query"]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "story",
    ),
    (
        "strings for ids",
        "babi",
        None,
        "",
        {"story": np.array([["a"]], dtype=object), "query": GOOD_IDS["query"]},
        grpc.StatusCode.INVALID_ARGUMENT,
        "story",
    ),
    (
        "oversized",
        "babi",
        None,
        "",
        {"story": np.zeros((20000, 10, 6), np.int32), "query": np.zeros((20000, 3), np.int32)},
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "",
    ),
]


@pytest.mark.parametrize("what,model,version,signature,inputs,code,mentions", BAD_GRPC, ids=[b[0] for b in BAD_GRPC])
def test_bad_grpc_requests_get_tf_serving_codes(server, stubs, what, model, version, signature, inputs, code, mentions):
    prediction, _, _ = stubs
    with pytest.raises(grpc.RpcError) as caught:
        prediction.Predict(predict_request(model, signature, inputs, version), timeout=60)
    assert caught.value.code() == code, caught.value.details()
    assert mentions in caught.value.details()


BAD_REST = [
    ("unknown model", "/v1/models/nope:predict", {"instances": [1]}, None, 404, "nope"),
    ("unknown version", "/v1/models/babi/versions/9:predict", {"inputs": {}}, None, 404, "Specific(babi, 9)"),
    ("unknown signature", "/v1/models/babi:predict", {"signature_name": "x", "inputs": {}}, None, 400, '"x"'),
    ("malformed JSON", "/v1/models/babi:predict", None, b'{"instances": [', 400, "JSON Parse error"),
    ("both forms", "/v1/models/babi:predict", {"instances": [], "inputs": {}}, None, 400, "exactly one"),
    (
        "wrong input name",
        "/v1/models/babi:predict",
        {"signature_name": "answer", "inputs": {"story": [["a"]], "qestion": ["b"]}},
        None,
        400,
        "qestion",
    ),
    (
        "ragged lists",
        "/v1/models/babi:predict",
        {"signature_name": "answer", "inputs": {"story": [["a"], ["b", "c"]], "question": ["q", "r"]}},
        None,
        400,
        "story",
    ),
    (
        "text for ids",
        "/v1/models/babi:predict",
        {"inputs": {"story": [[["x"] * 6] * 10], "query": [[1, 2, 3]]}},
        None,
        400,
        "story",
    ),
    (
        "floats for ids",
        "/v1/models/babi:predict",
        {"inputs": {"story": [[[0.5] * 6] * 10], "query": [[1, 2, 3]]}},
        None,
        400,
        "int32",
    ),
    ("oversized", "/v1/models/babi:predict", None, b"{" + b" " * (2 << 20) + b"}", 413, "larger"),
    ("bad path", "/v2/whatever", {"instances": [1]}, None, 404, "Malformed request"),
    ("deeply nested", "/v1/models/babi:predict", None, b"[" * 100000 + b"]" * 100000, 400, "nested too deeply"),
]


@pytest.mark.parametrize("what,path,body,raw,status,mentions", BAD_REST, ids=[b[0] for b in BAD_REST])
def test_bad_rest_requests_get_tf_serving_codes(server, what, path, body, raw, status, mentions):
    code, answer = rest(server, path, body, raw)
    assert code == status, answer
    assert mentions in answer["error"]
    # ... and the server still answers.
    assert rest(server, "/v1/models/babi")[0] == 200


def test_unsupported_methods_answer_instead_of_crashing(server, stubs):
    from tensorflow_serving.apis import classification_pb2

    prediction, _, _ = stubs
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "babi"
    request.input.example_list.examples.add()
    with pytest.raises(grpc.RpcError) as caught:
        prediction.Classify(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensorflow/serving/classify" in caught.value.details()


@pytest.mark.parametrize("header,status", [(None, 411), ("abc", 400), ("-5", 400)])
def test_broken_content_length_is_refused_not_waited_on(server, header, status):
    """411 is ours (JSON); a malformed header is refused by the HTTP parser (400, plain text naming it)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    connection.putrequest("POST", "/v1/models/babi:predict")
    if header is not None:
        connection.putheader("Content-Length", header)
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == status
    assert "Content-Length" in response.read().decode()
    connection.close()


NON_ASCII_STORY = "Märy wënt to the kïtchen. 约翰 moved to the garden! Mary went to the hallway. 😀 zorblax zorblax."
NON_ASCII_QUESTION = "Where is Märy?"


def test_one_tokenizer_and_one_reading_of_a_story_on_every_path(server, stubs, exports, tmp_path, capsys):
    """The same non-ASCII story, as one string, through the graph, gRPC, REST and relmem-explain: the same
    sentences and words, the same unknown words (each once), the same answer."""
    from keras_relmem import export
    from keras_relmem.commands import explain
    from keras_relmem.data import text

    # the tokens: the graph's reading of the story is the Python one's
    graph = export._tokenize(export._sentences(tf.constant([[NON_ASCII_STORY]])))
    graph_sentences = [[w.decode() for w in sentence] for sentence in graph.to_list()[0] if sentence]
    python_sentences = [text.words(s) for s in text.sentences(NON_ASCII_STORY)]
    assert graph_sentences == python_sentences == [
        ["märy", "wënt", "to", "the", "kïtchen"], ["约翰", "moved", "to", "the", "garden"],
        ["mary", "went", "to", "the", "hallway"], ["😀", "zorblax", "zorblax"]]
    unknown = sorted({w for s in python_sentences + [text.words(NON_ASCII_QUESTION)] for w in s
                      if w not in exports.data.vocab})
    assert unknown == sorted(["märy", "wënt", "kïtchen", "约翰", "😀", "zorblax"])

    signature = tf.saved_model.load(str(exports.base / "babi" / "1")).signatures["answer"]
    one = signature(story=tf.constant([[NON_ASCII_STORY]]), question=tf.constant([NON_ASCII_QUESTION]))
    served_unknown = one["unknown_words"].numpy()[0].decode().split(" ")
    assert sorted(served_unknown) == unknown  # each once, none dropped
    assert one["words_dropped"].numpy()[0] == 0
    # several sentences in one string read as the same sentences sent one per string
    split = signature(story=tf.constant([text.sentences(NON_ASCII_STORY)]), question=tf.constant([NON_ASCII_QUESTION]))
    np.testing.assert_array_equal(one["probabilities"].numpy(), split["probabilities"].numpy())
    answer = one["top_answers"].numpy()[0][0].decode()

    prediction, _, _ = stubs
    response = prediction.Predict(predict_request("babi", "answer", {
        "story": np.array([[NON_ASCII_STORY]], dtype=object),
        "question": np.array([NON_ASCII_QUESTION], dtype=object)}), timeout=60)
    assert tf.make_ndarray(response.outputs["top_answers"])[0][0].decode() == answer
    assert sorted(tf.make_ndarray(response.outputs["unknown_words"])[0].decode().split(" ")) == unknown
    status, rows = rest(server, "/v1/models/babi:predict", {
        "signature_name": "answer", "instances": [{"story": [NON_ASCII_STORY], "question": NON_ASCII_QUESTION}]})
    assert status == 200 and rows["predictions"][0]["top_answers"][0] == answer
    assert sorted(rows["predictions"][0]["unknown_words"].split(" ")) == unknown

    checkpoint = tmp_path / "checkpoint.keras"
    exports.babi_model.save(checkpoint)
    capsys.readouterr()
    answers, _ = explain.run(["--checkpoint", str(checkpoint), "--assets", str(exports.base / "babi" / "1" / "assets"),
                              "--story", NON_ASCII_STORY, "--question", NON_ASCII_QUESTION,
                              "--out", str(tmp_path / "explain.png")])
    notes = capsys.readouterr().out.splitlines()
    assert answers[0] == answer
    unknown_note = next(n for n in notes if "not in the model's vocabulary" in n)
    assert sorted(unknown_note.split("read as unknown: ")[1].split(", ")) == unknown


def test_an_empty_story_gets_the_documented_message_and_rest_refuses_output_filter(server):
    status, body = rest(server, "/v1/models/babi:predict", {
        "signature_name": "answer", "instances": [{"story": [], "question": "Where is Mary?"}]})
    assert status == 400 and "a story with no words" in body["error"], body
    status, body = rest(server, "/v1/models/babi:predict", {
        "signature_name": "answer", "inputs": {"story": [["Mary went home."]], "question": ["Where is Mary?"]},
        "output_filter": ["top_answers"]})
    assert status == 400 and "output_filter is a field of gRPC's PredictRequest" in body["error"]


def test_explain_refuses_a_checkpoint_with_another_models_assets(exports, tmp_path, capsys):
    from keras_relmem.commands import explain
    from keras_relmem.models import babi_qa

    data, assets = exports.data, exports.base / "babi" / "1" / "assets"
    argv = ["--assets", str(assets), "--story", "Mary went home.", "--question", "Where is Mary?",
            "--out", str(tmp_path / "x.png")]
    other = babi_qa.build_babi_model("lstm", len(data.vocab), len(data.answer_vocab), data.story_length,
                                     data.sentence_length, data.query_length, embedding_dim=8, units=8)
    other.save(tmp_path / "lstm.keras")
    with pytest.raises(SystemExit):
        explain.run(["--checkpoint", str(tmp_path / "lstm.keras"), *argv])
    assert "is a babi_lstm model, but" in capsys.readouterr().err
    bigger = babi_qa.build_babi_model("entnet", len(data.vocab) + 3, len(data.answer_vocab), data.story_length,
                                      data.sentence_length, data.query_length, embedding_dim=8)
    bigger.save(tmp_path / "bigger.keras")
    with pytest.raises(SystemExit):
        explain.run(["--checkpoint", str(tmp_path / "bigger.keras"), *argv])
    err = capsys.readouterr().err
    assert f"was trained with {len(data.vocab) + 3} words, but {assets / 'vocab.txt'} lists {len(data.vocab)}" in err


def test_explain_answers_bad_files_with_one_error_line(exports, tmp_path, capsys):
    from keras_relmem.commands import explain

    assets = exports.base / "babi" / "1" / "assets"
    bad = tmp_path / "bad.keras"
    bad.write_text("not a model")
    argv = ["--story", "Mary went home.", "--question", "Where is Mary?", "--out", str(tmp_path / "x.png")]
    with pytest.raises(SystemExit) as stopped:
        explain.run(["--checkpoint", str(bad), "--assets", str(assets), *argv])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert f"{bad} cannot be read as a saved Keras model" in err
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "vocab.txt").write_text("<pad>\n<unk>\nmary\n")
    (tmp_path / "assets" / "answers.txt").write_text("kitchen\n")
    exports.babi_model.save(tmp_path / "model.keras")
    with pytest.raises(SystemExit):
        explain.run(["--checkpoint", str(tmp_path / "model.keras"), "--assets", str(tmp_path / "assets"), *argv])
    assert "answers.txt:1: expected the special token" in capsys.readouterr().err
