"""EntNetQA: the authors' ties (keys = entity embeddings, one PReLU) survive training and .keras files."""

import keras
import numpy as np
import pytest

from keras_relmem.data import babi
from keras_relmem.data.vocab import Vocabulary
from keras_relmem.models import EntNetQA, build_babi_model
from tests.helpers import assert_close

SIZES = dict(vocab_size=30, num_answers=5, story_length=6, sentence_length=4, query_length=3, embedding_dim=8)


def batch(seed=0):
    rng = np.random.default_rng(seed)
    story = rng.integers(1, 30, size=(8, 6, 4)).astype("int32")
    story[:, 4:] = 0  # padded sentences
    return {"story": story, "query": rng.integers(1, 30, size=(8, 3)).astype("int32")}, rng.integers(0, 5, 8)


def trained(model):
    model.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = batch()
    model.fit(x, y, epochs=3, batch_size=4, verbose=0)
    return model


def test_tied_keys_stay_the_entity_rows_through_training_and_a_keras_file(tmp_path):
    entities = [3, 7, 9, 12]
    model = trained(EntNetQA(**SIZES, entity_ids=entities))
    cell, embedding = model.get_layer("memory").cell, model.get_layer("embedding")
    assert cell.num_blocks == 4 and cell.tied_keys
    assert not any("keys" in w.path for w in model.weights)  # no key weights of the cell's own
    rows = keras.ops.convert_to_numpy(embedding.embeddings)[entities]
    assert_close(cell.key_rows(), rows, atol=0)
    assert_close(cell.get_initial_state(batch_size=1)[0], rows.reshape(1, -1), atol=0)
    path = tmp_path / "entnet.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    x, _ = batch(1)
    assert_close(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    # Still tied after loading: moving the embedding moves the keys.
    table = loaded.get_layer("embedding").embeddings
    table.assign(keras.ops.convert_to_numpy(table) + 1.0)
    assert_close(loaded.get_layer("memory").cell.key_rows(), rows + 1.0, atol=1e-6)
    assert loaded.get_config() == model.get_config()


def test_one_prelu_for_memory_and_readout_after_loading(tmp_path):
    model = trained(build_babi_model("entnet", 30, 5, 6, 4, 3, embedding_dim=8))
    assert isinstance(model, EntNetQA)
    cell, readout = model.get_layer("memory").cell, model.get_layer("readout")
    assert cell.activation is readout.activation
    assert sum("alpha" in w.path for w in model.trainable_weights) == 1
    assert cell.candidate_bias
    path = tmp_path / "entnet.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("memory").cell.activation is loaded.get_layer("readout").activation
    assert_close(loaded.get_layer("readout").activation.alpha, cell.activation.alpha, atol=0)


def test_untied_and_unshared_is_a_choice():
    model = EntNetQA(**SIZES, share_prelu=False, candidate_bias=False, num_blocks=5)
    assert sum("alpha" in w.path for w in model.trainable_weights) == 2
    assert model.get_layer("memory").cell.num_blocks == 5
    assert not any("U/bias" in w.path for w in model.weights)


def test_embeddings_initializer_sets_the_scale_of_words_and_tied_keys_and_survives_a_keras_file(tmp_path):
    sizes = {**SIZES, "vocab_size": 400, "embedding_dim": 50}  # 20,000 draws: the std to about 1%
    default = EntNetQA(**sizes)
    wide = EntNetQA(**sizes, entity_ids=[3, 7], embeddings_initializer=keras.initializers.RandomNormal(stddev=0.3))
    std = {name: float(np.std(keras.ops.convert_to_numpy(model.get_layer("embedding").embeddings)))
           for name, model in (("default", default), ("wide", wide))}
    assert abs(std["default"] - 0.1) < 0.005 and abs(std["wide"] - 0.3) < 0.015, std  # the paper's N(0, 0.1)
    keys = keras.ops.convert_to_numpy(wide.get_layer("memory").cell.key_rows())
    assert_close(keys, keras.ops.convert_to_numpy(wide.get_layer("embedding").embeddings)[[3, 7]])
    wide.save(tmp_path / "wide.keras")
    loaded = keras.saving.load_model(tmp_path / "wide.keras")
    assert loaded.get_config()["embeddings_initializer"]["config"]["stddev"] == 0.3
    assert_close(keras.ops.convert_to_numpy(loaded.get_layer("embedding").embeddings),
                 keras.ops.convert_to_numpy(wide.get_layer("embedding").embeddings))


@pytest.mark.parametrize("ids", [[], [0, 3], [3, 30]])
def test_entity_ids_are_checked(ids):
    with pytest.raises(ValueError, match="entity_ids"):
        EntNetQA(**SIZES, entity_ids=ids)


def test_entity_ids_follow_the_authors_list():
    vocab = Vocabulary(["the", "yellow", "john", "kitchen", "went", "box", "treasure", "chest", "hungry"])
    names = [vocab.decode([i])[0] for i in babi.entity_ids(vocab)]
    # data.lua order: locations, objects, actors, motivations, containers, times, animals, colours;
    # "treasure chest" is two words and matches nothing; "yellow" (listed twice there) once.
    assert names == ["kitchen", "john", "hungry", "box", "yellow"]
    with pytest.raises(ValueError, match="entity words"):
        babi.entity_ids(Vocabulary(["went", "to"]))


def test_stories_trimmed_to_their_longest_give_the_padded_answers():
    """Bucketed training feeds (b, bound, S) stories: the padded steps are masked, so answers match."""
    model = EntNetQA(**SIZES, entity_ids=[3, 7, 9])
    x, _ = batch(2)  # sentences 4 and 5 are padding
    padded = {**x, "story": np.concatenate([x["story"], np.zeros((8, 64, 4), "int32")], axis=1)}
    trimmed = {**x, "story": x["story"][:, :4]}
    expected = keras.ops.convert_to_numpy(model(padded))
    assert_close(model(trimmed), expected, atol=1e-5)
    assert_close(model(x), expected, atol=1e-5)
