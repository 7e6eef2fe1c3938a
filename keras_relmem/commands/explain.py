"""Answer a story given on the command line and draw what the memory did.

Reads a trained bAbI model's `checkpoint.keras` (from `train_babi.py`'s
workdir) and the vocabularies of its export (`<export>/<name>/<version>/assets`),
tokenises the story like the bAbI loader, prints the top answers and writes
the model's picture (MEMO hops, EntNet gates, RMC attention).
"""

import argparse
import json
import pathlib
import sys

import numpy as np

from keras_relmem import commands as common
from keras_relmem.data import text
from keras_relmem.data.vocab import Vocabulary


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="a trained model's checkpoint.keras")
    parser.add_argument("--assets", required=True, help="folder with vocab.txt and answers.txt (an export's assets/)")
    parser.add_argument(
        "--story",
        required=True,
        help='sentences separated by ".", e.g. "Mary went to the kitchen. John moved to the garden."',
    )
    parser.add_argument("--question", required=True, help='e.g. "Where is Mary?"')
    parser.add_argument("--out", default="explain.png", help="PNG to write (default explain.png)")
    return common.show_defaults(parser)


def encode(tokens_list, vocab, length):
    ids = np.zeros((len(tokens_list), length), "int32")
    for i, tokens in enumerate(tokens_list):
        ids[i, : min(len(tokens), length)] = vocab.lookup(tokens[:length])
    return ids


def run(argv=None):
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    assets = pathlib.Path(args.assets)
    for name in ("vocab.txt", "answers.txt"):
        if not (assets / name).is_file():
            build_parser().error(f"{assets / name} not found (pass an export's assets/ folder)")
    if not pathlib.Path(args.checkpoint).is_file():
        build_parser().error(f"{args.checkpoint} not found")
    sentences = [text.words(sentence) for sentence in text.sentences(args.story)]
    question = text.words(args.question)
    if not sentences or not question:
        build_parser().error("--story needs at least one sentence and --question words")

    import keras

    from keras_relmem.tasks import plots

    try:
        vocab = Vocabulary.load(assets / "vocab.txt")
        answers = Vocabulary.load(assets / "answers.txt", pad_token=None)
    except (ValueError, OSError) as error:
        build_parser().error(f"{error} (pass the assets/ folder of the checkpoint's own export)")
    try:
        model = keras.saving.load_model(args.checkpoint)
    except Exception as error:  # Keras raises what the file's damage makes (zipfile, h5py, JSON, TypeError)
        build_parser().error(f"{args.checkpoint} cannot be read as a saved Keras model ({type(error).__name__}: "
                             f"{str(error)[:200]}); pass a checkpoint.keras written by training")
    mismatch = check_pair(model, args.checkpoint, assets, vocab, answers)
    if mismatch:
        build_parser().error(mismatch)
    story_shape, query_shape = _input_shapes(model)
    k, s = story_shape[1], story_shape[2]
    story = np.zeros((1, k, s), "int32")
    kept = sentences[-k:]
    story[0, : len(kept)] = encode(kept, vocab, s)
    query = encode([question], vocab, query_shape[1])
    for note in input_notes(sentences, question, vocab, k, s, query_shape[1]):
        print(f"note: {note}")
    logits = keras.ops.convert_to_numpy(model({"story": story, "query": query}))[0]
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    top = np.argsort(-probs)[:3]
    for i in top:
        print(f"{answers.tokens[i]:>12s}  {probs[i]:.1%}")
    path = plots.explain_babi(
        model, story, query, [" ".join(t) for t in kept], args.question, vocab, answers, args.out
    )
    if path is not None:
        print(f"Wrote {path}")
    return [answers.tokens[i] for i in top], path


def input_notes(sentences, question, vocab, story_length, sentence_length, query_length):
    """What the model does not see of the input: sentences before the last `story_length` (the memory keeps the
    most recent ones, as the EntNet authors' code does), words past a sentence's or the question's length, and
    words not in the vocabulary (read as the unknown-word token)."""
    notes = []
    if len(sentences) > story_length:
        notes.append(f"the story has {len(sentences)} sentences; the model reads the last {story_length}, so the "
                     f"first {len(sentences) - story_length} are left out")
    long = [i + 1 for i, tokens in enumerate(sentences) if len(tokens) > sentence_length]
    if long:
        notes.append(f"sentence(s) {long} have more than {sentence_length} words; the words after the "
                     f"{sentence_length}th are left out")
    if len(question) > query_length:
        notes.append(f"the question has more than {query_length} words; the words after the {query_length}th are "
                     "left out")
    unknown = sorted({t for tokens in [*sentences, question] for t in tokens if t not in vocab})
    if unknown:
        notes.append(f"not in the model's vocabulary, read as unknown: {', '.join(unknown)}")
    return notes


def check_pair(model, checkpoint, assets, vocab, answers):
    """Why the checkpoint and the export's assets do not belong together (None when they do): the model the export
    records (`assets.extra/keras_relmem.json`, written since 1.2) against the checkpoint's, and the vocabulary and
    answer sizes against the model's own."""
    import keras

    from keras_relmem.export import MODEL_RECORD

    sizes = {"vocab_size": len(vocab), "answers": len(answers)}
    record_path = assets.parent / MODEL_RECORD
    if record_path.is_file():
        record = json.loads(record_path.read_text())
        if record.get("model") != model.name:
            return (f"{checkpoint} is a {model.name} model, but {assets} belongs to an export of a "
                    f"{record.get('model')} model: give the assets of this checkpoint's own export")
    config = model.get_config() if hasattr(model, "get_config") else {}
    embeddings = [layer for layer in model.layers if isinstance(layer, keras.layers.Embedding)]
    vocab_size = config.get("vocab_size") or (embeddings[0].input_dim if embeddings else None)
    outputs = config.get("num_answers") or (model.outputs[0].shape[-1] if getattr(model, "outputs", None) else None)
    for what, theirs in (("vocab_size", vocab_size), ("answers", outputs)):
        if theirs is not None and theirs != sizes[what]:
            file = "vocab.txt" if what == "vocab_size" else "answers.txt"
            return (f"{checkpoint} was trained with {theirs} {'words' if what == 'vocab_size' else 'answers'}, but "
                    f"{assets / file} lists {sizes[what]}: give the assets of this checkpoint's own export")
    return None


def _input_shapes(model):
    from keras_relmem.models import EntNetQA
    from keras_relmem.models.memo import MEMOClassifier

    if isinstance(model, MEMOClassifier):
        shapes = model.get_build_config()["input_shape"]
        return shapes.get("story", shapes.get("facts")), shapes["query"]
    if isinstance(model, EntNetQA):  # takes stories of any length; its window is in its config
        config = model.get_config()
        return (None, config["story_length"], config["sentence_length"]), (None, config["query_length"])
    by_name = {t.name.split(":")[0]: t.shape for t in model.inputs}
    return by_name["story"], by_name["query"]


def main():
    run()
