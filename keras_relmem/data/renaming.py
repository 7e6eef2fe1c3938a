"""Renaming interchangeable words: a training-time augmentation for bAbI.

Some bAbI tasks treat the members of a word class alike: in task 16 (basic
induction) any of the five people could stand where another stands, and so
could the four animals and the four colours; in task 3 (three supporting
facts) the four people, three objects and six places. Renaming them consistently
through a story, its question and its answer (a random permutation within
each class, drawn anew for every question) gives a story whose answer is
still right, so a model cannot learn a training story by its names and must
learn the task's rule. It is the per-example permutation of entity markers
that Hermann et al. (2015, "Teaching machines to read and comprehend", §3)
used against the same shortcut. The test data are never renamed.
"""

import numpy as np

# Each task's word classes, complete (every word of its stories, questions and
# answers but the verbs and function words); tests check them against the data.
INTERCHANGEABLE_WORDS = {
    3: (("daniel", "john", "mary", "sandra"),
        ("apple", "football", "milk"),
        ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")),
    16: (("bernhard", "brian", "greg", "julius", "lily"),
         ("frog", "lion", "rhino", "swan"),
         ("gray", "green", "white", "yellow")),
}


class WordRenamer:
    """Renames the interchangeable words of some tasks' questions, a new permutation per question.

    Args:
        vocab: the story and query `Vocabulary` (`BabiData.vocab`).
        answer_vocab: the answers' `Vocabulary` (`BabiData.answer_vocab`).
        classes: dict `{task: (words, words, ...)}`: for each task, the word
            classes whose members it treats alike (default
            `INTERCHANGEABLE_WORDS`). A class of answers must lie wholly in
            `answer_vocab`, so a renamed answer is still one.

    Example:

    ```python
    renamer = WordRenamer(data.vocab, data.answer_vocab, {16: INTERCHANGEABLE_WORDS[16]})
    story, query, answer = renamer(story, query, answer, task, np.random.default_rng(0))
    ```
    """

    def __init__(self, vocab, answer_vocab, classes=None):
        classes = INTERCHANGEABLE_WORDS if classes is None else classes
        self.vocab_size = len(vocab)
        self.word_of_answer = np.array([vocab.token_id(a) if a in vocab else -1 for a in answer_vocab.tokens])
        self.answer_of_word = np.full(len(vocab), -1)
        for answer_id, word_id in enumerate(self.word_of_answer):
            if word_id >= 0:
                self.answer_of_word[word_id] = answer_id
        self.classes = {}
        for task, groups in classes.items():
            self.classes[task] = []
            for words in groups:
                missing = [w for w in words if w not in vocab]
                if missing:
                    raise ValueError(f"Task {task}'s interchangeable words {missing} are not in the vocabulary.")
                ids = np.array(vocab.lookup(words))
                answers = self.answer_of_word[ids] >= 0
                if answers.any() and not answers.all():
                    raise ValueError(f"Task {task}'s class {list(words)} is only partly in the answer vocabulary "
                                     f"(missing {[w for w, a in zip(words, answers) if not a]}): a renamed answer "
                                     f"could fall outside it.")
                self.classes[task].append(ids)

    def __call__(self, story, query, answer, task, rng):
        """Copies of `story (b, K, S)`, `query (b, Q)` and `answer (b,)` with the rows of `task (b,)` that
        have classes renamed, each by its own permutation drawn from `rng`."""
        story, query, answer = story.copy(), query.copy(), answer.copy()
        for row in np.flatnonzero(np.isin(task, list(self.classes))):
            table = np.arange(self.vocab_size)
            for ids in self.classes[int(task[row])]:
                table[ids] = ids[rng.permutation(len(ids))]
            story[row], query[row] = table[story[row]], table[query[row]]
            word = self.word_of_answer[answer[row]]
            if word >= 0:
                answer[row] = self.answer_of_word[table[word]]
        return story, query, answer
