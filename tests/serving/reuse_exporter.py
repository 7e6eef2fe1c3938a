"""Export a small SavedModel with a variable, a vocabulary table, a constant and (optionally) a mutable table.

Run as a script, one process per export, as a retrained model is exported:

    python tests/serving/reuse_exporter.py OUT --scale 2 --words a b c [--variant doubled|mutable]

`score(word) = 2 * w[id] + b + OFFSET` where `id` is the word's line in the
vocabulary file (-1, and then `score = b`, for unknown words), `w = scale * [1, 2, 3]`
and `b = scale`. The `doubled` variant multiplies by 3 instead of 2 (another
program); `mutable` adds a checkpointed `MutableHashTable` holding `{"a": 10 * scale}`
whose lookup is the `extra` output.
"""

import argparse
import pathlib
import tempfile

import tensorflow as tf

OFFSET = 100.0


class Scorer(tf.Module):
    def __init__(self, scale, words, variant):
        super().__init__()
        # Exports write their vocabulary to a temporary folder, as keras_relmem.export does.
        vocab = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
        vocab.write_text("".join(f"{word}\n" for word in words))
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(str(vocab), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                                          tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), default_value=-1)
        self.w = tf.Variable(scale * tf.constant([1.0, 2.0, 3.0]))
        self.b = tf.Variable(float(scale))
        self.offset = tf.constant(OFFSET)
        self.factor = 3.0 if variant == "doubled" else 2.0
        self.mutable = None
        if variant == "mutable":
            self.mutable = tf.lookup.experimental.MutableHashTable(tf.string, tf.float32, default_value=-1.0)
            self.mutable.insert(tf.constant(["a"]), tf.constant([10.0 * scale]))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="word")])
    def score(self, word):
        ids = self.table.lookup(word)
        known = self.factor * tf.gather(self.w, tf.maximum(ids, 0)) + self.b + self.offset
        outputs = {"id": ids, "score": tf.where(ids >= 0, known, self.b + self.offset)}
        if self.mutable is not None:
            outputs["extra"] = self.mutable.lookup(word)
        return outputs


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--words", nargs="+", default=["a", "b", "c"])
    parser.add_argument("--variant", choices=("plain", "doubled", "mutable"), default="plain")
    args = parser.parse_args(argv)
    module = Scorer(args.scale, args.words, args.variant)
    tf.saved_model.save(module, args.out, signatures={"serving_default": module.score})


if __name__ == "__main__":
    main()
