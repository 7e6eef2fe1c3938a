"""bAbI question answering (Weston et al. 2015, tasks v1.2) as the papers use it.

Parses the original `qaN_<name>_{train,test}.txt` files from a directory or the
official `tasks_1-20_v1-2.tar.gz` archive: a story is the sentences before a
question (questions stripped out), lower-cased without punctuation; multi-word
answers such as `n,s` stay one label; supporting-fact ids are kept. The models
see the most recent `memory_size` sentences.
"""

import dataclasses
import tarfile

import numpy as np

from keras_relmem.data import sources
from keras_relmem.data.renaming import WordRenamer
from keras_relmem.data.text import words as text_words
from keras_relmem.data.vocab import Vocabulary

TASK_NAMES = {
    1: "single-supporting-fact",
    2: "two-supporting-facts",
    3: "three-supporting-facts",
    4: "two-arg-relations",
    5: "three-arg-relations",
    6: "yes-no-questions",
    7: "counting",
    8: "lists-sets",
    9: "simple-negation",
    10: "indefinite-knowledge",
    11: "basic-coreference",
    12: "conjunction",
    13: "compound-coreference",
    14: "time-reasoning",
    15: "basic-deduction",
    16: "basic-induction",
    17: "positional-reasoning",
    18: "size-reasoning",
    19: "path-finding",
    20: "agents-motivations",
}
DATASETS = ("en", "en-10k")
SPLITS = ("train", "test")
ARCHIVE_DIR = "tasks_1-20_v1-2"

# Memory windows: 70 sentences (EntNet paper), 130 for task 3 whose stories
# are longer.
DEFAULT_MEMORY_SIZE = 70
TASK3_MEMORY_SIZE = 130



def tokenize(text):
    """Lower-case, punctuation to spaces, split (`keras_relmem.data.text.words`, the one definition)."""
    return text_words(text)


@dataclasses.dataclass(frozen=True)
class BabiExample:
    """One question with its whole story (before any memory window).

    Attributes:
        task: int, 1-20.
        story: tuple of sentences, each a tuple of tokens, oldest first.
        sentence_ids: the sentences' line ids in the file.
        query: tuple of tokens.
        answer: str, the answer label (`"n,s"` stays one label).
        supporting_facts: tuple of the supporting sentences' line ids.
    """

    task: int
    story: tuple
    sentence_ids: tuple
    query: tuple
    answer: str
    supporting_facts: tuple


def parse_babi(lines, source="<lines>", task=0):
    """Parse the lines of one bAbI file into `BabiExample`s.

    Raises `DataFormatError` naming `source` and the line for anything that
    does not follow the format.
    """
    examples = []
    story, previous_id = [], 0
    for line_number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        id_text, _, text = line.partition(" ")
        if not id_text.isdigit() or not text.strip():
            raise sources.DataFormatError(
                source, line_number, f"expected 'ID text', found {line!r}."
            )
        line_id = int(id_text)
        if line_id == 1:
            story = []
        elif line_id != previous_id + 1:
            raise sources.DataFormatError(
                source,
                line_number,
                f"line id {line_id} does not follow {previous_id} (stories start at 1).",
            )
        previous_id = line_id
        if "\t" not in text:
            if "?" in text:  # statements never ask: a question whose tabs were lost
                raise sources.DataFormatError(
                    source, line_number, f"a question without its tabs: a question line is 'ID question<TAB>answer"
                                         f"<TAB>supporting ids'; found {line!r}.")
            tokens = tuple(tokenize(text))
            if not tokens:
                raise sources.DataFormatError(source, line_number, "the sentence has no words.")
            story.append((line_id, tokens))
            continue
        fields = text.split("\t")
        question, answer = fields[0], fields[1].strip().lower() if len(fields) > 1 else ""
        if not tokenize(question) or not answer:
            raise sources.DataFormatError(
                source,
                line_number,
                "a question line must be 'ID question<TAB>answer<TAB>supporting ids'; "
                f"found {line!r}.",
            )
        support_text = fields[2].split() if len(fields) > 2 else []
        if not all(s.isdigit() for s in support_text):
            raise sources.DataFormatError(
                source, line_number, f"supporting fact ids must be integers; found {fields[2]!r}."
            )
        support = tuple(int(s) for s in support_text)
        known = {sid for sid, _ in story}
        unknown = [s for s in support if s not in known]
        if unknown:
            raise sources.DataFormatError(
                source,
                line_number,
                f"supporting fact id(s) {unknown} are not sentences of this story.",
            )
        examples.append(
            BabiExample(
                task=task,
                story=tuple(tokens for _, tokens in story),
                sentence_ids=tuple(sid for sid, _ in story),
                query=tuple(tokenize(question)),
                answer=answer,
                supporting_facts=support,
            )
        )
    if not examples:
        raise sources.DataFormatError(source, 0, "no questions found; is this a bAbI file?")
    if story and story[-1][0] == previous_id:  # every story ends with a question
        raise sources.DataFormatError(source, line_number, "the last story ends without a question: the file was "
                                                           "cut short (truncated copy?)")
    return examples


def parse_tasks(tasks):
    """`1`, `"3"`, `[1, 2]` or `"all"` -> a sorted list of task numbers."""
    if tasks == "all":
        return list(TASK_NAMES)
    if isinstance(tasks, (int, str)):
        tasks = [tasks]
    out = []
    for task in tasks:
        try:
            number = int(task)
        except (TypeError, ValueError):
            number = None
        if number not in TASK_NAMES:
            raise ValueError(f"bAbI tasks are 1..20 or 'all'; received {task!r}.")
        out.append(number)
    return sorted(set(out))


# Questions per file of the official v1.2 release (its README; checked against the files)
OFFICIAL_QUESTIONS = {("en", "train"): 1000, ("en", "test"): 1000, ("en-10k", "train"): 10000,
                      ("en-10k", "test"): 1000}


def file_name(task, split):
    return f"qa{task}_{TASK_NAMES[task]}_{split}.txt"


class BabiFiles:
    """The bAbI files under a local directory or inside the official archive.

    `root` may be the data folder holding `babi/`, the `tasks_1-20_v1-2`
    folder, its parent, or the `tasks_1-20_v1-2.tar.gz` archive itself. With
    no root (no argument, no `KERAS_RELMEM_DATA`) the archive is downloaded
    from the official source.
    """

    def __init__(self, data_dir=None):
        root = sources.data_root(data_dir)
        if root is None:
            root = sources.download(sources.BABI_URL, "babi_tasks_1-20_v1-2.tar.gz")
        self.root = root
        self.archive = None
        if root.is_file():
            if not tarfile.is_tarfile(root):
                raise ValueError(f"{root} (data_dir, or ${sources.ENV_VAR}) is neither a folder nor a bAbI .tar.gz "
                                 "archive: point it at the data folder that holds babi/")
            self.archive = root
            self.base = None
        else:
            self.base = self._find_base(root)

    @staticmethod
    def _find_base(root):
        for candidate in (root / "babi" / ARCHIVE_DIR, root / ARCHIVE_DIR, root):
            if (candidate / "en").is_dir() or (candidate / "en-10k").is_dir():
                return candidate
        archive = root / "babi" / "tasks_1-20_v1-2.tar.gz"
        if archive.is_file():
            return None
        raise FileNotFoundError(
            f"No bAbI files under {root}: expected {root}/babi/{ARCHIVE_DIR}/en/ "
            f"(or {ARCHIVE_DIR}/en/, or en/) with qaN_*_train.txt files."
        )

    def path(self, data, task, split):
        if data not in DATASETS:
            raise ValueError(f"bAbI data must be one of {DATASETS}; received {data!r}.")
        if self.archive is not None:
            return f"{self.archive}!{ARCHIVE_DIR}/{data}/{file_name(task, split)}"
        return self.base / data / file_name(task, split)

    def read(self, data, task, split):
        """The lines of one file; `FileNotFoundError` naming it if absent."""
        path = self.path(data, task, split)
        if self.archive is None:
            return sources.read_lines(path, whole_lines=True)
        member = str(path).split("!", 1)[1]
        with tarfile.open(self.archive) as tar:
            names = {name.lstrip("./"): name for name in tar.getnames()}
            if member not in names:
                raise FileNotFoundError(f"Data file not found: {path}")
            return sources.split_lines(sources.decode(tar.extractfile(names[member]).read(), path), path, True)

    def examples(self, data, task, split):
        path = self.path(data, task, split)
        examples = parse_babi(self.read(data, task, split), path, task)
        expected = OFFICIAL_QUESTIONS[data, split]
        official = self.archive is not None or self.base.name == ARCHIVE_DIR  # the release's own layout
        if official and len(examples) != expected:
            raise sources.DataFormatError(path, 0, f"{len(examples)} questions, where the official v1.2 file has "
                                                   f"{expected}: a truncated or altered copy")
        return examples


def default_memory_size(tasks):
    """70 sentences, or 130 when task 3 (the longest stories) is included."""
    return TASK3_MEMORY_SIZE if 3 in tasks else DEFAULT_MEMORY_SIZE


def window(example, memory_size):
    """The most recent `memory_size` sentences of the example's story."""
    return example.story[-memory_size:], example.sentence_ids[-memory_size:]


class BabiData:
    """Train/validation/test bAbI examples with their vocabularies and tensors.

    Use `load_babi` to create one. `arrays(split)` gives padded NumPy arrays;
    `dataset(split, batch_size)` a batched, prefetched `tf.data.Dataset` of
    `({"story", "query"[, "time"]}, answer)`.

    Attributes:
        tasks: list of task numbers.
        data: `"en"` or `"en-10k"`.
        examples: dict split -> list of `BabiExample`.
        vocab: word `Vocabulary` from the training stories and queries
            (`<pad>` = 0, `<unk>` = 1).
        answer_vocab: answer-label `Vocabulary` from the training answers
            (no padding, `<unk>` = 0 for answers never seen in training).
        memory_size: the window: at most this many recent sentences are kept.
        story_length: K, sentences per story in the tensors:
            `min(memory_size, longest story)`, so short-story tasks do not
            pay for empty memory steps.
        sentence_length: S, words per sentence after padding.
        query_length: words per query after padding.
    """

    def __init__(self, tasks, data, examples, memory_size, vocab=None, answer_vocab=None):
        self.tasks = tasks
        self.data = data
        self.examples = examples
        self.memory_size = memory_size
        train = examples["train"]
        self.vocab = vocab or Vocabulary.build(
            (tokens for ex in train for tokens in window(ex, memory_size)[0] + (ex.query,)),
            order="alphabetical",
        )
        self.answer_vocab = answer_vocab or Vocabulary.build(
            ([ex.answer] for ex in train), order="alphabetical", pad_token=None
        )
        everything = [ex for split in examples.values() for ex in split]
        self.sentence_length = max(
            len(s) for ex in everything for s in window(ex, memory_size)[0] or [()]
        )
        self.query_length = max(len(ex.query) for ex in everything)
        self.story_length = min(memory_size, max(len(ex.story) for ex in everything))
        self._arrays = {}

    def arrays(self, split):
        """Padded int32 arrays for `split` ('train', 'validation' or 'test').

        Returns a dict with `story (N, K, S)` (sentences left-aligned, oldest
        first, 0 = padding), `query (N, Q)`, `answer (N,)`, `time (N, K)`
        (1 for the most recent sentence, 2 for the one before, ..., 0 for
        padding; MEMO's temporal encoding), `support (N, K)` (0 for a sentence
        that is not a supporting fact, else its place in the question's list of
        supporting ids: 1 for the first, 2 for the second; the data lists them
        in the order the reasoning uses them, e.g. task 16's "Greg is a swan",
        "Julius is a swan", "Julius is green") and `task (N,)`. `support > 0`
        marks the supporting facts.
        """
        if split not in self.examples:
            raise ValueError(f"split must be one of {sorted(self.examples)}; received {split!r}.")
        if split not in self._arrays:
            self._arrays[split] = self._vectorize(self.examples[split])
        return self._arrays[split]

    def _vectorize(self, examples):
        n, k = len(examples), self.story_length
        s, q = self.sentence_length, self.query_length
        story = np.zeros((n, k, s), "int32")
        query = np.zeros((n, q), "int32")
        answer = np.zeros((n,), "int32")
        time = np.zeros((n, k), "int32")
        support = np.zeros((n, k), "int32")
        task = np.zeros((n,), "int32")
        for i, ex in enumerate(examples):
            sentences, ids = window(ex, k)
            for j, sentence in enumerate(sentences):
                story[i, j, : len(sentence)] = self.vocab.lookup(sentence)
                time[i, j] = len(sentences) - j
                if ids[j] in ex.supporting_facts:
                    support[i, j] = ex.supporting_facts.index(ids[j]) + 1
            query[i, : len(ex.query)] = self.vocab.lookup(ex.query)
            answer[i] = self.answer_vocab.token_id(ex.answer)
            task[i] = ex.task
        return {
            "story": story,
            "query": query,
            "answer": answer,
            "time": time,
            "support": support,
            "task": task,
        }

    def dataset(
        self,
        split,
        batch_size=32,
        shuffle=None,
        seed=0,
        drop_remainder=False,
        features=("story", "query"),
    ):
        """A `tf.data.Dataset` of `(features dict, answer)` batches.

        Args:
            split: 'train', 'validation' or 'test'.
            batch_size: int (default 32).
            shuffle: bool, default True for 'train' only.
            seed: int, shuffling seed.
            drop_remainder: bool; True gives static batch shapes (TPU, XLA).
            features: which arrays go into the features dict.
        """
        import tensorflow as tf

        arrays = self._feature_arrays(split, features)
        ds = tf.data.Dataset.from_tensor_slices(
            ({name: arrays[name] for name in features}, arrays["answer"])
        )
        if shuffle if shuffle is not None else split == "train":
            ds = ds.shuffle(len(arrays["answer"]), seed=seed, reshuffle_each_iteration=True)
        return ds.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)

    def _feature_arrays(self, split, features):
        """The arrays of `split`, after checking that every requested feature exists."""
        arrays = self.arrays(split)
        unknown = set(features) - set(arrays)
        if unknown:
            raise ValueError(f"Unknown features {sorted(unknown)}; available: {sorted(arrays)}.")
        return arrays

    def _repeated_rows(self, split, task_repeats):
        """The row indices one pass of `split` visits: every row once, a task in
        `task_repeats` k times (0: not at all)."""
        task = self.arrays(split)["task"]
        times = np.ones(len(task), "int64")
        for name, k in (task_repeats or {}).items():
            if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 0:
                raise ValueError(f"task_repeats[{name}] must be an int >= 0; got {k!r}")
            if name not in self.tasks:
                raise ValueError(f"task_repeats names task {name}, which is not loaded; loaded: {list(self.tasks)}")
            times[task == name] = k
        if not times.any():
            raise ValueError(f"task_repeats leaves every loaded task out of the pass: {task_repeats}")
        return np.repeat(np.arange(len(task)), times)

    def story_lengths(self, split):
        """Sentences per story in the tensors of `split` (after the memory window)."""
        return np.sum(np.any(self.arrays(split)["story"] != 0, axis=-1), axis=-1).astype("int32")

    def bucketed_dataset(
        self,
        split,
        batch_size=32,
        bounds=None,
        shuffle=None,
        seed=0,
        features=("story", "query"),
        drop_remainder=False,
        time_noise=0.0,
        task_repeats=None,
        rename_words=None,
    ):
        """Like `dataset`, with every batch's stories of similar length and padded
        only to its bucket's bound, so a model does no work on most padded facts.

        A batch has `(b, bound, S)` stories for one of a few bounds (one traced
        function each in `fit`). Each pass shuffles the examples, cuts every
        bucket into batches and shuffles the batches, all on indices: unlike
        `tf.data`'s `shuffle` + `bucket_by_sequence_length`, no buffer holds
        whole examples (1.7 GB for joint en-10k with 228-sentence stories, refilled
        by every new iterator). Models that need a fixed number of facts (MEMO
        with `logit_mixing="facts"`) cannot take it; use `dataset`. It comes
        from a Python generator, so it cannot be split by `tf.distribute`.

        Args:
            split: 'train', 'validation' or 'test'.
            batch_size: int (default 32); a bucket's last batch may be smaller.
            bounds: increasing inclusive bounds on the story length (default
                `bucket_bounds` of this split's lengths); `[story_length]`
                gives `dataset`'s fully padded batches through the same pipeline.
            shuffle: bool, default True for 'train' only; each pass over the
                dataset gets a new order, seeded.
            seed: int, shuffling seed.
            features: which arrays go into the features dict; `story`, `time`
                and `support` are cut to the bucket's bound.
            drop_remainder: bool; True drops each bucket's last, smaller
                batch of a pass (each pass drops other examples), so the
                batch shapes are one per bound: what XLA (`jit_compile`)
                needs to compile each shape once.
            time_noise: float in [0, 1): `time_with_noise`'s rate on the
                `time` feature of every batch (0: the time as it is), a
                regulariser of a learned time encoding.
            task_repeats: dict `{task: k}` (int k >= 0): each pass holds that
                task's questions k times (the others once), shuffled in with
                the rest, so a task that a joint run learns slowly gets k
                times its share of the training steps; k = 0 leaves the task
                out of the pass (a curriculum's first tasks alone).
            rename_words: dict `{task: (words, ...)}` of word classes each
                task treats alike (`renaming.INTERCHANGEABLE_WORDS` has tasks
                3 and 16's): every question of those tasks gets its own consistent
                renaming within each class, story, query and answer
                (`renaming.WordRenamer`), so it cannot be learnt by its
                names. Needs `story` and `query` among `features`.

        Example:

        ```python
        babi = load_babi(tasks="all", data="en-10k", task_data={3: "en"})
        train = babi.bucketed_dataset("train", batch_size=32)
        # Tasks 17 and 19 four times in every pass.
        hard = babi.bucketed_dataset("train", task_repeats={17: 4, 19: 4})
        ```
        """
        import itertools

        import tensorflow as tf

        if not 0 <= time_noise < 1:
            raise ValueError(f"time_noise must be in [0, 1); got {time_noise}")
        arrays = self._feature_arrays(split, features)
        lengths = self.story_lengths(split)
        bounds = sorted(bounds or bucket_bounds(lengths))
        if lengths.max() > bounds[-1]:
            raise ValueError(f"bounds must reach the longest story ({lengths.max()} sentences); received {bounds}.")
        shuffle = shuffle if shuffle is not None else split == "train"
        per_fact = {"story", "time", "support"}
        bucket = np.searchsorted(bounds, lengths)  # the first bound >= the story's length
        rows_of_pass = self._repeated_rows(split, task_repeats)
        renamer = None
        if rename_words:
            if not {"story", "query"} <= set(features):
                raise ValueError(f"rename_words renames stories and queries: features must include both; "
                                 f"got {features}")
            unloaded = sorted(set(rename_words) - set(self.tasks))
            if unloaded:
                raise ValueError(f"rename_words names task(s) {unloaded}, which are not loaded; "
                                 f"loaded: {list(self.tasks)}")
            renamer = WordRenamer(self.vocab, self.answer_vocab, rename_words)
        passes = itertools.count()

        def batches():
            rng = np.random.default_rng([seed, next(passes)])
            order = rng.permutation(rows_of_pass) if shuffle else rows_of_pass
            groups = []
            for index, bound in enumerate(bounds):
                rows = order[bucket[order] == index]
                stop = len(rows) - batch_size + 1 if drop_remainder else len(rows)
                groups += [(bound, rows[i:i + batch_size]) for i in range(0, stop, batch_size)]
            if shuffle:
                groups = [groups[i] for i in rng.permutation(len(groups))]
            for bound, rows in groups:
                x = {name: arrays[name][rows, :bound] if name in per_fact else arrays[name][rows] for name in features}
                if time_noise and "time" in x:
                    x["time"] = time_with_noise(x["time"], time_noise, rng)
                answer = arrays["answer"][rows]
                if renamer is not None:
                    x["story"], x["query"], answer = renamer(x["story"], x["query"], answer, arrays["task"][rows], rng)
                yield x, answer

        def spec(name):
            shape = arrays[name].shape
            tail = (None,) + shape[2:] if name in per_fact else shape[1:]
            batch = batch_size if drop_remainder else None
            return tf.TensorSpec((batch,) + tuple(tail), tf.as_dtype(arrays[name].dtype))

        signature = ({name: spec(name) for name in features}, spec("answer"))
        ds = tf.data.Dataset.from_generator(batches, output_signature=signature)
        # Every pass yields the same number of batches: saying so gives Keras' progress bar its
        # total and spares `fit` its "input ran out of data" warning at the end of each epoch.
        sizes = np.bincount(bucket[rows_of_pass], minlength=len(bounds))
        count = int(np.sum(sizes // batch_size if drop_remainder else -(-sizes // batch_size)))
        ds = ds.apply(tf.data.experimental.assert_cardinality(count))
        return ds.prefetch(tf.data.AUTOTUNE)


def time_with_noise(time, rate, rng):
    """The `time` of stories into which empty sentences were slipped at random.

    End-to-end memory networks' "random noise" (Sukhbaatar et al. 2015, §4.1:
    "at training time we can randomly add 10% of empty memories to the
    stories") keeps a learned time encoding from pinning each fact to its
    exact age. Here only the ages change, as if after each fact an empty
    sentence had been inserted with probability `rate`; the empty sentences
    themselves are not added to the memory.

    Args:
        time: int array `(batch, K)`: `BabiData.arrays()["time"]` (oldest fact
            first, 1 = the most recent, 0 = padding).
        rate: float, probability of an empty sentence after each fact.
        rng: `numpy.random.Generator`.

    Returns:
        The new ages, same shape and dtype; padding stays 0 and the facts keep
        their order.

    Example:

    ```python
    >>> import numpy as np
    >>> time_with_noise(np.array([[3, 2, 1, 0]]), 0.999999, np.random.default_rng(0))
    array([[6, 4, 2, 0]])

    ```
    """
    time = np.asarray(time)
    valid = time > 0
    empty_after = (rng.random(time.shape) < rate) & valid
    # a fact ages by one for every empty sentence slipped in after it (at its place or later)
    older_by = np.cumsum(empty_after[:, ::-1], axis=1)[:, ::-1]
    return np.where(valid, time + older_by, 0).astype(time.dtype)


def bucket_bounds(lengths, quantiles=(0.5, 0.75, 0.9, 0.97, 0.99, 0.997, 1.0)):
    """Bucket upper bounds (inclusive) for story lengths: the given quantiles, deduplicated.

    Joint bAbI mixes 2-sentence stories with task 3's hundreds; a few buckets
    cut the padded work of a batch to about what its own stories need.
    """
    lengths = np.asarray(lengths)
    if lengths.size == 0:
        raise ValueError("bucket_bounds needs at least one story length.")
    return sorted({int(np.ceil(np.quantile(lengths, q))) for q in quantiles} | {int(lengths.max())})


def load_babi(
    tasks=1,
    data="en",
    data_dir=None,
    memory_size=None,
    validation_split=0.1,
    seed=0,
    task_data=None,
):
    """Load bAbI tasks with a seeded validation split held out from train.

    Args:
        tasks: a task number 1-20, a list of them, or `"all"` (joint training).
        data: `"en"` (1k questions per task) or `"en-10k"`.
        data_dir: local copy (see `BabiFiles`); default `$KERAS_RELMEM_DATA`,
            downloading only when neither is given.
        memory_size: sentences kept per story (default 70, 130 with task 3;
            MEMO's joint set-up keeps 320).
        validation_split: fraction of each task's training questions held out
            (default 0.1).
        seed: int seed of the validation split.
        task_data: optional `{task: "en" | "en-10k"}` overriding `data` for
            some tasks, e.g. `{3: "en"}` for a joint en-10k set whose task 3
            training file is missing (our shared copy lacks it).

    Returns:
        A `BabiData`.

    Example:

    ```python
    babi = load_babi(tasks=1, data="en-10k")
    train = babi.dataset("train", batch_size=32)
    ```

    Reference: Weston et al., "Towards AI-complete question answering: a set of
    prerequisite toy tasks", arXiv:1502.05698.
    """
    task_list = parse_tasks(tasks)
    if not 0.0 <= validation_split < 1.0:
        raise ValueError(f"validation_split must be in [0, 1); received {validation_split!r}.")
    files = BabiFiles(data_dir)
    rng = np.random.default_rng(seed)
    examples = {"train": [], "validation": [], "test": []}
    task_data = dict(task_data or {})
    for task, name in task_data.items():
        if name not in DATASETS:
            raise ValueError(f"task_data[{task!r}] must be one of {DATASETS}; received {name!r}.")
    for task in task_list:
        source = task_data.get(task, data)
        train = files.examples(source, task, "train")
        order = rng.permutation(len(train))
        held_out = int(round(len(train) * validation_split))
        examples["validation"] += [train[i] for i in sorted(order[:held_out])]
        examples["train"] += [train[i] for i in sorted(order[held_out:])]
        examples["test"] += files.examples(source, task, "test")
    return BabiData(
        task_list, data, examples, memory_size or default_memory_size(task_list)
    )



# The entity words of the EntNet authors' tied-keys set-up (facebookarchive
# MemNN, EntNet-babi/data.lua), in their order. Multi-word containers such as
# "treasure chest" match no single word and "yellow" is listed twice there;
# the data.lua list of shapes is not added to its entities, so not here either.
ENTITY_WORDS = {
    "locations": ("bedroom", "kitchen", "garden", "hallway", "bathroom", "office", "park", "cinema"),
    "objects": ("apple", "football", "milk", "table", "pajamas", "banana", "orange", "pineapple", "pear", "melon"),
    "actors": ("john", "mary", "sandra", "daniel", "jason", "antoine", "sumit", "yann", "bill", "fred", "julie",
               "gertrude", "winona", "emily", "jessica", "lily", "bernhard", "greg", "julius", "brian"),
    "motivations": ("hungry", "thirsty", "bored", "tired"),
    "containers": ("suitcase", "container", "box", "treasure chest", "box of chocolates", "chocolate"),
    "times": ("morning", "afternoon", "evening", "yesterday"),
    "animals": ("mice", "mouse", "sheep", "wolf", "wolves", "cat", "cats", "frog", "rhino", "swan", "lion"),
    "colours": ("gray", "yellow", "green", "white", "red", "blue", "pink", "yellow"),
}


def entity_ids(vocab):
    """Word ids of the EntNet authors' entities found in `vocab`, once each, in their order.

    One memory slot per id ties the EntNet's keys to those words' embeddings
    (`build_babi_model("entnet", ..., entity_ids=entity_ids(data.vocab))`,
    `tasks/train_babi.py --tied-keys`).

    Example:

    ```python
    >>> from keras_relmem.data.vocab import Vocabulary
    >>> vocab = Vocabulary(["mary", "went", "to", "the", "kitchen", "yellow"])
    >>> [vocab.decode([i])[0] for i in entity_ids(vocab)]
    ['kitchen', 'mary', 'yellow']

    ```
    """
    ids = []
    for words in ENTITY_WORDS.values():
        for word in words:
            if word in vocab and vocab.token_id(word) not in ids:
                ids.append(vocab.token_id(word))
    if not ids:
        raise ValueError("None of the EntNet authors' entity words is in this vocabulary: no keys to tie.")
    return ids
