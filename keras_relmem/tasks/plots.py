"""The `--plot DIR` pictures of the task scripts and `tasks/explain.py`."""

import pathlib

import keras
import numpy as np

from keras_relmem import probes, viz
from keras_relmem.data.babi import window


def model_kind(model):
    """'memo', 'entnet', 'rmc' or 'lstm' for a model from `build_babi_model`."""
    from keras_relmem.layers import EntNetCell, RelationalMemoryCell
    from keras_relmem.models.memo import MEMOClassifier

    if isinstance(model, MEMOClassifier):
        return "memo"
    layer = model.get_layer("memory")
    cell = getattr(layer, "cell", None)
    if isinstance(cell, EntNetCell):
        return "entnet"
    if isinstance(cell, RelationalMemoryCell):
        return "rmc"
    return "lstm"


def explain_babi(model, story, query, sentences, question, vocab, answer_vocab, path):
    """Write the picture of one bAbI example for any of our bAbI models.

    `story (1, K, S)` and `query (1, Q)` are ids; `sentences` the story as text.
    Returns the PNG path, or None for the LSTM (no memory to show).
    """
    return _EXPLAINERS[model_kind(model)](model, {"story": story, "query": query}, sentences, question, vocab,
                                          answer_vocab, path)


def _explain_memo(model, inputs, sentences, question, vocab, answer_vocab, path):
    trace = probes.memo_trace(model, inputs)
    return viz.memo_hops(trace, 0, sentences, path, answer_vocab.tokens, question)


def _encoded_story(model, inputs):
    """The story encoder's output and the story mask, and the memory cell, of an EntNet or RMC bAbI model."""
    encoder = keras.Model(model.inputs, model.get_layer("story_encoder").output)
    encoded = keras.ops.convert_to_numpy(encoder(inputs))
    mask = np.any(np.asarray(inputs["story"]) != 0, axis=-1)
    return encoded, mask, model.get_layer("memory").cell


def _explain_entnet(model, inputs, sentences, question, vocab, answer_vocab, path):
    encoded, mask, cell = _encoded_story(model, inputs)
    gates, memory = probes.entnet_gates(cell, encoded, mask)
    embeddings = keras.ops.convert_to_numpy(model.get_layer("embedding").embeddings)
    words = probes.nearest_words(memory[0], embeddings[2:], vocab.tokens[2:])
    answer = answer_vocab.tokens[int(np.argmax(keras.ops.convert_to_numpy(model(inputs))[0]))]
    query = keras.Model(model.inputs, model.get_layer("query_encoder").output)(inputs)
    read = model.get_layer("readout").attention(keras.ops.reshape(memory, (1, -1)), query)
    return viz.entnet_gates(gates[0], sentences, words, path, title=question, answer=answer,
                            read_weights=keras.ops.convert_to_numpy(read)[0])


def _explain_rmc(model, inputs, sentences, question, vocab, answer_vocab, path):
    encoded, mask, cell = _encoded_story(model, inputs)
    attention, _ = probes.rmc_attention(cell, encoded, mask)
    steps = len(sentences)
    return viz.rmc_attention_grid(
        attention[0, :steps], path, title=question, row_labels=[f"s{j + 1}" for j in range(steps)]
    )


# What each bAbI model's picture shows (the LSTM has no memory to show).
_EXPLAINERS = {"memo": _explain_memo, "entnet": _explain_entnet, "rmc": _explain_rmc,
               "lstm": lambda *args: None}


def _curves(metrics_path, out_dir, title):
    """`[training_curves.png]` when the run wrote a metrics file, else `[]`."""
    if metrics_path and pathlib.Path(metrics_path).is_file():
        return [viz.training_curves(metrics_path, out_dir / "training_curves.png", title)]
    return []


def plot_babi(model, data, out_dir, count=3, metrics_path=None):
    """Pictures for the first `count` test questions (and the training curves)."""
    out_dir = pathlib.Path(out_dir)
    written = _curves(metrics_path, out_dir, "bAbI")
    arrays = data.arrays("test")
    for i in range(min(count, len(data.examples["test"]))):
        ex = data.examples["test"][i]
        sentences = [" ".join(s) for s in window(ex, data.story_length)[0]]
        question = f"task {ex.task}: {' '.join(ex.query)}? (answer: {ex.answer})"
        path = explain_babi(
            model, arrays["story"][i : i + 1], arrays["query"][i : i + 1], sentences, question,
            data.vocab, data.answer_vocab, out_dir / f"test_{i}_task{ex.task}.png",
        )
        if path is not None:
            written.append(path)
    return written


def plot_nth_farthest(model, data, out_dir, count=2, metrics_path=None):
    out_dir = pathlib.Path(out_dir)
    written = _curves(metrics_path, out_dir, "Nth Farthest")
    layer = model.get_layer("core")
    if not hasattr(layer, "cell") or not hasattr(layer.cell, "step"):
        return written
    for i in range(count):
        attention, _ = probes.rmc_attention(layer.cell, data["inputs"][i : i + 1])
        labels = [f"id {int(label)}" for label in data["labels"][i]]
        title = f"{data['n'][i]}-th farthest from id {data['m'][i]} (answer id {data['target'][i]})"
        written.append(viz.rmc_attention_grid(attention[0], out_dir / f"test_{i}.png", title=title, row_labels=labels))
    return written
