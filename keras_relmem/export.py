"""SavedModel export in TensorFlow Serving's layout: `<base>/<name>/<version>/`.

The vocabularies travel as SavedModel assets (plain text files, one token per
line, line number = id) read by in-graph lookup tables, so the exported model
needs neither Python nor keras_relmem to answer.
"""

import json
import pathlib
import shutil
import tempfile

import keras

from keras_relmem.data.lm import EOS


def next_version(base_dir, name):
    """1 + the highest numeric version under `<base_dir>/<name>/` (1 if none)."""
    model_dir = pathlib.Path(base_dir) / name
    versions = [int(p.name) for p in model_dir.glob("*") if p.is_dir() and p.name.isdigit()]
    return max(versions, default=0) + 1


def version_dir(base_dir, name, version=None):
    version = next_version(base_dir, name) if version is None else int(version)
    if version < 1:
        raise ValueError(f"version must be a positive integer; received {version}.")
    path = pathlib.Path(base_dir) / name / str(version)
    if path.exists():
        raise FileExistsError(f"{path} already exists; TF Serving versions are immutable.")
    return path


def serve_command(version_path):
    """The command that serves an exported version (its model base path), for the training scripts to print.

    Example:

    ```python
    >>> serve_command("/runs/export/babi_entnet_qa1/1").split(" --")[3:]
    ['model_name=babi_entnet_qa1', 'model_base_path=/runs/export/babi_entnet_qa1']

    ```
    """
    base = pathlib.Path(version_path).resolve().parent
    return (f"relmem-serve --port=8500 --rest_api_port=8501 --model_name={base.name} "
            f"--model_base_path={base}")


def babi_model_name(model, tasks):
    """The served name of a bAbI model, also its export folder: `babi_<model>_qa<N>` for one task,
    `babi_<model>_joint` for several. The task script, the tuner and the README use it alike.

    Args:
        model: the model's name (`"entnet"`, `"memo"`, ...).
        tasks: a task number, a list of them, or `"all"`.

    Example:

    ```python
    >>> babi_model_name("entnet", 1), babi_model_name("memo", "all")
    ('babi_entnet_qa1', 'babi_memo_joint')

    ```
    """
    if isinstance(tasks, (list, tuple)) and len(tasks) == 1:
        tasks = tasks[0]
    single = isinstance(tasks, int)
    return f"babi_{model}_" + (f"qa{tasks}" if single else "joint")


def announce(version_path):
    """Print where a version was exported and how to serve it."""
    print(f"Exported the SavedModel to {version_path}\nServe it with:\n  {serve_command(version_path)}", flush=True)


def _vocab_table(vocab_file, to_ids, default):
    """A lookup table over a vocabulary asset (one token per line, line number = id).

    `to_ids=True` maps words to ids (unknown words -> `default`), `False` maps
    ids to words (unknown ids -> `default`).
    """
    import tensorflow as tf

    line, word = tf.lookup.TextFileIndex.LINE_NUMBER, tf.lookup.TextFileIndex.WHOLE_LINE
    initializer = tf.lookup.TextFileInitializer(
        str(vocab_file),
        key_dtype=tf.string if to_ids else tf.int64,
        key_index=word if to_ids else line,
        value_dtype=tf.int64 if to_ids else tf.string,
        value_index=line if to_ids else word,
    )
    return tf.lookup.StaticHashTable(initializer, default_value=default)


def _top_k_outputs(logits, table, k, name):
    """`probabilities`, the `k` best labels (`name`) and their probabilities."""
    import tensorflow as tf

    probabilities = tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)
    top = tf.math.top_k(probabilities, k=k)
    return {
        "probabilities": probabilities,
        name: table.lookup(tf.cast(top.indices, tf.int64)),
        "top_probabilities": top.values,
    }


def _tokenize(text):
    """`keras_relmem.data.text.words` in the graph (its own pattern, which RE2 reads as the `regex` module does).

    `text` is a string tensor of any shape, or a RaggedTensor; returns a RaggedTensor with one more (ragged)
    dimension of words.
    """
    import tensorflow as tf

    from keras_relmem.data.text import WORD_BREAK

    spaced = tf.strings.regex_replace(tf.strings.lower(text, encoding="utf-8"), WORD_BREAK, " ")
    pieces = tf.strings.split(spaced, sep=" ")
    return tf.ragged.boolean_mask(pieces, tf.strings.length(pieces) > 0)


def _sentences(story):
    """`keras_relmem.data.text.sentences` in the graph: each story string `(b, n)` split at `.` and `!`, the pieces
    of a row in order, `(b, [sentences])` (the empty ones are left out later, with the sentences of no words)."""
    import tensorflow as tf

    from keras_relmem.data.text import SENTENCE_END

    pieces = tf.strings.split(tf.strings.regex_replace(story, SENTENCE_END, "."), sep=".")  # (b, n, [p])
    return pieces.merge_dims(1, 2)


def _word_ids(words, table):
    """Ragged words -> ragged int32 ids through a words-to-ids `_vocab_table`."""
    import tensorflow as tf

    return tf.cast(tf.ragged.map_flat_values(table.lookup, words), tf.int32)


def _refuse_if(condition, message):
    """An INVALID_ARGUMENT with `message` where `condition` holds (any row); the op to depend on."""
    import tensorflow as tf

    return tf.debugging.Assert(tf.logical_not(tf.reduce_any(condition)), [message])


def _unknown(words, ids, oov_id):
    """Per row, the words whose id is `oov_id`, ragged `(b, [u])`."""
    import tensorflow as tf

    while words.ragged_rank > 1:  # a story's sentences: one list of words per row
        words, ids = words.merge_dims(1, 2), ids.merge_dims(1, 2)
    return tf.ragged.boolean_mask(words, ids == oov_id)


def _each_once(words):
    """Per row of ragged words `(b, [u])`, each word once in the order first seen, space-separated."""
    import tensorflow as tf

    return tf.map_fn(lambda row: tf.strings.reduce_join(tf.unique(row).y, separator=" "), words,
                     fn_output_signature=tf.string)


def _babi_text_ids(sentences, question, table, data):
    """Story strings `(b, n)` and questions `(b,)` -> ids `(b, K, S)`, `(b, Q)` exactly as
    `BabiData.arrays` builds them, with what was not used reported.

    Empty strings (the padding of a batch of stories of different lengths)
    are dropped; the last `K` sentences are kept, oldest first (as the EntNet
    authors' code keeps the most recent sentences: the answer is about the
    story's end); sentences longer than `S` words and questions longer than
    `Q` are cut. Returns the two id tensors and a dict of per-row reports:
    `sentences_dropped` (older sentences beyond `K`), `words_dropped` (words
    cut from long sentences and questions) and `unknown_words` (words not in
    the vocabulary, which became `<unk>`, space-separated). A story or
    question with no words, or with no word the model knows, is refused
    (INVALID_ARGUMENT naming the input).
    """
    import tensorflow as tf

    K, S, Q = data.story_length, data.sentence_length, data.query_length
    words = _tokenize(_sentences(sentences))  # (b, [n], [w])
    words = tf.ragged.boolean_mask(words, words.row_lengths(axis=2) > 0)
    count = words.row_lengths()
    position = tf.ragged.range(count)
    words = tf.ragged.boolean_mask(words, position >= tf.expand_dims(count - K, 1))
    ids = _word_ids(words, table)
    question_words = _tokenize(question)
    question_ids = _word_ids(question_words, table)
    oov = data.vocab.oov_id
    checks = [
        _refuse_if(count == 0, "input story: a story with no words; it needs at least one sentence"),
        # (a row with no words is the check above's: asserts run in no set order, so each refuses its own rows)
        _refuse_if(tf.reduce_all(ids.merge_dims(1, 2) == oov, axis=1) & (count > 0),
                   "input story: none of its words is in the vocabulary"),
        _refuse_if(question_words.row_lengths() == 0, "input question: a question with no words"),
        _refuse_if(tf.reduce_all(question_ids == oov, axis=1) & (question_ids.row_lengths() > 0),
                   "input question: none of its words is in the vocabulary"),
    ]
    with tf.control_dependencies(checks):
        report = {
            "sentences_dropped": tf.cast(tf.maximum(count - K, 0), tf.int32),
            "words_dropped": tf.cast(
                tf.reduce_sum(tf.maximum(ids.row_lengths(axis=2) - S, 0), axis=1)
                + tf.maximum(question_ids.row_lengths() - Q, 0), tf.int32),
            "unknown_words": _each_once(tf.concat(  # of the words used: the cut ones are counted above
                [_unknown(words[:, :, :S], ids[:, :, :S], oov),
                 _unknown(question_words[:, :Q], question_ids[:, :Q], oov)], axis=1)),
        }
        story_ids = ids.to_tensor(0, shape=[None, K, S])
        query_ids = question_ids.to_tensor(0, shape=[None, Q])
    return story_ids, query_ids, report


WARMUP_FILE = pathlib.Path("assets.extra", "tf_serving_warmup_requests")


def _predict_log(name, signature, inputs):
    """One `PredictionLog` record holding a PredictRequest (TF Serving's warm-up format)."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.model_spec.signature_name = signature
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))


def write_warmup_requests(version_path, logs):
    """Write `assets.extra/tf_serving_warmup_requests`: TFRecords of `PredictionLog` protos.

    TF Serving (and `keras_relmem.serving`) replays them when it loads the
    version, before the version answers, so its first real requests do not
    pay for graph optimisation and table initialisation.

    Args:
        version_path: the SavedModel version directory.
        logs: `PredictionLog` protos, e.g. from `_predict_log`.

    Returns:
        The file written.
    """
    import tensorflow as tf

    path = pathlib.Path(version_path) / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path


def _checked_ids(ids, vocab_size, name):
    """`ids` unchanged, after an in-graph check that each is in [0, vocab_size) (INVALID_ARGUMENT naming `name`)."""
    import tensorflow as tf

    checks = [
        tf.debugging.assert_non_negative(ids, message=f"input {name}: word ids must be >= 0"),
        tf.debugging.assert_less(ids, tf.constant(vocab_size, ids.dtype),
                                 message=f"input {name}: word ids must be < the vocabulary size {vocab_size}"),
    ]
    with tf.control_dependencies(checks):
        return tf.identity(ids)


def _babi_warmup(data, name):
    """Two real test questions per signature: as ids, and as text."""
    import numpy as np

    split = "test" if data.examples.get("test") else "train"
    arrays = data.arrays(split)
    examples = data.examples[split][:2]
    texts = [[" ".join(sentence) for sentence in ex.story[-data.story_length:]] for ex in examples]
    longest = max(len(text) for text in texts)
    # A batch of shorter stories is padded with empty sentences, as clients do.
    stories = np.array([text + [""] * (longest - len(text)) for text in texts], dtype=object)
    questions = np.array([" ".join(ex.query) for ex in examples], dtype=object)
    logs = []
    for rows in (slice(0, 1), slice(0, 2)):
        logs.append(_predict_log(name, "serving_default", {
            "story": arrays["story"][rows].astype("int32"), "query": arrays["query"][rows].astype("int32")}))
        logs.append(_predict_log(name, "answer", {"story": stories[rows], "question": questions[rows]}))
    return logs


def _lm_warmup(vocab, name):
    """A one- and a two-row prefix per signature, from the vocabulary's first words."""
    import numpy as np

    words = vocab.tokens[:4]
    ids = np.array([[vocab.token_id(w) for w in words]], dtype="int32")
    prefix = " ".join(w for w in words if w != EOS)
    logs = []
    for on_ids, on_text in (("serving_default", "next_word"), ("distribution", "next_word_distribution")):
        logs += [
            _predict_log(name, on_ids, {"ids": ids}),
            _predict_log(name, on_ids, {"ids": np.concatenate([ids, ids])}),
            _predict_log(name, on_text, {"prefix": np.array([prefix], dtype=object)}),
            _predict_log(name, on_text, {"prefix": np.array([prefix, ""], dtype=object)}),
        ]
    return logs


MODEL_RECORD = pathlib.Path("assets.extra", "keras_relmem.json")


def _write_atomically(archive, path, warmup=None, record=None):
    """Write to a sibling temp dir, then rename: TF Serving never sees half a version. `record` (a dict) is
    written as `assets.extra/keras_relmem.json`: what was exported, for tools that pair a checkpoint with it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        archive.write_out(str(tmp), verbose=False)
        if warmup:
            write_warmup_requests(tmp, warmup)
        if record:
            (tmp / MODEL_RECORD).parent.mkdir(exist_ok=True)
            (tmp / MODEL_RECORD).write_text(json.dumps(record, indent=1))
        _readable_by_all(tmp)
        tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _readable_by_all(root):
    """Folders 0755 and files 0644 under `root`.

    `tempfile.mkdtemp` makes the version folder 0700, which a server running
    as another user (the official `tensorflow/serving` image, a service
    account) cannot read; a version is immutable once written, so nobody needs
    to write it.
    """
    root = pathlib.Path(root)
    root.chmod(0o755)
    for item in root.rglob("*"):
        item.chmod(0o755 if item.is_dir() else 0o644)


def export_babi(model, data, base_dir, name="babi", version=None, top_k=3):
    """Export a bAbI model for TF Serving.

    Signatures:

    - `serving_default(story int32 (b, K, S), query int32 (b, Q))` returns
      `probabilities (b, answers)`, `top_answers` (b, top_k) strings and
      `top_probabilities (b, top_k)`.
    - `answer(story string (b, n), question string (b,))` takes the story and
      the question as text: each story string is split into sentences at `.`
      and `!` (one sentence per string, or several in one, as `relmem-explain`
      reads `--story`; pad a batch of shorter stories with empty strings), and
      the words are split and looked up inside the graph exactly as training
      and `relmem-explain` do (`keras_relmem.data.text`; words it never saw
      become `<unk>`; the last K sentences are kept, sentences are cut to S
      words). It returns the same three outputs, plus what it could not use,
      per row: `sentences_dropped` and `words_dropped` (int32) and
      `unknown_words` (string: each unknown word once, space-separated). A
      story or question with no words, or none the model knows, is refused
      (INVALID_ARGUMENT).

    The word and answer vocabularies are assets `vocab.txt` and `answers.txt`.
    Id inputs outside `[0, vocabulary size)` are refused in the graph
    (INVALID_ARGUMENT naming the input).
    `assets.extra/tf_serving_warmup_requests` holds two real
    test questions per signature for the server to replay on load.

    Args:
        model: a trained model from `build_babi_model`.
        data: the `BabiData` it was trained on (vocabularies and sizes).
        base_dir: the TF Serving model base path's parent.
        name: model name (a sub-directory of `base_dir`).
        version: int, default one more than the latest existing version.
        top_k: answers returned per question (at most the number of answers).

    Returns:
        The version directory written.

    Example:

    ```python
    >>> import tempfile
    >>> from keras_relmem.data.babi import load_babi
    >>> from keras_relmem.models import build_babi_model
    >>> data = load_babi(1, "en")  # from $KERAS_RELMEM_DATA
    >>> model = build_babi_model("entnet", len(data.vocab), len(data.answer_vocab),
    ...                          data.story_length, data.sentence_length,
    ...                          data.query_length, num_blocks=2, embedding_dim=8)
    >>> path = export_babi(model, data, tempfile.mkdtemp(), name="babi_entnet")
    >>> path.name, sorted(p.name for p in path.iterdir())
    ('1', ['assets', 'assets.extra', 'fingerprint.pb', 'saved_model.pb', 'variables'])

    ```
    """
    import tensorflow as tf

    path = version_dir(base_dir, name, version)
    top_k = min(top_k, len(data.answer_vocab))
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file = data.vocab.save(pathlib.Path(tmp) / "vocab.txt")
        answers_file = data.answer_vocab.save(pathlib.Path(tmp) / "answers.txt")
        archive = keras.export.ExportArchive()
        archive.track(model)
        answers = _vocab_table(answers_file, to_ids=False, default="<unk>")
        archive.track(answers)
        words = _vocab_table(vocab_file, to_ids=True, default=data.vocab.oov_id)
        archive.track(words)

        def serve(story, query):
            # Keras' embedding lookup wraps negative ids around (NumPy's take),
            # so they are refused here, in the graph, for every server.
            story = _checked_ids(story, len(data.vocab), "story")
            query = _checked_ids(query, len(data.vocab), "query")
            logits = model({"story": story, "query": query}, training=False)
            return _top_k_outputs(logits, answers, top_k, "top_answers")

        def answer(story, question):
            story_ids, query_ids, report = _babi_text_ids(story, question, words, data)
            return {**serve(story_ids, query_ids), **report}

        archive.add_endpoint(
            "serving_default",
            serve,
            input_signature=[
                tf.TensorSpec((None, data.story_length, data.sentence_length), tf.int32, "story"),
                tf.TensorSpec((None, data.query_length), tf.int32, "query"),
            ],
        )
        archive.add_endpoint(
            "answer",
            answer,
            input_signature=[
                tf.TensorSpec((None, None), tf.string, "story"),
                tf.TensorSpec((None,), tf.string, "question"),
            ],
        )
        record = {"model": model.name, "vocab_size": len(data.vocab), "answers": len(data.answer_vocab)}
        return _write_atomically(archive, path, _babi_warmup(data, name), record)


def export_lm(model, vocab, base_dir, name="lm", version=None, top_k=5):
    """Export a next-word model for TF Serving.

    `model` must be non-stateful (rebuild with `stateful=False` and copy the
    weights of a stateful training model). Signatures:

    - `serving_default(ids int32 (b, t))` returns `top_words (b, top_k)`
      strings and `top_probabilities (b, top_k)` for the word after the
      prefix.
    - `next_word(prefix string (b,))` takes text: split on whitespace (the
      corpora are pre-tokenised), words looked up in the graph (unknown ones
      become `<unk>`), read as the start of a line, i.e. after `<eos>`, so an
      empty prefix asks for the first word of a line. Prefixes of different
      lengths can share a batch. Same outputs.
    - `distribution(ids)` and `next_word_distribution(prefix)`: the same
      inputs, and `probabilities (b, vocab)` (the whole next-word
      distribution) beside the top words. A response of the default
      signatures stays small (a 10,000-word vocabulary's distribution is
      40 KB a row), and a client that wants the distribution names it, in
      any server: stock TF Serving returns every output of a signature.

    The vocabulary is the asset `vocab.txt`.

    Args:
        model: a non-stateful model from `build_language_model`.
        vocab: its `Vocabulary`.
        base_dir, name, version: as for `export_babi`.
        top_k: words returned per prefix.

    Returns:
        The version directory written.

    Example:

    ```python
    >>> import tempfile
    >>> from keras_relmem.data.vocab import Vocabulary
    >>> from keras_relmem.models import build_language_model
    >>> vocab = Vocabulary.build([["the", "cat", "sat", "<eos>"]], pad_token=None)
    >>> model = build_language_model("lstm", len(vocab), embedding_dim=8, units=8)
    >>> path = export_lm(model, vocab, tempfile.mkdtemp(), name="lm_lstm")
    >>> path.name, (path / "assets" / "vocab.txt").is_file()
    ('1', True)

    ```
    """
    import tensorflow as tf

    path = version_dir(base_dir, name, version)
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file = vocab.save(pathlib.Path(tmp) / "vocab.txt")
        archive = keras.export.ExportArchive()
        archive.track(model)
        words = _vocab_table(vocab_file, to_ids=False, default="<unk>")
        archive.track(words)
        ids_of = _vocab_table(vocab_file, to_ids=True, default=vocab.oov_id)
        archive.track(ids_of)
        eos_id = vocab.token_id(EOS)

        def distribution(ids):
            ids = _checked_ids(ids, len(vocab), "ids")
            logits = model(ids, training=False)[:, -1, :]
            return _top_k_outputs(logits, words, top_k, "top_words")

        def next_word_distribution(prefix):
            ids = _word_ids(tf.strings.split(prefix), ids_of)
            start = tf.fill([tf.shape(prefix)[0], 1], eos_id)
            ids = tf.concat([tf.RaggedTensor.from_tensor(start), ids], axis=1)
            # Right padding cannot change earlier steps of a causal model, so
            # each row's prediction is read at its own last word.
            logits = model(ids.to_tensor(eos_id), training=False)
            last = tf.gather(logits, ids.row_lengths() - 1, axis=1, batch_dims=1)
            return _top_k_outputs(last, words, top_k, "top_words")

        def top_only(function):
            def serve(inputs):
                outputs = function(inputs)
                return {key: outputs[key] for key in ("top_words", "top_probabilities")}
            return serve

        ids_spec = [tf.TensorSpec((None, None), tf.int32, "ids")]
        prefix_spec = [tf.TensorSpec((None,), tf.string, "prefix")]
        archive.add_endpoint("serving_default", top_only(distribution), input_signature=ids_spec)
        archive.add_endpoint("next_word", top_only(next_word_distribution), input_signature=prefix_spec)
        archive.add_endpoint("distribution", distribution, input_signature=ids_spec)
        archive.add_endpoint("next_word_distribution", next_word_distribution, input_signature=prefix_spec)
        return _write_atomically(archive, path, _lm_warmup(vocab, name))


def _lte_warmup(task, length, nesting, name, style):
    """A one- and a two-row request per signature, from the task's own generator."""
    import numpy as np

    from keras_relmem.data import lte

    data = lte.examples(2, task, length, nesting, seed=0, style=style)
    logs = []
    for rows in (slice(0, 1), slice(0, 2)):
        logs.append(_predict_log(name, "serving_default", {"program": data["program"][rows]}))
        logs.append(_predict_log(name, "answer", {"program": np.array(data["program_text"][rows], dtype=object)}))
    return logs


def export_lte(model, task, length, nesting, base_dir, name="lte", version=None, style="paper"):
    """Export a Learning to Execute model (`ReadThenWrite`) for TF Serving.

    Signatures:

    - `serving_default(program int32 (b, t))`: character ids (0 after the
      end) in; `answer_ids (b, answer_length)` (the written characters, one
      end mark, then whatever the model writes after it) and
      `character_probabilities (b, answer_length)` (the probability of each
      written character) out.
    - `answer(program string (b,))`: the program's text in (characters
      outside the grammar become `<unk>`); `answer` (b,) strings (the
      characters before the first end mark), `character_probabilities` and
      `unknown_characters` (b,) strings (the characters that became
      `<unk>`, in order) out. An empty program, or one with no character
      the model knows, is refused (INVALID_ARGUMENT).

    The character table is a constant of the graph (its characters include
    newline, which a one-token-per-line asset cannot hold). A model trained
    on the paper's data (`style="paper"`) learned no end mark: its answer is
    every character it writes that is a digit or a minus sign, up to the first
    that is not (the paper's answers are numbers).

    Args:
        model: a trained `ReadThenWrite`.
        task, length, nesting: the setting it was trained on (warm-up requests).
        base_dir, name, version: as for `export_babi`.
        style: the data it was trained on (`keras_relmem.data.lte`'s `"paper"` or `"v1"`).

    Returns:
        The version directory written.

    Example:

    ```python
    >>> import keras, tempfile
    >>> from keras_relmem.data import lte
    >>> from keras_relmem.models import ReadThenWrite
    >>> model = ReadThenWrite(keras.layers.LSTM(8, return_sequences=True), len(lte.VOCABULARY),
    ...                       lte.answer_length("copy", 3, 1, "v1"), embedding_dim=4)
    >>> export_lte(model, "copy", 3, 1, tempfile.mkdtemp(), name="lte_copy", style="v1").name
    '1'

    ```
    """
    import tensorflow as tf

    from keras_relmem.data import lte

    path = version_dir(base_dir, name, version)
    chars = tf.constant(list(lte.CHARACTERS))
    ids_of = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(chars, tf.range(3, 3 + len(lte.CHARACTERS), dtype=tf.int32)),
        default_value=lte.UNK,
    )
    # Id -> text: padding and the end mark write nothing (they end the answer), unknown writes "?".
    text_of = tf.constant(["", "", "?", *lte.CHARACTERS])
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(ids_of)

    def write(program):
        program = _checked_ids(program, len(lte.VOCABULARY), "program")
        # a program of no characters would reach the recurrent core as a sequence of no steps
        with tf.control_dependencies([_refuse_if(
                tf.shape(program)[1] == 0, "input program: no characters; a program needs at least one")]):
            program = tf.identity(program)
        probabilities = tf.nn.softmax(tf.cast(model(program, training=False), tf.float32), axis=-1)
        ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"answer_ids": ids, "character_probabilities": tf.reduce_max(probabilities, axis=-1)}

    def answer(program):
        empty = _refuse_if(tf.strings.length(program, unit="UTF8_CHAR") == 0,
                           "input program: an empty program; each needs at least one character")
        with tf.control_dependencies([empty]):
            program = tf.identity(program)
        characters = tf.strings.unicode_split(program, "UTF-8")
        ids = tf.ragged.map_flat_values(ids_of.lookup, characters)
        unknown = ids == lte.UNK
        with tf.control_dependencies([_refuse_if(
                tf.reduce_all(unknown, axis=1),
                "input program: none of its characters is in the vocabulary")]):
            outputs = write(ids.to_tensor(lte.PAD))
        written = outputs["answer_ids"]
        if style == "v1":
            answer_character = (written != lte.PAD) & (written != lte.EOS)
        else:  # no end mark was learned: the number ends at the first character that is not one of its own
            digits = [lte.VOCABULARY.encode(c)[0] for c in "-0123456789"]
            answer_character = tf.reduce_any(tf.equal(written[..., None], digits), axis=-1)
        before_end = tf.math.cumprod(tf.cast(answer_character, tf.int32), axis=1)
        answer = tf.where(before_end > 0, tf.gather(text_of, written), "")
        return {"answer": tf.strings.reduce_join(answer, axis=1),
                "character_probabilities": outputs["character_probabilities"],
                "unknown_characters": tf.strings.reduce_join(tf.ragged.boolean_mask(characters, unknown), axis=1)}

    archive.add_endpoint("serving_default", write,
                         input_signature=[tf.TensorSpec((None, None), tf.int32, "program")])
    archive.add_endpoint("answer", answer, input_signature=[tf.TensorSpec((None,), tf.string, "program")])
    return _write_atomically(archive, path, _lte_warmup(task, length, nesting, name, style))
