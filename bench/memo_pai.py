"""MEMO on paired associative inference (length 3) against a single-hop baseline.

Episodes are generated afresh every epoch (a stream, as in the paper; no
episode is seen twice) from a fixed pool of item vectors standing in for the
paper's ImageNet embeddings. The answer is the match's identity (a softmax
over the item pool); the model's choice is whichever of the query's two
choices scores higher, and accuracy is reported separately on direct (A-B, B-C)
and indirect (A-C) queries. An optional curriculum grows the number of
sequences per memory (e.g. `--curriculum 4:12,8:8,16:20`).

Trains MEMO (REINFORCE halting, `--max-hops`) and an end-to-end memory
network style baseline (each fact's items summed into one vector, one hop),
printing after every epoch the test accuracies and MEMO's mean hops; then
measures how MEMO's inference latency (in process and through an exported
SavedModel) depends on the hops taken.

`--answer choice` trains the 2-way formulation instead (which of the two
choices is the match); in our runs it stays at chance even with 2 sequences,
while the identity answer learns (see the README's MEMO section).

Usage:
    python bench/memo_pai.py --curriculum 4:12,8:8,16:20
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


def episodes(count, sequences, args, seed, summed=False):
    data = synthetic.paired_associative_inference(
        count, 3, sequences, args.embedding_size, seed=seed, num_items=args.num_items)
    if summed:  # the EMN-style input: a fact's items summed (facts no longer separate)
        data["memory"] = data["memory"].sum(axis=2, keepdims=True)
    data["label"] = data["match_id"] if args.answer == "identity" else data["target"]
    return data


def inputs(data):
    return {"facts": data["memory"], "query": data["query"]}


def test_pass(forward, data, answer):
    """(A-B accuracy, A-C accuracy, mean hops) on a test set, in one pass of the model."""
    logits, hops = [], []
    for start in range(0, len(data["query"]), 256):
        out = forward({k: tf.constant(v[start:start + 256]) for k, v in inputs(data).items()})
        logits.append(np.asarray(out["logits"]))
        hops.append(np.asarray(out["hops"]))
    logits = np.concatenate(logits)
    if answer == "identity":
        rows = np.arange(len(logits))
        ids = data["query_ids"]
        picked = (logits[rows, ids[:, 2]] > logits[rows, ids[:, 1]]).astype("int32")
    else:
        picked = np.argmax(logits, -1)
    correct = picked == data["target"]
    return (float(correct[~data["indirect"]].mean()), float(correct[data["indirect"]].mean()),
            float(np.mean(np.concatenate(hops))))


def parse_curriculum(text, epochs, sequences):
    if not text:
        return [(sequences, epochs)]
    stages = []
    for part in text.split(","):
        count, stage_epochs = part.split(":")
        stages.append((int(count), int(stage_epochs)))
    return stages


def train(name, model, args, stages, summed):
    rows, epoch, start = [], 0, time.time()
    tests = {}
    halting_rate = model.halting_learning_rate
    forward = tf.function(lambda x: model(x, return_hops=True))  # traced once per memory size
    for sequences, stage_epochs in stages:
        tests[sequences] = episodes(args.test, sequences, args, seed=10_000 + sequences, summed=summed)
        for _ in range(stage_epochs):
            if model.memo.policy is not None:
                # The halting network waits until MEMO can answer: before that
                # no number of hops earns a reward, and the hop cost alone
                # would teach it to stop after the first hop.
                model.halting_optimizer.learning_rate.assign(0.0 if epoch < args.halting_warmup else halting_rate)
            data = episodes(args.episodes, sequences, args, seed=args.seed * 1000 + epoch, summed=summed)
            history = model.fit(inputs(data), data["label"], batch_size=args.batch_size, epochs=1, verbose=0)
            direct, indirect, hops = test_pass(forward, tests[sequences], args.answer)
            train_hops = history.history.get("hops", [float("nan")])[-1]
            rows.append((epoch + 1, sequences, train_hops, hops, direct, indirect))
            print(f"{name:9s} epoch {epoch + 1:3d} ({sequences:2d} sequences): train hops {train_hops:.2f}  "
                  f"test hops {hops:.2f}  A-B {direct:6.1%}  A-C {indirect:6.1%}  "
                  f"[{(time.time() - start) / 60:.1f} min]", flush=True)
            epoch += 1
    return rows, time.time() - start


def latency(model, data, batch, repeats=20):
    x = {k: tf.constant(v[:batch]) for k, v in inputs(data).items()}
    fn = tf.function(lambda x: model(x, return_hops=True))
    fn(x)
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(x)
    return (time.perf_counter() - start) / repeats * 1000, float(np.mean(out["hops"]))


def saved_model_latency(model, data, batch, repeats=20):
    with tempfile.TemporaryDirectory() as tmp:
        spec = {k: tf.TensorSpec((None,) + v.shape[1:], tf.float32) for k, v in inputs(data).items()}
        model.export(tmp, format="tf_saved_model", verbose=False, input_signature=[spec])
        loaded = tf.saved_model.load(tmp)  # keep the object: it owns the variables
        x = {k: tf.constant(v[:batch]) for k, v in inputs(data).items()}
        loaded.serve(x)
        start = time.perf_counter()
        for _ in range(repeats):
            loaded.serve(x)
        return (time.perf_counter() - start) / repeats * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20000, help="fresh training episodes per epoch")
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=20, help="epochs without --curriculum")
    parser.add_argument("--sequences", type=int, default=16, help="sequences per memory without --curriculum")
    parser.add_argument("--curriculum", default="", help="SEQUENCES:EPOCHS,... e.g. 4:12,8:8,16:20")
    parser.add_argument("--num-items", type=int, default=1000, help="size of the item pool")
    parser.add_argument("--answer", choices=["identity", "choice"], default="identity")
    parser.add_argument("--embedding-size", type=int, default=64)
    parser.add_argument("--max-hops", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--halting-warmup", type=int, default=20,
                        help="epochs before the halting network starts learning (it runs ~max hops until then)")
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    keras.utils.set_random_seed(args.seed)
    stages = parse_curriculum(args.curriculum, args.epochs, args.sequences)
    answers = args.num_items if args.answer == "identity" else 2
    runs = [("MEMO", "reinforce", args.max_hops, False)]
    if not args.skip_baseline:
        runs.append(("EMN-1hop", None, 1, True))
    results = {}
    for name, halting, hops, summed in runs:
        model = MEMOClassifier(answers, embedding_dim=64, num_heads=4, key_size=32, max_hops=hops,
                               halting=halting, seed=args.seed)
        model.compile(keras.optimizers.Adam(1e-3))
        rows, seconds = train(name, model, args, stages, summed)
        results[name] = (model, rows, seconds)
    final = stages[-1][0]
    print(f"\nPaired associative inference, length 3, {args.episodes} fresh episodes per epoch, "
          f"{final} sequences per memory at the end, answer={args.answer}, {os.cpu_count()} CPUs")
    print(f"{'model':9s} {'A-B':>7s} {'A-C':>7s} {'test hops (first -> last epoch)':>32s} {'minutes':>8s}")
    for name, (_, rows, seconds) in results.items():
        first, last = rows[0], rows[-1]
        print(f"{name:9s} {last[4]:7.1%} {last[5]:7.1%} {first[3]:15.2f} -> {last[3]:<14.2f} {seconds / 60:8.1f}")
    memo = results["MEMO"][0]
    test = episodes(256, final, args, seed=99)
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
