"""The exported text signatures answer exactly as the id signatures on the data pipeline's ids."""

import pathlib
import subprocess
import sys

import numpy as np
import tensorflow as tf

from keras_relmem.data import babi


def _sentence_text(tokens):
    return " ".join(tokens).capitalize() + "."


def test_answer_signature_tokenises_like_the_data_pipeline(exports):
    loaded = tf.saved_model.load(str(exports.base / "babi" / "1"))
    data = exports.data
    examples = data.examples["test"][:16]
    arrays = data.arrays("test")
    width = max(len(ex.story) for ex in examples)
    story = [[_sentence_text(s) for s in ex.story] + [""] * (width - len(ex.story)) for ex in examples]
    question = [" ".join(ex.query).upper() + " ?" for ex in examples]
    text = loaded.signatures["answer"](story=tf.constant(story), question=tf.constant(question))
    ids = loaded.signatures["serving_default"](
        story=tf.constant(arrays["story"][:16]), query=tf.constant(arrays["query"][:16])
    )
    np.testing.assert_allclose(text["probabilities"].numpy(), ids["probabilities"].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(text["top_answers"].numpy(), ids["top_answers"].numpy())


def test_answer_signature_keeps_the_last_sentences_and_cuts_long_ones(exports):
    loaded = tf.saved_model.load(str(exports.base / "babi" / "1"))
    data = exports.data
    k, s = data.story_length, data.sentence_length
    sentences = [f"Mary went to the room{i}." for i in range(k + 3)]
    sentences[-1] = "John went back to the kitchen and then to the garden and the hallway."
    words = [babi.tokenize(t) for t in sentences][-k:]
    expected = np.zeros((1, k, s), "int32")
    for j, tokens in enumerate(words):
        expected[0, j, : min(len(tokens), s)] = data.vocab.lookup(tokens)[:s]
    query = np.zeros((1, data.query_length), "int32")
    query[0, :3] = data.vocab.lookup(["where", "is", "mary"])
    text = loaded.signatures["answer"](story=tf.constant([sentences]), question=tf.constant(["Where is Mary?"]))
    ids = loaded.signatures["serving_default"](story=tf.constant(expected), query=tf.constant(query))
    np.testing.assert_allclose(text["probabilities"].numpy(), ids["probabilities"].numpy(), rtol=1e-6)
    # Unknown words ("room3") became <unk> (1), not padding.
    assert data.vocab.oov_id == 1 and (expected == 1).any()


def test_next_word_reads_each_prefix_after_eos(exports):
    loaded = tf.saved_model.load(str(exports.base / "lm" / "1"))
    vocab = exports.lm_vocab
    prefixes = ["the company said", "", "its stock zzzunknown", "a"]
    text = loaded.signatures["next_word_distribution"](prefix=tf.constant(prefixes))
    top = loaded.signatures["next_word"](prefix=tf.constant(prefixes))
    assert text["top_words"].shape == (4, 3)
    np.testing.assert_array_equal(top["top_words"].numpy(), text["top_words"].numpy())
    for row, prefix in enumerate(prefixes):
        ids = [vocab.token_id("<eos>")] + vocab.lookup(prefix.split())
        alone = loaded.signatures["distribution"](ids=tf.constant([ids], tf.int32))
        np.testing.assert_allclose(text["probabilities"].numpy()[row], alone["probabilities"].numpy()[0], rtol=1e-5)


def test_lm_default_signatures_answer_the_top_words_only(exports):
    """A default LM response is small; the full distribution has signatures of its own."""
    loaded = tf.saved_model.load(str(exports.base / "lm" / "1"))
    ids = tf.constant([[1, 2, 3]], tf.int32)
    default = loaded.signatures["serving_default"](ids=ids)
    assert sorted(default) == ["top_probabilities", "top_words"]
    assert sorted(loaded.signatures["next_word"](prefix=tf.constant(["the"]))) == ["top_probabilities", "top_words"]
    full = loaded.signatures["distribution"](ids=ids)
    probabilities = full["probabilities"].numpy()
    assert probabilities.shape == (1, len(exports.lm_vocab))
    # The top words are the distribution's largest entries, in order.
    best = np.argsort(-probabilities[0])[:3]
    np.testing.assert_allclose(default["top_probabilities"].numpy()[0], probabilities[0, best], rtol=1e-6)
    np.testing.assert_array_equal(default["top_words"].numpy()[0],
                                  [exports.lm_vocab.tokens[i].encode() for i in best])


def test_exported_versions_are_readable_by_other_users(exports):
    version = exports.base / "lm" / "1"
    modes = {path: path.stat().st_mode & 0o777 for path in [version, *version.rglob("*")]}
    assert modes[version] == 0o755
    assert all(mode == (0o755 if path.is_dir() else 0o644) for path, mode in modes.items()), modes


BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "keras_relmem":
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
out = model.signatures["answer"](story=tf.constant([["Mary went to the kitchen."]]),
                                 question=tf.constant(["Where is Mary?"]))
print("ANSWER", out["top_answers"].numpy()[0][0].decode())
try:
    import keras_relmem
except ImportError:
    print("BLOCKED")
"""


def test_export_answers_in_a_process_that_cannot_import_keras_relmem(exports, tmp_path):
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED)
    result = subprocess.run(
        [sys.executable, str(script), str(exports.base / "babi" / "1")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "BLOCKED" in result.stdout
    answer = result.stdout.split("ANSWER", 1)[1].split()[0]
    assert answer in exports.data.answer_vocab.tokens


def test_saved_model_cli_runs_the_text_signature(exports):
    # TensorFlow's console script, installed beside this interpreter
    cli = [str(pathlib.Path(sys.executable).parent / "saved_model_cli")]
    result = subprocess.run(
        cli + ["run", "--dir", str(exports.base / "babi" / "1"), "--tag_set", "serve",
               "--signature_def", "answer", "--input_exprs",
               "story=[['Mary went to the kitchen.', 'John went to the garden.']];question=['Where is John?']"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "top_answers" in result.stdout and "top_probabilities" in result.stdout


def test_answer_signature_reports_what_it_could_not_use(exports):
    """A story longer than the memory is kept to its last K sentences, and the response says how many were
    dropped, how many words were cut and which words were unknown (issue 104: a 15-sentence story was
    answered with no word of the cut)."""
    loaded = tf.saved_model.load(str(exports.base / "babi" / "1"))
    k, s = exports.data.story_length, exports.data.sentence_length
    story = ["Mary went to the kitchen."] + ["John went to the garden."] * (k + 4)
    long_sentence = "Mary went to the pub and " + " ".join(["then"] * s) + "."
    out = loaded.signatures["answer"](
        story=tf.constant([story, [long_sentence] + [""] * (len(story) - 1)]),
        question=tf.constant(["Where is Mary?", "Where is Mary now?"]),
    )
    assert out["sentences_dropped"].numpy().tolist() == [5, 0]
    # the long sentence has 6 + s words, of which s are kept; "now" is past the question's Q words
    q = exports.data.query_length
    assert out["words_dropped"].numpy().tolist() == [0, 6 + max(0, 4 - q)]
    known = set(exports.data.vocab.tokens)
    expected_unknown = [w for w in babi.tokenize(long_sentence)[:s] if w not in known]
    assert expected_unknown  # "pub" is not a bAbI word
    assert out["unknown_words"].numpy().tolist() == [b"", " ".join(expected_unknown).encode()]


def test_answer_signature_refuses_what_it_cannot_answer(exports):
    loaded = tf.saved_model.load(str(exports.base / "babi" / "1"))
    cases = [
        ([""], "Where is Mary?", "input story: a story with no words"),
        (["Zork blorp."], "Where is Mary?", "input story: none of its words is in the vocabulary"),
        (["Mary went to the kitchen."], " ?", "input question: a question with no words"),
        (["Mary went to the kitchen."], "Zork?", "input question: none of its words is in the vocabulary"),
    ]
    for story, question, message in cases:
        try:
            loaded.signatures["answer"](story=tf.constant([story]), question=tf.constant([question]))
        except tf.errors.InvalidArgumentError as error:
            assert message in str(error)
        else:
            raise AssertionError(f"{story} / {question!r} was answered")
