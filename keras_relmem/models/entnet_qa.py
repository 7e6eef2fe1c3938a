"""The EntNet bAbI model as its authors build it: one embedding, tied keys, one PReLU."""

import keras
import numpy as np

from keras_relmem.layers import EntNetCell, EntNetEncoder, EntNetReadout


@keras.saving.register_keras_serializable(package="keras_relmem")
class EntNetQA(keras.Model):
    """Recurrent Entity Network for bAbI question answering (Henaff et al. 2017).

    Word embedding, a sentence encoder for the story and one for the query,
    `keras.layers.RNN(EntNetCell)` over the story's sentences and
    `EntNetReadout` on the final memory and the query. A functional model
    (its layers are `embedding`, `story_encoder`, `query_encoder`, `memory`
    and `readout`) whose config is its constructor's arguments, as keras-hub
    builds its backbones: loading a `.keras` file rebuilds the model, so the
    weights it shares between layers stay shared.

    What it shares follows the authors' code (facebookarchive MemNN,
    `EntNet-babi/entnet.lua`):
    - `share_prelu`: one PReLU slope vector for the memory's candidate and the
      readout (entnet.lua shares every module named "prelu");
    - `entity_ids`: with a list of word ids (`-tied 1`), one memory block per
      entity word whose key and initial memory are that word's row of the
      word embedding, so they train with it
      (`keras_relmem.data.babi.entity_ids(vocab)` gives the authors' list);
      without (`-tied 0`, the default) `num_blocks` keys of the cell's own;
    - `candidate_bias`: the bias of the memory term in the candidate.

    Args:
        vocab_size: int, word vocabulary size (id 0 = padding).
        num_answers: int, answer classes.
        story_length, sentence_length, query_length: input sizes K, S, Q.
        embedding_dim: int, `d` (default 100, the paper's).
        num_blocks: int, memory blocks without `entity_ids` (default 20).
        entity_ids: optional list of word ids whose embeddings are the keys.
        candidate_bias: bool (default True).
        share_prelu: bool (default True).
        embeddings_initializer: the word embeddings' initializer, and so the
            tied keys' (default `RandomNormal(stddev=0.1)`, the paper's).
            `tasks/train_babi.py` uses N(0, 0.3): with it bAbI task 16 leaves
            its early plateau on more seeds (docs/results.md).
        name: model name (default `"babi_entnet"`).

    Inputs `{"story": (batch, K, S), "query": (batch, Q)}` word ids, output
    answer logits `(batch, num_answers)`. The story may have any number of
    sentences K (padded sentences at the end are skipped by the mask): a batch
    padded only to its longest story gives the same answers with less work.

    Example:

    ```python
    >>> import numpy as np
    >>> model = EntNetQA(vocab_size=30, num_answers=5, story_length=6,
    ...                  sentence_length=4, query_length=3, embedding_dim=8,
    ...                  entity_ids=[3, 7, 9])
    >>> model.get_layer("memory").cell.num_blocks  # one block per entity
    3
    >>> x = {"story": np.ones((2, 6, 4), "int32"), "query": np.ones((2, 3), "int32")}
    >>> tuple(model(x).shape)
    (2, 5)

    ```

    Reference: Henaff, Weston, Szlam, Bordes, LeCun, "Tracking the world
    state with recurrent entity networks", ICLR 2017, arXiv:1612.03969.
    """

    def __init__(
        self,
        vocab_size,
        num_answers,
        story_length,
        sentence_length,
        query_length,
        embedding_dim=100,
        num_blocks=20,
        entity_ids=None,
        candidate_bias=True,
        share_prelu=True,
        embeddings_initializer=None,
        name="babi_entnet",
        **kwargs,
    ):
        # Any number of sentences: batches trimmed to their longest story
        # (`BabiData.bucketed_dataset`) skip the padded steps; `story_length`
        # records the memory window the data was cut to.
        story = keras.Input((None, sentence_length), dtype="int32", name="story")
        query = keras.Input((query_length,), dtype="int32", name="query")
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=0.1)
        embeddings_initializer = keras.initializers.get(embeddings_initializer)
        embed = keras.layers.Embedding(
            vocab_size, embedding_dim, mask_zero=True, embeddings_initializer=embeddings_initializer,
            name="embedding",
        )
        sentences = EntNetEncoder(name="story_encoder")(embed(story))
        question = EntNetEncoder(name="query_encoder")(embed(query))
        prelu = EntNetReadout.shared_prelu(embedding_dim) if share_prelu else None
        keys, blocks = None, num_blocks
        if entity_ids is not None:
            entity_ids = [int(i) for i in entity_ids]
            bad = [i for i in entity_ids if not 0 < i < vocab_size]
            if bad or not entity_ids:
                raise ValueError(f"entity_ids must be a non-empty list of word ids in [1, {vocab_size}); "
                                 f"received {entity_ids}.")
            rows = np.asarray(entity_ids, "int32")
            blocks = len(entity_ids)

            def keys():
                return embed(rows)

        cell = EntNetCell(num_blocks=blocks, units=embedding_dim, keys=keys,
                          candidate_bias=candidate_bias, activation=prelu)
        memory = keras.layers.RNN(cell, name="memory")(sentences)
        logits = EntNetReadout(num_answers, activation=prelu, name="readout")([memory, question])
        super().__init__(inputs={"story": story, "query": query}, outputs=logits, name=name, **kwargs)
        self.config_args = {
            "vocab_size": vocab_size, "num_answers": num_answers, "story_length": story_length,
            "sentence_length": sentence_length, "query_length": query_length, "embedding_dim": embedding_dim,
            "num_blocks": num_blocks, "entity_ids": entity_ids,
            "candidate_bias": bool(candidate_bias), "share_prelu": bool(share_prelu),
            "embeddings_initializer": keras.initializers.serialize(embeddings_initializer),
        }

    def get_config(self):
        return {**self.config_args, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
