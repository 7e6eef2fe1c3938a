"""Renaming task 16's interchangeable words keeps every answer right (against the real files in ../shared/data)."""

import os

import numpy as np
import pytest

from keras_relmem.data import Vocabulary, load_babi
from keras_relmem.data.renaming import INTERCHANGEABLE_WORDS, WordRenamer

pytestmark = pytest.mark.skipif(
    not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA (../shared/data)"
)


def induction_answer(sentences, query):
    """Task 16 (basic induction, Weston et al. 2015) from its definition: the asked person's animal, then the
    colour of another person of that animal. Where several have a colour (6% of the questions), the one whose
    animal was told last: that rule gives all 10,000 en-10k answers and the data's supporting facts. Sentences
    are word lists: "x is a animal" or "x is colour"."""
    animal = {s[0]: s[3] for s in sentences if len(s) == 4}
    colour = {s[0]: s[2] for s in sentences if len(s) == 3}
    person = query[-1]
    others = [s[0] for s in sentences if len(s) == 4 and s[3] == animal[person] and s[0] != person and s[0] in colour]
    return colour[others[-1]]


def decoded(data, story, query):
    words = lambda ids: [w for w in data.vocab.decode(ids) if w != "<pad>"]  # noqa: E731
    return [words(s) for s in story if s.any()], words(query)


@pytest.fixture(scope="module")
def data():
    return load_babi([1, 3, 16], "en")


@pytest.mark.parametrize("task, others", [
    (16, {"is", "a", "what", "color"}),
    (3, {"the", "to", "went", "moved", "journeyed", "travelled", "back", "there", "was", "before", "where", "up",
         "picked", "got", "dropped", "took", "grabbed", "left", "put", "down", "discarded"}),
])
def test_the_classes_are_every_word_a_task_varies(data, task, others):
    words = {w for ex in data.examples["train"] if ex.task == task
             for tokens in [*ex.story, ex.query, (ex.answer,)] for w in tokens}
    assert words - others == {w for c in INTERCHANGEABLE_WORDS[task] for w in c}


def test_task_3_answers_are_renamed_with_their_stories(data):
    """Task 3's answer is a place of its story, so a consistent renaming of the story renames it alike."""
    arrays = data.arrays("test")
    rows = np.flatnonzero(arrays["task"] == 3)[:200]
    story, query, answer, task = (arrays[k][rows] for k in ("story", "query", "answer", "task"))
    new_story, _, new_answer = WordRenamer(data.vocab, data.answer_vocab)(story, query, answer, task,
                                                                           np.random.default_rng(0))
    for old, new, a, b in zip(story, new_story, answer, new_answer):
        mapping = dict(zip(old.ravel(), new.ravel()))
        word = data.vocab.token_id(data.answer_vocab.tokens[a])
        assert data.answer_vocab.tokens[b] == data.vocab.tokens[mapping[word]]
    assert (new_answer != answer).mean() > 0.6  # 5 in 6 places move under a random permutation


def test_renamed_task_16_questions_keep_their_answers(data):
    arrays = data.arrays("test")
    rows = np.flatnonzero(arrays["task"] == 16)[:300]
    story, query, answer, task = (arrays[k][rows] for k in ("story", "query", "answer", "task"))
    for s, q, a in zip(story, query, answer):  # the solver agrees with the data before renaming
        assert induction_answer(*decoded(data, s, q)) == data.answer_vocab.tokens[a]
    renamer = WordRenamer(data.vocab, data.answer_vocab, {16: INTERCHANGEABLE_WORDS[16]})
    new_story, new_query, new_answer = renamer(story, query, answer, task, np.random.default_rng(0))
    assert (story == arrays["story"][rows]).all()  # the inputs are not changed in place
    for s, q, a in zip(new_story, new_query, new_answer):
        assert induction_answer(*decoded(data, s, q)) == data.answer_vocab.tokens[a]
    for old, new in zip(np.concatenate([story.reshape(len(rows), -1), query], 1),
                        np.concatenate([new_story.reshape(len(rows), -1), new_query], 1)):
        forward, backward = {}, {}
        for o, n in zip(old, new):  # one consistent renaming per question: a bijection of its words
            assert forward.setdefault(o, n) == n and backward.setdefault(n, o) == o
    assert (new_answer != answer).mean() > 0.5  # 3 in 4 answers change under a random colour permutation
    first = [tuple(new_story[i].ravel()) for i in range(len(rows))]
    again = renamer(story, query, answer, task, np.random.default_rng(1))[0]
    assert np.mean([tuple(again[i].ravel()) != first[i] for i in range(len(rows))]) > 0.9  # per draw


def test_other_tasks_are_left_alone(data):
    arrays = data.arrays("test")
    rows = np.flatnonzero(arrays["task"] == 1)[:50]
    renamer = WordRenamer(data.vocab, data.answer_vocab)
    out = renamer(arrays["story"][rows], arrays["query"][rows], arrays["answer"][rows], arrays["task"][rows],
                  np.random.default_rng(0))
    for got, key in zip(out, ("story", "query", "answer")):
        np.testing.assert_array_equal(got, arrays[key][rows])


def test_bucketed_batches_rename_and_stay_answerable(data):
    ds = data.bucketed_dataset("train", batch_size=64, features=("story", "query", "task"),
                               rename_words={16: INTERCHANGEABLE_WORDS[16]})
    seen = 0
    for features, answer in ds.take(10):
        for s, q, a, t in zip(features["story"].numpy(), features["query"].numpy(), answer.numpy(),
                              features["task"].numpy()):
            if t == 16:
                assert induction_answer(*decoded(data, s, q)) == data.answer_vocab.tokens[a]
                seen += 1
    assert seen > 100
    with pytest.raises(ValueError, match="features must include both"):
        data.bucketed_dataset("train", features=("story",), rename_words=INTERCHANGEABLE_WORDS)
    with pytest.raises(ValueError, match=r"task\(s\) \[2\], which are not loaded"):
        data.bucketed_dataset("train", rename_words={2: INTERCHANGEABLE_WORDS[16]})


def test_classes_outside_the_vocabularies_are_refused():
    vocab = Vocabulary(["greg", "lily", "white", "gray"])
    answers = Vocabulary(["white"], pad_token=None)
    with pytest.raises(ValueError, match=r"\['julius'\] are not in the vocabulary"):
        WordRenamer(vocab, answers, {16: (("greg", "julius"),)})
    with pytest.raises(ValueError, match=r"only partly in the answer vocabulary \(missing \['gray'\]\)"):
        WordRenamer(vocab, answers, {16: (("white", "gray"),)})
