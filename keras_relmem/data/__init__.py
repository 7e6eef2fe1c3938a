"""Datasets for the memory models: bAbI, language-modelling corpora, generated tasks.

- `babi.load_babi`: bAbI v1.2 question answering as padded arrays / `tf.data`.
- `lm.load_corpus`: Penn Treebank, WikiText-2/103 token ids and BPTT batches.
- `synthetic`: Nth Farthest, paired associative inference, shortest path.
- `lte`: Learning to Execute programs and memorization tasks, with their curricula.
- `toy`: tiny sanity tasks.
- `renaming`: interchangeable words renamed per question (a bAbI training augmentation).
- `tfds_builders`: import it to register `babi_qa` and `lm_corpus` with TFDS.

Local copies come from a `data_dir` argument or `$KERAS_RELMEM_DATA`; the
official sources are downloaded only when neither is given.
"""

from keras_relmem.data import babi, lm, lte, renaming, synthetic, toy
from keras_relmem.data.babi import load_babi
from keras_relmem.data.lm import load_corpus
from keras_relmem.data.sources import DataFormatError
from keras_relmem.data.vocab import Vocabulary

__all__ = [
    "DataFormatError",
    "Vocabulary",
    "babi",
    "lm",
    "load_babi",
    "lte",
    "load_corpus",
    "renaming",
    "synthetic",
    "toy",
]
