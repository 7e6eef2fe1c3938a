"""bAbI question-answering models built around the memory layers.

Every model takes `{"story": (batch, K, S), "query": (batch, Q)}` word ids
(0 = padding) and returns answer logits `(batch, num_answers)`.
"""

import keras

from keras_relmem.layers import EntNetEncoder, RelationalMemory, RelationalMemoryCell
from keras_relmem.models.entnet_qa import EntNetQA
from keras_relmem.models.memo import TRAINING_DEFAULTS as MEMO_TRAINING_DEFAULTS

# Defaults per model (the EntNet paper's bAbI set-up: 20 blocks, d = 100).
DEFAULTS = {
    "entnet": {"embedding_dim": 100, "num_blocks": 20, "entity_ids": None, "candidate_bias": True,
               "share_prelu": True, "embeddings_initializer": None},
    "rmc": {
        "embedding_dim": 64,
        "mem_slots": 4,
        "head_size": 32,
        "num_heads": 2,
        "num_blocks": 1,
        "gate_style": "unit",
        "attention_mlp_layers": 2,
    },
    "lstm": {"embedding_dim": 64, "units": 128},
    "memo": {
        "embedding_dim": 64,
        "num_heads": 4,
        "key_size": 32,
        "max_hops": 5,
        "answer_units": 128,
        **{k: v for k, v in MEMO_TRAINING_DEFAULTS.items() if k != "ponder_cost"},
        "bias_init": -3.0,
        "attention_supervision": 0.0,
        "supervised_hops": 1,
        "halting_inputs": "distance+entropy",
        "attention_dropout": 0.1,
        "answer_dropout": 0.1,
        "linear_start": False,
        "bag_init": False,
        "share_hop_weights": True,
        "logit_scale": None,
        "coverage_penalty": 0.0,
        "sum_fact_items": False,
        "time_encoding": True,
    },
}


def rmc_layer(config, precompute_inputs=True, **rnn_kwargs):
    """The RMC core of a model from the RMC entries of a model config dict.

    Args:
        config: dict with `mem_slots`, `head_size` and optionally `num_heads`,
            `num_blocks`, `gate_style`, `attention_mlp_layers`, `key_size`.
        precompute_inputs: True gives `RelationalMemory` (input-only terms
            computed before the recurrence); False the reference
            `keras.layers.RNN(RelationalMemoryCell(...))`, kept for
            benchmarks. Both have the same weights and outputs.
        **rnn_kwargs: `keras.layers.RNN` arguments (`return_sequences`,
            `stateful`, `name`, ...).
    """
    names = ("mem_slots", "head_size", "num_heads", "num_blocks", "gate_style",
             "attention_mlp_layers", "key_size")
    cell_args = {name: config[name] for name in names if name in config}
    if precompute_inputs:
        return RelationalMemory(**cell_args, **rnn_kwargs)
    return keras.layers.RNN(RelationalMemoryCell(**cell_args), **rnn_kwargs)


def model_defaults(name):
    if name not in DEFAULTS:
        raise ValueError(f"model must be one of {sorted(DEFAULTS)}; received {name!r}.")
    return dict(DEFAULTS[name])


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


def build_babi_model(
    model,
    vocab_size,
    num_answers,
    story_length,
    sentence_length,
    query_length,
    **hparams,
):
    """A bAbI QA model: `"entnet"`, `"rmc"` or `"lstm"`.

    Args:
        model: which memory: `"entnet"` (Henaff et al.: sentence encoder, EntNet
            cell, attention read-out), `"rmc"` (the same sentence encoder, a
            Relational Memory Core over the sentences, then an MLP on
            `[memory, query]`), `"lstm"` (the baseline: an LSTM over the
            sentences, then an MLP on `[state, query]`) or `"memo"` (a
            `MEMOClassifier` over the sentences as separate facts with a time
            encoding, trained by its own REINFORCE step; `time_encoding=False`
            leaves the time encoding out).
        vocab_size: int, word vocabulary size (id 0 = padding).
        num_answers: int, answer classes.
        story_length, sentence_length, query_length: tensor sizes K, S, Q.
        **hparams: overrides of `DEFAULTS[model]`.

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
    config = model_defaults(model)
    unknown = set(hparams) - set(config)
    if unknown:
        raise ValueError(
            f"Unknown hyper-parameters for {model}: {sorted(unknown)}; "
            f"known: {sorted(config)}."
        )
    config.update({k: v for k, v in hparams.items() if v is not None})
    if model == "memo":
        from keras_relmem.models.memo import MEMOClassifier

        max_time = story_length if config.pop("time_encoding") else 0
        memo = MEMOClassifier(num_answers, vocab_size=vocab_size, max_time=max_time, name="babi_memo", **config)
        memo.build({"story": (None, story_length, sentence_length), "query": (None, query_length)})
        return memo
    if model == "entnet":
        return EntNetQA(vocab_size, num_answers, story_length, sentence_length, query_length, **config)
    story, query = _inputs(story_length, sentence_length, query_length)
    sentences, question = _encoded(story, query, vocab_size, config["embedding_dim"])
    if model == "rmc":
        memory = rmc_layer(config, name="memory")(sentences)
    else:
        memory = keras.layers.LSTM(config["units"], name="memory")(sentences)
    hidden = keras.layers.Concatenate()([memory, question])
    hidden = keras.layers.Dense(256, activation="relu", name="answer_mlp")(hidden)
    logits = keras.layers.Dense(num_answers, name="answer")(hidden)
    return keras.Model({"story": story, "query": query}, logits, name=f"babi_{model}")
