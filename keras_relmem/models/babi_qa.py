"""bAbI question-answering models built around the memory layers.

Every model takes `{"story": (batch, K, S), "query": (batch, Q)}` word ids
(0 = padding) and returns answer logits `(batch, num_answers)`.
"""

import inspect

import keras

from keras_relmem.layers import EntNetEncoder, RelationalMemory, RelationalMemoryCell
from keras_relmem.models.entnet_qa import EntNetQA
from keras_relmem.models.memo import MEMOClassifier

# Arguments the builders set themselves from the data (and Keras' own), not settings of a model.
_SET_BY_BUILDER = {"name", "dtype", "vocab_size", "num_answers", "story_length", "sentence_length", "query_length",
                   "max_time"}


def rmc_layer(mem_slots, head_size, precompute_inputs=True, **settings):
    """An RMC core over a sequence: `RelationalMemory` (the input-only terms of every step computed before the
    recurrence), or with `precompute_inputs=False` the reference `keras.layers.RNN(RelationalMemoryCell(...))`,
    kept for benchmarks; both have the same weights and outputs.

    Args:
        mem_slots, head_size: the cell's sizes.
        precompute_inputs: `RelationalMemory` (True) or `RNN(RelationalMemoryCell)`.
        **settings: `RelationalMemoryCell` arguments (`num_heads`, `num_blocks`, `gate_style`,
            `attention_mlp_layers`, `key_size`) and `keras.layers.RNN` arguments (`return_sequences`, `stateful`,
            `name`, ...).
    """
    cell_names = ("num_heads", "num_blocks", "gate_style", "attention_mlp_layers", "key_size")
    cell = {"mem_slots": mem_slots, "head_size": head_size, **{k: settings.pop(k) for k in cell_names if k in settings}}
    if precompute_inputs:
        return RelationalMemory(**cell, **settings)
    return keras.layers.RNN(RelationalMemoryCell(**cell), **settings)


def _inputs(story_length, sentence_length, query_length):
    story = keras.Input((story_length, sentence_length), dtype="int32", name="story")
    query = keras.Input((query_length,), dtype="int32", name="query")
    return story, query


def _encoded(story, query, vocab_size, dim):
    embed = keras.layers.Embedding(
        vocab_size,
        dim,
        mask_zero=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.1),
        name="embedding",
    )
    sentences = EntNetEncoder(name="story_encoder")(embed(story))
    question = EntNetEncoder(name="query_encoder")(embed(query))
    return sentences, question


def rmc_qa(vocab_size, num_answers, story_length, sentence_length, query_length, embedding_dim=64, mem_slots=4,
           head_size=32, num_heads=2, num_blocks=1, gate_style="unit", attention_mlp_layers=2):
    """The RMC on bAbI: EntNet's sentence encoder, a Relational Memory Core over the sentences, then an MLP on
    `[memory, query]` (Santoro et al. 2018 read bAbI this way)."""
    story, query = _inputs(story_length, sentence_length, query_length)
    sentences, question = _encoded(story, query, vocab_size, embedding_dim)
    memory = rmc_layer(mem_slots, head_size, num_heads=num_heads, num_blocks=num_blocks, gate_style=gate_style,
                       attention_mlp_layers=attention_mlp_layers, name="memory")(sentences)
    return _answer(story, query, memory, question, num_answers, "rmc")


def lstm_qa(vocab_size, num_answers, story_length, sentence_length, query_length, embedding_dim=64, units=128):
    """The baseline: EntNet's sentence encoder, an LSTM over the sentences, then an MLP on `[state, query]`."""
    story, query = _inputs(story_length, sentence_length, query_length)
    sentences, question = _encoded(story, query, vocab_size, embedding_dim)
    memory = keras.layers.LSTM(units, name="memory")(sentences)
    return _answer(story, query, memory, question, num_answers, "lstm")


def _answer(story, query, memory, question, num_answers, kind):
    hidden = keras.layers.Concatenate()([memory, question])
    hidden = keras.layers.Dense(256, activation="relu", name="answer_mlp")(hidden)
    logits = keras.layers.Dense(num_answers, name="answer")(hidden)
    return keras.Model({"story": story, "query": query}, logits, name=f"babi_{kind}")


def memo_qa(vocab_size, num_answers, story_length, sentence_length, query_length, key_size=32, max_hops=5,
            time_encoding=True, **settings):
    """MEMO on bAbI: a `MEMOClassifier` over the sentences as separate facts, with a time encoding of each fact's
    age (`time_encoding=False`: facts are their words alone); `settings` are `MEMOClassifier`'s and `MEMO`'s
    arguments, under their names."""
    memo = MEMOClassifier(num_answers, vocab_size=vocab_size, max_time=story_length if time_encoding else 0,
                          key_size=key_size, max_hops=max_hops, name="babi_memo", **settings)
    memo.build({"story": (None, story_length, sentence_length), "query": (None, query_length)})
    return memo


memo_qa.forwards_to = (MEMOClassifier,)

# The bAbI models by name: each builder's signature holds the model's settings and their defaults.
BABI_MODELS = {"entnet": EntNetQA, "rmc": rmc_qa, "lstm": lstm_qa, "memo": memo_qa}
# Those that read stories of any number of sentences (batches can be cut to their longest story).
ANY_STORY_LENGTH = ("entnet", "memo")


def settings_of(builder):
    """`{setting: default}` of a model builder (or constructor): its keyword arguments, and those of the classes it
    passes its other settings on to (`builder.forwards_to`), the builder's own first."""
    settings = {}
    for target in (*getattr(builder, "forwards_to", ()), builder)[::-1]:
        for parameter in inspect.signature(target).parameters.values():
            if parameter.default is not inspect.Parameter.empty and parameter.name not in _SET_BY_BUILDER:
                settings.setdefault(parameter.name, parameter.default)
    return settings


def model_defaults(name):
    """`{setting: default}` of bAbI model `name` (from its builder's signature)."""
    if name not in BABI_MODELS:
        raise ValueError(f"model must be one of {sorted(BABI_MODELS)}; received {name!r}.")
    return settings_of(BABI_MODELS[name])


def build_babi_model(model, vocab_size, num_answers, story_length, sentence_length, query_length, **settings):
    """A bAbI QA model: `"entnet"`, `"rmc"`, `"lstm"` or `"memo"` (`BABI_MODELS`).

    Args:
        model: which memory: `"entnet"` (`EntNetQA`: Henaff et al.'s sentence encoder, EntNet cell, attention
            read-out), `"rmc"` (`rmc_qa`), `"lstm"` (`lstm_qa`, the baseline) or `"memo"` (`memo_qa`: a
            `MEMOClassifier` over the sentences as separate facts, trained by its own REINFORCE step).
        vocab_size: int, word vocabulary size (id 0 = padding).
        num_answers: int, answer classes.
        story_length, sentence_length, query_length: tensor sizes K, S, Q.
        **settings: the model's settings, under its builder's argument names (`model_defaults(model)` lists
            them with their defaults); None leaves a setting at its default.

    Returns:
        An uncompiled `keras.Model` named `babi_<model>`.

    Example:

    ```python
    >>> model = build_babi_model("entnet", vocab_size=40, num_answers=10,
    ...                          story_length=70, sentence_length=8,
    ...                          query_length=5)
    >>> model.name, tuple(model.output.shape)
    ('babi_entnet', (None, 10))

    ```

    With a `BabiData` the sizes come from the data:
    `build_babi_model("entnet", len(data.vocab), len(data.answer_vocab),
    data.story_length, data.sentence_length, data.query_length)`.
    """
    known = model_defaults(model)
    given = {name: value for name, value in settings.items() if value is not None}
    unknown = set(given) - set(known)
    if unknown:
        raise ValueError(f"Unknown hyper-parameters for {model}: {sorted(unknown)}; known: {sorted(known)}.")
    return BABI_MODELS[model](vocab_size, num_answers, story_length, sentence_length, query_length, **given)
