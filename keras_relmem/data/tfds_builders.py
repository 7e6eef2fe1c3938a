"""TensorFlow Datasets builders for bAbI and the language-modelling corpora.

Importing this module registers `babi_qa` and `lm_corpus` with TFDS:

```python
>>> import os, tempfile
>>> import tensorflow_datasets as tfds
>>> import keras_relmem.data.tfds_builders  # registers the builders
>>> local = os.environ["KERAS_RELMEM_DATA"]  # or your copy of the data folder
>>> ds = tfds.load(
...     "babi_qa/en-qa1",
...     split="train",
...     data_dir=tempfile.mkdtemp(),
...     download_and_prepare_kwargs={
...         "download_config": tfds.download.DownloadConfig(manual_dir=local)
...     },
... )
Downloading and preparing dataset ...
Dataset babi_qa downloaded and prepared to .... Subsequent calls will reuse this data.
>>> int(ds.cardinality())
1000

```

The local copy comes from TFDS' `manual_dir` (the data folder, the
`tasks_1-20_v1-2` folder or the archive), else `$KERAS_RELMEM_DATA`; only
when neither exists is the official archive downloaded. Parsing is the same
code as `keras_relmem.data.babi` and `keras_relmem.data.lm`.
"""

import pathlib

import numpy as np
import tensorflow_datasets as tfds

from keras_relmem.data import babi, lm, sources

_MANUAL = (
    "Point `manual_dir` (or $KERAS_RELMEM_DATA) at a folder holding "
    "babi/tasks_1-20_v1-2/{en,en-10k}/ (bAbI) or ptb/, wikitext-2/, wikitext-103/ "
    "(language modelling), as in keras-relmem's README."
)


def _local_root(dl_manager):
    """The manual dir if it exists, else $KERAS_RELMEM_DATA, else None."""
    manual = getattr(dl_manager, "_manual_dir", None)
    if manual is not None and pathlib.Path(manual).exists():
        return pathlib.Path(manual)
    return sources.data_root()


class BabiQaConfig(tfds.core.BuilderConfig):
    """One bAbI task of one data size (`en` or `en-10k`)."""

    def __init__(self, *, data, task, **kwargs):
        super().__init__(
            name=f"{data}-qa{task}",
            description=f"bAbI v1.2 task {task} ({babi.TASK_NAMES[task]}), {data}.",
            **kwargs,
        )
        self.data = data
        self.task = task


class BabiQa(tfds.core.GeneratorBasedBuilder):
    """bAbI question answering (Weston et al. 2015), tasks 1-20, v1.2.

    One example per question: `story` (the sentences before it, lower-cased,
    punctuation removed, oldest first), `query`, `answer` (one label, e.g.
    `"n,s"`), `supporting_facts` (indices into `story`).
    """

    VERSION = tfds.core.Version("1.2.0")
    MANUAL_DOWNLOAD_INSTRUCTIONS = _MANUAL
    BUILDER_CONFIGS = [
        BabiQaConfig(data=data, task=task, version="1.2.0")
        for data in babi.DATASETS
        for task in babi.TASK_NAMES
    ]

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=self.__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "story": tfds.features.Sequence(tfds.features.Text()),
                    "query": tfds.features.Text(),
                    "answer": tfds.features.Text(),
                    "supporting_facts": tfds.features.Sequence(tfds.features.Scalar(np.int32)),
                }
            ),
            supervised_keys=None,
            homepage="https://research.facebook.com/downloads/babi/",
            citation="Weston et al., Towards AI-Complete Question Answering, arXiv:1502.05698",
        )

    def _split_generators(self, dl_manager):
        root = _local_root(dl_manager)
        if root is None:
            root = pathlib.Path(dl_manager.download(sources.BABI_URL))
        files = babi.BabiFiles(root)
        return {
            split: self._generate_examples(files, split) for split in babi.SPLITS
        }

    def _generate_examples(self, files, split):
        config = self.builder_config
        for index, ex in enumerate(files.examples(config.data, config.task, split)):
            positions = {sid: i for i, sid in enumerate(ex.sentence_ids)}
            yield index, {
                "story": [" ".join(sentence) for sentence in ex.story],
                "query": " ".join(ex.query),
                "answer": ex.answer,
                "supporting_facts": [positions[s] for s in ex.supporting_facts],
            }


class LmCorpusConfig(tfds.core.BuilderConfig):
    def __init__(self, *, corpus, **kwargs):
        super().__init__(name=corpus, description=f"{corpus}, one example per line.", **kwargs)
        self.corpus = corpus


class LmCorpus(tfds.core.GeneratorBasedBuilder):
    """Word-level language-modelling corpora: `ptb`, `wikitext-2`, `wikitext-103`.

    One example per line of the standard files (`text`, already tokenised,
    without the `<eos>` that `keras_relmem.data.lm` appends).
    """

    VERSION = tfds.core.Version("1.0.0")
    MANUAL_DOWNLOAD_INSTRUCTIONS = _MANUAL
    BUILDER_CONFIGS = [LmCorpusConfig(corpus=c, version="1.0.0") for c in lm.CORPORA]

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=self.__doc__,
            features=tfds.features.FeaturesDict({"text": tfds.features.Text()}),
        )

    def _split_generators(self, dl_manager):
        root = _local_root(dl_manager)
        names = {"train": "train", "validation": "valid", "test": "test"}
        return {
            split: self._generate_examples(lm.corpus_file(self.builder_config.corpus, name, root))
            for split, name in names.items()
        }

    def _generate_examples(self, path):
        for index, line in enumerate(sources.read_lines(path)):
            yield index, {"text": line.strip()}
