"""MEMO on paired associative inference (length 3) against a single-hop baseline.

Trains MEMO (REINFORCE halting) and an end-to-end-memory-network-style
baseline (each fact's items summed into one vector, one attention hop) on
generated A-B-C sequences, printing after every epoch the test accuracy on
direct (A-B) and indirect (A-C) queries and MEMO's mean hops. Then measures
how MEMO's inference latency (in process and through an exported SavedModel)
depends on the hops taken, by forcing the halting policy to stop after the
first hop or to run to the hard stop.

Usage:
    python bench/memo_pai.py [--train 20000] [--epochs 20] [--max-hops 5]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_relmem.data import synthetic  # noqa: E402
from keras_relmem.models.memo import MEMOClassifier  # noqa: E402


def split_accuracy(model, data):
    logits = model.predict({"facts": data["memory"], "query": data["query"]}, batch_size=256, verbose=0)
    correct = np.argmax(logits, -1) == data["target"]
    return float(correct[~data["indirect"]].mean()), float(correct[data["indirect"]].mean())


def summed(data):
    """The EMN-style input: a fact's items summed (facts no longer separate)."""
    out = dict(data)
    out["memory"] = data["memory"].sum(axis=2, keepdims=True)
    return out


class Curve(keras.callbacks.Callback):
    def __init__(self, name, test):
        super().__init__()
        self.name, self.test, self.rows = name, test, []

    def on_epoch_end(self, epoch, logs=None):
        direct, indirect = split_accuracy(self.model, self.test)
        hops = self.model.evaluate(
            {"facts": self.test["memory"], "query": self.test["query"]}, self.test["target"],
            batch_size=256, verbose=0, return_dict=True,
        )["hops"]
        self.rows.append((epoch + 1, logs.get("hops", float("nan")), hops, direct, indirect))
        print(f"{self.name:9s} epoch {epoch + 1:3d}: train hops {logs.get('hops', 0):.2f}  "
              f"test hops {hops:.2f}  A-B {direct:6.1%}  A-C {indirect:6.1%}", flush=True)


def latency(model, data, batch, repeats=20):
    x = {"facts": tf.constant(data["memory"][:batch]), "query": tf.constant(data["query"][:batch])}
    fn = tf.function(lambda x: model(x, return_hops=True))
    fn(x)
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(x)
    return (time.perf_counter() - start) / repeats * 1000, float(np.mean(out["hops"]))


def saved_model_latency(model, data, batch, repeats=20):
    with tempfile.TemporaryDirectory() as tmp:
        spec = {
            "facts": tf.TensorSpec((None,) + data["memory"].shape[1:], tf.float32),
            "query": tf.TensorSpec((None,) + data["query"].shape[1:], tf.float32),
        }
        model.export(tmp, format="tf_saved_model", verbose=False, input_signature=[spec])
        loaded = tf.saved_model.load(tmp)  # keep the object: it owns the variables
        serve = loaded.serve
        x = {"facts": tf.constant(data["memory"][:batch]), "query": tf.constant(data["query"][:batch])}
        serve(x)
        start = time.perf_counter()
        for _ in range(repeats):
            serve(x)
        return (time.perf_counter() - start) / repeats * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=20000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--sequences", type=int, default=16, help="sequences per memory")
    parser.add_argument("--embedding-size", type=int, default=64)
    parser.add_argument("--max-hops", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)
    make = lambda n, seed: synthetic.paired_associative_inference(  # noqa: E731
        n, 3, args.sequences, args.embedding_size, seed=seed)
    train, test = make(args.train, args.seed), make(args.test, args.seed + 1)
    results = {}
    for name, halting, hops, transform in (
        ("MEMO", "reinforce", args.max_hops, lambda d: d),
        ("EMN-1hop", None, 1, summed),
    ):
        model = MEMOClassifier(2, embedding_dim=64, num_heads=4, key_size=32, max_hops=hops,
                               halting=halting, seed=args.seed)
        model.compile(keras.optimizers.Adam(1e-3))
        tr, te = transform(train), transform(test)
        curve = Curve(name, te)
        start = time.time()
        model.fit({"facts": tr["memory"], "query": tr["query"]}, tr["target"], batch_size=args.batch_size,
                  epochs=args.epochs, verbose=0, callbacks=[curve])
        results[name] = (model, curve.rows, time.time() - start)
    print(f"\nPaired associative inference, length 3, {args.train} training examples, "
          f"{args.sequences} sequences per memory, {os.cpu_count()} CPUs")
    print(f"{'model':9s} {'A-B':>7s} {'A-C':>7s} {'hops (first -> last epoch)':>28s} {'minutes':>8s}")
    for name, (_, rows, seconds) in results.items():
        first, last = rows[0], rows[-1]
        print(f"{name:9s} {last[3]:7.1%} {last[4]:7.1%} {first[2]:13.2f} -> {last[2]:<12.2f} {seconds / 60:8.1f}")
    memo = results["MEMO"][0]
    bias = memo.memo.policy.halt.bias
    trained = np.asarray(bias).copy()
    print("\nMEMO inference latency by hops taken (batch 32):")
    for label, value in (("halt after hop 1", 30.0), (f"run to N={args.max_hops}", -30.0), ("learned policy", None)):
        bias.assign(trained if value is None else [value])
        ms, hops = latency(memo, test, 32)
        saved = saved_model_latency(memo, test, 32)
        print(f"  {label:18s} mean hops {hops:4.2f}: {ms:6.2f} ms in process, {saved:6.2f} ms SavedModel")
    bias.assign(trained)


if __name__ == "__main__":
    main()
