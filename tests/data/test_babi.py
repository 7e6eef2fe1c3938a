"""bAbI parsing and tensors against the real files in ../shared/data."""

import os
import pathlib
import tarfile

import pytest

from keras_relmem.data import DataFormatError, Vocabulary, babi, load_babi

pytestmark = pytest.mark.skipif(
    not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA (../shared/data)"
)


@pytest.mark.parametrize(
    "data,task,split,questions",
    [
        ("en", 1, "train", 1000),
        ("en", 1, "test", 1000),
        ("en", 3, "train", 1000),
        ("en", 19, "test", 1000),
        ("en-10k", 1, "train", 10000),
        ("en-10k", 20, "train", 10000),
        ("en-10k", 3, "test", 1000),
    ],
)
def test_question_counts(data, task, split, questions):
    assert len(babi.BabiFiles().examples(data, task, split)) == questions


def test_all_tasks_have_1000_questions_per_en_file():
    files = babi.BabiFiles()
    for task in babi.TASK_NAMES:
        for split in babi.SPLITS:
            assert len(files.examples("en", task, split)) == 1000, (task, split)


def test_known_story_parsed_exactly():
    examples = babi.BabiFiles().examples("en", 2, "train")
    first = examples[0]
    assert first.story == (
        ("mary", "moved", "to", "the", "bathroom"),
        ("sandra", "journeyed", "to", "the", "bedroom"),
        ("mary", "got", "the", "football", "there"),
        ("john", "went", "to", "the", "kitchen"),
        ("mary", "went", "back", "to", "the", "kitchen"),
        ("mary", "went", "back", "to", "the", "garden"),
    )
    assert first.sentence_ids == (1, 2, 3, 4, 5, 6)
    assert first.query == ("where", "is", "the", "football")
    assert first.answer == "garden"
    assert first.supporting_facts == (3, 6)
    # The second question's story continues the first without the question line.
    second = examples[1]
    assert second.sentence_ids == (1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13)
    assert second.supporting_facts == (12, 6)


@pytest.mark.parametrize(
    "task,answers",
    [
        (1, ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]),
        (6, ["no", "yes"]),
        (7, ["none", "one", "three", "two"]),
        (10, ["maybe", "no", "yes"]),
        (15, ["cat", "mouse", "sheep", "wolf"]),
    ],
)
def test_answer_vocabulary_per_task(task, answers):
    data = load_babi(task, "en", validation_split=0.0)
    assert data.answer_vocab.tokens == ["<unk>"] + answers


def test_multi_word_answers_stay_one_label():
    data = load_babi(19, "en")
    assert {"s,e", "n,w"} <= set(data.answer_vocab.tokens)
    assert all("," in a for a in data.answer_vocab.tokens[1:])
    lists = load_babi(8, "en")
    assert "apple,football" in lists.answer_vocab.tokens


def test_window_keeps_most_recent_sentences_and_time_index():
    data = load_babi(2, "en", memory_size=4)
    ex = data.examples["train"][5]
    arrays = data.arrays("train")
    story = arrays["story"][5]
    kept = ex.story[-4:]
    for j, sentence in enumerate(kept):
        assert data.vocab.decode(story[j, : len(sentence)]) == list(sentence)
    assert list(arrays["time"][5]) == [4, 3, 2, 1][-len(kept):] + [0] * (4 - len(kept))
    ids = ex.sentence_ids[-4:]
    assert list(arrays["support"][5][: len(ids)]) == [
        ex.supporting_facts.index(i) + 1 if i in ex.supporting_facts else 0 for i in ids]


def test_support_gives_each_supporting_fact_its_place_in_the_chain():
    # qa16's first story (written by hand from the file): "What color is Greg?  green  9 6 7"
    data = load_babi(16, "en")
    ex = data.examples["train"][0]
    assert ex.supporting_facts == (9, 6, 7)
    support = data.arrays("train")["support"][0]
    assert list(support[:9]) == [0, 0, 0, 0, 0, 2, 3, 0, 1]
    assert data.vocab.decode(data.arrays("train")["story"][0, 8][:4]) == ["greg", "is", "a", "swan"]


def test_default_windows():
    assert load_babi(1, "en").memory_size == 70
    assert load_babi([1, 3], "en").memory_size == 130
    # The window is what the arrays hold: task 3's stories run past 130 sentences.
    assert load_babi(3, "en").story_length == 130
    assert load_babi(3, "en", memory_size=320).story_length > 130


def test_validation_split_is_seeded_and_disjoint():
    a = load_babi(1, "en", validation_split=0.1, seed=1)
    b = load_babi(1, "en", validation_split=0.1, seed=1)
    c = load_babi(1, "en", validation_split=0.1, seed=2)
    assert len(a.examples["validation"]) == 100 and len(a.examples["train"]) == 900
    assert a.examples["validation"] == b.examples["validation"]
    assert a.examples["validation"] != c.examples["validation"]
    train_keys = {(e.story, e.query) for e in a.examples["train"]}
    overlap = [e for e in a.examples["validation"] if (e.story, e.query) in train_keys]
    assert len(overlap) < 5  # only literal duplicates of the generator


def test_joint_tasks_and_tensors():
    data = load_babi("all", "en")
    assert data.tasks == list(range(1, 21))
    arrays = data.arrays("test")
    assert arrays["story"].shape == (20000, 130, data.sentence_length)
    assert sorted(set(arrays["task"])) == list(range(1, 21))
    # Ids decode back to the original words.
    ex = data.examples["test"][0]
    assert data.vocab.decode(arrays["query"][0][: len(ex.query)]) == list(ex.query)
    assert data.answer_vocab.tokens[arrays["answer"][0]] == ex.answer


def test_vocabulary_comes_from_train_only_and_round_trips(tmp_path):
    data = load_babi(1, "en")
    train_words = {w for e in data.examples["train"] for s in e.story + (e.query,) for w in s}
    assert set(data.vocab.tokens[2:]) == train_words
    path = data.vocab.save(tmp_path / "vocab.txt")
    assert path.read_text().splitlines()[:2] == ["<pad>", "<unk>"]
    assert Vocabulary.load(path) == data.vocab
    assert data.vocab.lookup(["qwerty"]) == [data.vocab.oov_id]


def test_tf_dataset_batches():
    data = load_babi(1, "en")
    ds = data.dataset("train", batch_size=32, drop_remainder=True, features=("story", "query", "time"))
    features, answer = next(iter(ds))
    assert data.story_length == 10  # task 1 stories have at most 10 sentences
    assert features["story"].shape == (32, 10, data.sentence_length)
    assert features["time"].shape == (32, 10)
    assert answer.shape == (32,)
    assert sum(1 for _ in ds) == 900 // 32


def test_missing_en10k_task3_names_the_file():
    with pytest.raises(FileNotFoundError, match="en-10k/qa3_three-supporting-facts_train.txt"):
        load_babi(3, "en-10k")


def test_task_data_mixes_sets_for_a_missing_file():
    data = load_babi([1, 3], "en-10k", task_data={3: "en"})
    counts = {t: sum(ex.task == t for ex in data.examples["train"]) for t in (1, 3)}
    assert counts == {1: 9000, 3: 900}  # 10k and 1k questions, 10% held out each
    with pytest.raises(ValueError, match=r"task_data\[3\]"):
        load_babi([3], "en-10k", task_data={3: "en-1k"})


def test_bucketed_batches_keep_every_example_once_and_cut_padding():
    import numpy as np

    data = load_babi([1, 2], "en")
    arrays, lengths = data.arrays("test"), data.story_lengths("test")
    bounds = babi.bucket_bounds(lengths)
    assert bounds[-1] == lengths.max() == data.story_length
    seen, computed = [], 0
    for features, answer in data.bucketed_dataset("test", batch_size=50, features=("story", "query", "time")):
        story = features["story"].numpy()
        computed += story.shape[0] * story.shape[1]
        assert story.shape[1] in bounds and features["time"].shape[1] == story.shape[1]
        used = np.any(story != 0, -1).sum(-1)
        assert used.max() <= story.shape[1] and (story.shape[1] == bounds[0] or used.min() > max(
            b for b in [0] + bounds if b < story.shape[1]))  # each story sits in its own bucket
        seen += [(s[: n].tobytes(), q.tobytes(), a) for s, n, q, a in
                 zip(story, used, features["query"].numpy(), answer.numpy())]
    expected = [(s[: n].tobytes(), q.tobytes(), a) for s, n, q, a in
                zip(arrays["story"], lengths, arrays["query"], arrays["answer"])]
    assert sorted(seen) == sorted(expected)
    assert computed < 0.7 * len(arrays["answer"]) * data.story_length  # fact rows a model works on
    with pytest.raises(ValueError, match="longest story"):
        data.bucketed_dataset("test", bounds=[3])


@pytest.mark.parametrize("repeats", [3, 0])
def test_task_repeats_put_a_task_k_times_in_every_pass(repeats):
    import numpy as np

    data = load_babi([1, 2], "en")
    arrays, lengths = data.arrays("test"), data.story_lengths("test")
    ds = data.bucketed_dataset("test", batch_size=64, shuffle=True, features=("story", "query", "task"),
                               task_repeats={2: repeats})
    seen = []
    for features, answer in ds.take(ds.cardinality().numpy()):  # one pass
        story = features["story"].numpy()
        used = np.any(story != 0, -1).sum(-1)
        seen += [(t, s[:n].tobytes(), q.tobytes(), a) for t, s, n, q, a in
                 zip(features["task"].numpy(), story, used, features["query"].numpy(), answer.numpy())]
    expected = [(t, s[:n].tobytes(), q.tobytes(), a) for t, s, n, q, a in
                zip(arrays["task"], arrays["story"], lengths, arrays["query"], arrays["answer"])
                for _ in range(repeats if t == 2 else 1)]
    assert len(seen) == 1000 + repeats * 1000 and sorted(seen) == sorted(expected)
    for bad, message in (({5: 2}, "task 5, which is not loaded"), ({2: -1}, r"task_repeats\[2\]"),
                         ({2: 1.5}, r"task_repeats\[2\]"), ({1: 0, 2: 0}, "every loaded task out")):
        with pytest.raises(ValueError, match=message):
            data.bucketed_dataset("test", task_repeats=bad)


def test_time_noise_ages_facts_as_empty_sentences_would():
    """Sukhbaatar et al. 2015, §4.1 (random noise): empty memories slipped into a story. A fact with age t
    (t - 1 facts after it) ages by the number of empty sentences inserted after it or after the facts that
    follow it: with every slot filled (rate -> 1) that is t, so ages double; on average it is rate * t."""
    import numpy as np

    time = np.array([[4, 3, 2, 1, 0, 0], [2, 1, 0, 0, 0, 0]], "int32")
    np.testing.assert_array_equal(babi.time_with_noise(time, 1 - 1e-9, np.random.default_rng(0)), 2 * time)
    np.testing.assert_array_equal(babi.time_with_noise(time, 0.0, np.random.default_rng(0)), time)
    many = np.tile(time[:1], (20_000, 1))
    noisy = babi.time_with_noise(many, 0.1, np.random.default_rng(1))
    assert noisy.dtype == many.dtype and (noisy[:, 4:] == 0).all()
    assert (np.diff(noisy[:, :4], axis=1) < 0).all()  # the facts keep their order, no two share an age
    np.testing.assert_allclose((noisy - many)[:, :4].mean(0), 0.1 * time[0, :4], atol=0.01)


def test_bucketed_batches_with_time_noise_change_only_the_time():
    import numpy as np

    data = load_babi([1], "en")
    features = ("story", "query", "time")
    plain = data.bucketed_dataset("train", batch_size=100, seed=3, features=features)
    noisy = data.bucketed_dataset("train", batch_size=100, seed=3, features=features, time_noise=0.5)
    changed = 0
    for (a, answer_a), (b, answer_b) in zip(plain.take(5), noisy.take(5)):
        np.testing.assert_array_equal(a["story"].numpy(), b["story"].numpy())
        np.testing.assert_array_equal(answer_a.numpy(), answer_b.numpy())
        ta, tb = a["time"].numpy(), b["time"].numpy()
        assert ((ta == 0) == (tb == 0)).all() and (tb >= ta).all()
        changed += int((tb != ta).sum())
    assert changed > 0
    with pytest.raises(ValueError, match="time_noise"):
        data.bucketed_dataset("train", time_noise=1.0)


def test_bad_task_and_data_arguments():
    with pytest.raises(ValueError, match="21"):
        load_babi(21)
    with pytest.raises(ValueError, match="en-1k"):
        load_babi(1, "en-1k")


def test_reads_the_official_archive(tmp_path):
    files = babi.BabiFiles()
    archive = tmp_path / "tasks_1-20_v1-2.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(files.path("en", 1, "train"), arcname="tasks_1-20_v1-2/en/qa1_single-supporting-fact_train.txt")
        tar.add(files.path("en", 1, "test"), arcname="tasks_1-20_v1-2/en/qa1_single-supporting-fact_test.txt")
    data = load_babi(1, "en", data_dir=archive)
    assert len(data.examples["test"]) == 1000
    with pytest.raises(FileNotFoundError, match="qa2_two-supporting-facts_train.txt"):
        load_babi(2, "en", data_dir=archive)


def write(tmp_path, text):
    folder = tmp_path / "en"
    folder.mkdir(exist_ok=True)
    path = folder / "qa1_single-supporting-fact_train.txt"
    path.write_text(text)
    (folder / "qa1_single-supporting-fact_test.txt").write_text("1 Mary went home.\n2 Where is Mary?\thome\t1\n")
    return path


@pytest.mark.parametrize(
    "text,line,problem",
    [
        ("1 Mary went home.\nx Where is Mary?\thome\t1\n", 2, "expected 'ID text'"),
        ("1 Mary went home.\n3 Where is Mary?\thome\t1\n", 2, "does not follow"),
        ("1 Mary went home.\n2 Where is Mary?\thome\t7\n", 2, "not sentences of this story"),
        ("1 Mary went home.\n2 Where is Mary?\t\t1\n", 2, "question line"),
        ("1 Mary went home.\n2 Where is Mary?\thome\tone\n", 2, "integers"),
        ("1 Mary went home.\n2 ...\n", 2, "no words"),
        ("1 Mary went home.\n", 0, "no questions"),
    ],
)
def test_malformed_file_names_file_and_line(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(DataFormatError, match=problem) as info:
        load_babi(1, "en", data_dir=tmp_path)
    assert info.value.path == str(path)
    assert info.value.line_number == line
    if line:
        assert f"{path}:{line}" in str(info.value)


def test_empty_file_is_an_error(tmp_path):
    path = write(tmp_path, "\n")
    with pytest.raises(DataFormatError, match="empty") as info:
        load_babi(1, "en", data_dir=tmp_path)
    assert info.value.path == str(path)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No bAbI files"):
        load_babi(1, "en", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_babi(1, "en", data_dir=tmp_path / "nope")


def test_bucketed_batches_without_remainders_have_one_shape_per_bound():
    import numpy as np

    data = load_babi([1, 2], "en")
    lengths = data.story_lengths("train")
    bounds = babi.bucket_bounds(lengths)
    ds = data.bucketed_dataset("train", batch_size=64, seed=1, drop_remainder=True)
    assert ds.element_spec[0]["story"].shape[0] == 64
    shapes, rows = set(), 0
    for features, answer in ds:
        shapes.add(tuple(features["story"].shape))
        rows += len(answer)
    bucket = np.searchsorted(bounds, lengths)
    full = sum(np.sum(bucket == i) // 64 for i in range(len(bounds)))
    assert rows == 64 * full  # only each bucket's last partial batch is left out
    assert {s[0] for s in shapes} == {64} and {s[1] for s in shapes} <= set(bounds)


def official_copy(tmp_path, task=1):
    """The v1.2 release's layout with task `task`'s en files copied from the shared data."""
    files = babi.BabiFiles()
    folder = tmp_path / "babi" / babi.ARCHIVE_DIR / "en"
    folder.mkdir(parents=True)
    for split in babi.SPLITS:
        (folder / babi.file_name(task, split)).write_bytes(pathlib.Path(files.path("en", task, split)).read_bytes())
    return folder / babi.file_name(task, "train")


def test_a_question_whose_tabs_were_lost_is_refused_naming_file_and_line(tmp_path):
    path = write(tmp_path, "1 Mary went home.\n2 Where is Mary? home 1\n")
    with pytest.raises(DataFormatError, match=r"en/qa1_single-supporting-fact_train.txt:2: a question without its "
                                              r"tabs") as info:
        load_babi(1, "en", data_dir=tmp_path)
    assert info.value.path == str(path)


@pytest.mark.parametrize("cut, problem", [
    (lambda data: data[:len(data) // 2 + 7], "ends inside a line"),  # mid-line
    (lambda data: data[:data.index(b"\n", len(data) // 2) + 1], "ends without a question|questions, where"),
    (lambda data: data[:data.index(b"\n1 ", len(data) // 2) + 1], r"500 questions, where the official v1.2 file "
                                                                   r"has 1000: a truncated or altered copy"),
])
def test_a_truncated_copy_of_an_official_file_is_refused(tmp_path, cut, problem):
    path = official_copy(tmp_path)
    path.write_bytes(cut(path.read_bytes()))
    with pytest.raises(DataFormatError, match=problem) as info:
        load_babi(1, "en", data_dir=tmp_path)
    assert info.value.path == str(path)


def test_a_byte_that_is_not_utf8_names_file_line_and_offset(tmp_path):
    path = official_copy(tmp_path)
    data = path.read_bytes()
    offset = data.index(b"Mary", 100)
    path.write_bytes(data[:offset] + b"\xff" + data[offset + 1:])
    line = data[:offset].count(b"\n") + 1
    with pytest.raises(DataFormatError, match=rf"{path}:{line}: byte 0xff at byte offset {offset} is not UTF-8"):
        load_babi(1, "en", data_dir=tmp_path)


def test_a_data_error_is_one_error_line_from_the_command(tmp_path, monkeypatch, capsys):
    from keras_relmem.commands import train as commands

    path = official_copy(tmp_path)
    path.write_bytes(path.read_bytes()[:5000])
    monkeypatch.setenv("KERAS_RELMEM_DATA", str(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        commands.babi(["--workdir", str(tmp_path / "run"), "--data", "en", "--epochs", "1", "--verbose", "0"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert f"relmem-train-babi: error: {path}:" in err
