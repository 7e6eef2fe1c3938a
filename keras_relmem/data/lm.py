"""Word-level language-modelling corpora: Penn Treebank and WikiText.

One code path for all three corpora: every line of the standard files becomes
its words followed by `<eos>` (empty lines too, as in the usual WikiText
counts), the vocabulary comes from the training split (rare words are already
`<unk>` in these files), and batches come either for truncated
back-propagation through time (each batch row continues the previous batch's
row, so a stateful RNN carries its state) or as independent shuffled windows.
"""

import dataclasses
import pathlib
import zipfile

import numpy as np

from keras_relmem.data import sources
from keras_relmem.data.vocab import Vocabulary

EOS = "<eos>"
UNK = "<unk>"
CORPORA = ("ptb", "wikitext-2", "wikitext-103")
SPLITS = ("train", "valid", "test")

# Local layout under the data folder (see ../shared/data/README.md).
LOCAL_FILES = {
    "ptb": {
        "train": ["train.txt", "ptb.train.txt"],
        "valid": ["valid.txt", "ptb.valid.txt"],
        "test": ["test.txt", "ptb.test.txt"],
    },
    "wikitext-2": {
        # The official train file could not be obtained for our shared data;
        # its exact byte prefix stands in when the full file is absent.
        "train": ["train.txt", "wiki.train.tokens", "train_prefix_565_articles.txt"],
        "valid": ["valid.txt", "wiki.valid.tokens"],
        "test": ["test.txt", "wiki.test.tokens"],
    },
    "wikitext-103": {
        "train": ["train.txt", "wiki.train.tokens"],
        "valid": ["valid.txt", "wiki.valid.tokens"],
        "test": ["test.txt", "wiki.test.tokens"],
    },
}


def corpus_file(corpus, split, data_dir=None):
    """Path of one split's file, from a local copy or (last resort) downloaded."""
    if corpus not in CORPORA:
        raise ValueError(f"corpus must be one of {CORPORA}; received {corpus!r}.")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}; received {split!r}.")
    root = sources.data_root(data_dir)
    if root is None:
        return _download(corpus, split)
    folder = root / corpus if (root / corpus).is_dir() else root
    for name in LOCAL_FILES[corpus][split]:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(
        f"No {corpus} {split} file under {folder}: expected one of "
        f"{LOCAL_FILES[corpus][split]}."
    )


def _download(corpus, split):
    if corpus == "ptb":
        return sources.download(sources.PTB_URL.format(split=split), f"ptb.{split}.txt")
    archive = sources.download(sources.WIKITEXT_URLS[corpus], f"{corpus}-v1.zip")
    target = archive.parent / corpus
    if not target.is_dir():
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(archive.parent)
    return target / f"wiki.{split}.tokens"


def read_tokens(path):
    """The file's words with one `<eos>` per line; a clear error if empty."""
    lines = sources.read_lines(path)
    tokens = []
    for line in lines:
        tokens.extend(line.split())
        tokens.append(EOS)
    return tokens


@dataclasses.dataclass
class LMCorpus:
    """Token ids of the three splits and their vocabulary.

    Attributes:
        name: the corpus name.
        vocab: `Vocabulary` from the training split, `<unk>` as the OOV token
            and no padding (PTB: 10,000 words including `<eos>`).
        ids: dict split -> int32 array of token ids.
        files: dict split -> the file read.
    """

    name: str
    vocab: Vocabulary
    ids: dict
    files: dict

    def bptt_dataset(self, split, batch_size, bptt, drop_remainder=True):
        """Batches for truncated BPTT; see `bptt_batches`."""
        return bptt_dataset(self.ids[split], batch_size, bptt, drop_remainder)

    def window_dataset(self, split, batch_size, window, shuffle=True, seed=0):
        """Independent windows; see `window_dataset`."""
        return window_dataset(self.ids[split], batch_size, window, shuffle, seed)


def load_corpus(corpus="ptb", data_dir=None):
    """Load a language-modelling corpus.

    Args:
        corpus: `"ptb"` (default), `"wikitext-2"` or `"wikitext-103"`.
        data_dir: local data folder (holding `ptb/`, `wikitext-2/`, ...) or the
            corpus folder itself; default `$KERAS_RELMEM_DATA`, downloading
            only when neither is given.

    Returns:
        An `LMCorpus`.

    Example:

    ```python
    >>> ptb = load_corpus("ptb")  # from $KERAS_RELMEM_DATA/ptb
    >>> len(ptb.vocab)
    10000
    >>> train = ptb.bptt_dataset("train", batch_size=64, bptt=100)
    >>> inputs, targets = next(iter(train))
    >>> tuple(inputs.shape), tuple(targets.shape)
    ((64, 100), (64, 100))

    ```
    """
    files = {split: corpus_file(corpus, split, data_dir) for split in SPLITS}
    train_tokens = read_tokens(files["train"])
    # `<unk>` is a word of these corpora; as the OOV token it also catches
    # words of valid/test missing from a partial training file.
    vocab = Vocabulary.build([train_tokens], order="frequency", pad_token=None, oov_token=UNK)
    ids = {"train": np.asarray(vocab.lookup(train_tokens), "int32")}
    for split in ("valid", "test"):
        ids[split] = np.asarray(vocab.lookup(read_tokens(files[split])), "int32")
    return LMCorpus(corpus, vocab, ids, {k: pathlib.Path(v) for k, v in files.items()})


def bptt_batches(ids, batch_size, bptt):
    """NumPy `(inputs, targets)` pairs for truncated back-propagation through time.

    The token stream is cut into `batch_size` contiguous rows; batch `i` holds
    columns `[i*bptt, (i+1)*bptt)` of every row and its targets are shifted by
    one token, so row `r` of batch `i+1` continues row `r` of batch `i`. The
    tail that does not fill a whole window is dropped (static shapes).
    """
    ids = np.asarray(ids)
    rows = (len(ids) - 1) // batch_size
    if rows < bptt:
        raise ValueError(
            f"{len(ids)} tokens are too few for batch_size={batch_size} x bptt={bptt}."
        )
    inputs = ids[: rows * batch_size].reshape(batch_size, rows)
    targets = ids[1 : rows * batch_size + 1].reshape(batch_size, rows)
    for start in range(0, rows - bptt + 1, bptt):
        yield inputs[:, start : start + bptt], targets[:, start : start + bptt]


def bptt_dataset(ids, batch_size, bptt, drop_remainder=True):
    """`tf.data` version of `bptt_batches`, in order (never shuffle it)."""
    import tensorflow as tf

    pairs = list(bptt_batches(ids, batch_size, bptt))
    inputs = np.stack([p[0] for p in pairs])
    targets = np.stack([p[1] for p in pairs])
    return tf.data.Dataset.from_tensor_slices((inputs, targets)).prefetch(tf.data.AUTOTUNE)


def window_dataset(ids, batch_size, window, shuffle=True, seed=0):
    """Non-overlapping windows of `window` tokens as independent examples.

    For models that start every sequence from a fresh state. Targets are the
    inputs shifted by one token.
    """
    import tensorflow as tf

    ids = np.asarray(ids)
    count = (len(ids) - 1) // window
    if count < 1:
        raise ValueError(f"{len(ids)} tokens are too few for windows of {window}.")
    inputs = ids[: count * window].reshape(count, window)
    targets = ids[1 : count * window + 1].reshape(count, window)
    ds = tf.data.Dataset.from_tensor_slices((inputs, targets))
    if shuffle:
        ds = ds.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
