"""Language-modelling corpora against the real files in ../shared/data."""

import os

import numpy as np
import pytest

from keras_relmem.data import DataFormatError, lm, load_corpus

needs_data = pytest.mark.skipif(
    not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA (../shared/data)"
)


@needs_data
def test_ptb_counts_and_vocabulary():
    ptb = load_corpus("ptb")
    assert len(ptb.ids["train"]) == 929_589
    assert len(ptb.ids["valid"]) == 73_760
    assert len(ptb.ids["test"]) == 82_430
    assert len(ptb.vocab) == 10_000
    assert "<eos>" in ptb.vocab and "<unk>" in ptb.vocab
    first_line = ptb.files["train"].read_text().split("\n")[0].split()
    assert ptb.vocab.decode(ptb.ids["train"][: len(first_line) + 1]) == first_line + ["<eos>"]


@needs_data
def test_wikitext2_counts_through_the_same_path():
    wiki = load_corpus("wikitext-2")
    assert len(wiki.ids["valid"]) == 217_646
    assert len(wiki.ids["test"]) == 245_569
    # The official train file is missing here; its exact prefix stands in.
    assert wiki.files["train"].name == "train_prefix_565_articles.txt"
    assert len(wiki.ids["train"]) == 1_837_298
    assert len(wiki.vocab) < 33_278


@needs_data
def test_missing_corpus_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="wikitext-103 train"):
        load_corpus("wikitext-103")
    with pytest.raises(ValueError, match="corpus must be one of"):
        load_corpus("enwik8")


def test_bptt_rows_continue_across_batches():
    ids = np.arange(1003)
    batches = list(lm.bptt_batches(ids, batch_size=4, bptt=10))
    rows = 1002 // 4
    assert len(batches) == rows // 10
    for i, (x, y) in enumerate(batches):
        assert x.shape == y.shape == (4, 10)
        np.testing.assert_array_equal(y, x + 1)  # targets are the next tokens
        for r in range(4):
            assert x[r, 0] == r * rows + i * 10
    # Row r of batch i+1 starts where row r of batch i stopped.
    np.testing.assert_array_equal(batches[1][0][:, 0], batches[0][0][:, -1] + 1)


def test_bptt_dataset_and_windows():
    ids = np.arange(2001)
    ds = lm.bptt_dataset(ids, 4, 25)
    x, y = next(iter(ds))
    assert x.shape == (4, 25)
    windows = lm.window_dataset(ids, batch_size=8, window=50, shuffle=True, seed=0)
    x, y = next(iter(windows))
    assert x.shape == (8, 50)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x) + 1)
    assert all(int(row[0]) % 50 == 0 for row in np.asarray(x))


def test_too_little_data_is_an_error():
    with pytest.raises(ValueError, match="too few"):
        list(lm.bptt_batches(np.arange(10), 4, 5))


def test_empty_corpus_file_is_an_error(tmp_path):
    folder = tmp_path / "ptb"
    folder.mkdir()
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text(" a b \n")
    (folder / "valid.txt").write_text("")
    with pytest.raises(DataFormatError, match="valid.txt: the file is empty"):
        load_corpus("ptb", data_dir=tmp_path)


def test_a_byte_that_is_not_utf8_in_a_corpus_names_the_file(tmp_path):
    from keras_relmem.data import DataFormatError
    from keras_relmem.data.lm import read_tokens

    path = tmp_path / "train.txt"
    path.write_bytes(b" the cat\n sat on\xff the mat\n")
    with pytest.raises(DataFormatError, match=rf"{path}:2: byte 0xff at byte offset 16 is not UTF-8"):
        read_tokens(path)
