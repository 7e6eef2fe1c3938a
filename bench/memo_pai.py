"""MEMO on paired associative inference of length 3, 4 or 5 against a single-hop baseline.

Banino et al. 2020 (§4, Tables 1, 5 and 6): every memory stores the
consecutive pairs (A-B, B-C, ...) of `--sequences` sequences of `--length`
items; a query asks which of two items belongs to the cue's sequence, either
the next item (direct: A-B, B-C, ...) or one further away (inference: A-C,
B-D, ... at distance 1, A-D, B-E at distance 2, A-E at distance 3). Every
query type is reported separately, with MEMO's mean hops per type: adaptive
computation should spend more hops on longer inference distances.

Episodes are generated afresh every round (`--episodes` per round, as the
paper's stream: no episode is seen twice) from a fixed pool of item vectors
standing in for the paper's ImageNet embeddings. The answer is the match's
identity (a softmax over the item pool); the model's choice is whichever of
the query's two choices scores higher. A curriculum grows the number of
sequences per memory (`--curriculum 4:30,8:10,16:1`: rounds per stage, the
last stage runs until the budget is spent).

`--model memo` trains MEMO (REINFORCE halting, `--max-hops`); `--model emn`
the end-to-end memory network style baseline (each fact's items summed into
one vector, one hop). Both train in rounds until `--budget-minutes` of
training time (bench/budget.py): after every round the test accuracies and
hops are recorded, the model and curve saved under
`--workdir/<length>/<model>`, and the result so far written to
`bench/results/memo_pai.json` as `{"<length>": {"A-C": %, ..., "hops":
{"A-C": mean, ...}, "hops_by_distance": {...}, "minutes": m, "EMN": {...}}}`.
A rerun continues where the last round ended.

Usage:
    python -m bench.memo_pai --length 4                 # MEMO, 60 training minutes
    python -m bench.memo_pai --length 4 --model emn     # the baseline
    python -m bench.memo_pai --report                   # tables next to the paper's
    python -m bench.memo_pai --length 3 --latency       # MEMO's latency by hops taken
    python -m bench.memo_pai --length 5 --hop-profile   # each hop's accuracy and halting inputs by type
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench import memo as memo_bench  # noqa: E402
from bench.cli import (  # noqa: E402
    add_bench_arguments,
    add_recipe_argument,
    dispatch,
    limit_threads,
    parse_with_recipe,
    run_arguments,
)
from bench.results import RESULTS_DIR, cell, read_results, record_model_result  # noqa: E402
from keras_relmem.training import anneal_learning_rate, train_in_rounds  # noqa: E402

RESULTS = RESULTS_DIR / "memo_pai.json"
# Banino et al. 2020: MEMO's test accuracy (%) by query type, Table 1 (length 3),
# Table 5 (length 4) and Table 6 (length 5), as quoted in our issue tracker.
PAPER = {
    "3": {"A-C": 98.26},
    "4": {"A-C": 98.93, "B-D": 99.14, "A-D": 97.22},
    "5": {"A-D": 86.12, "A-E": 84.54},
}
LETTERS = "ABCDEFGHIJ"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_recipe_argument(parser, "pai")
    parser.add_argument("--length", type=int, choices=(3, 4, 5), default=3, help="items per sequence")
    parser.add_argument("--model", choices=("memo", "emn"), default="memo")
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    parser.add_argument("--episodes", type=int, default=20000, help="fresh training episodes per round")
    parser.add_argument("--test", type=int, default=3000, help="test episodes per memory size")
    parser.add_argument("--curriculum", default="4:30,8:10,16:1",
                        help="SEQUENCES:ROUNDS,...; the last stage lasts until the budget is spent")
    parser.add_argument("--num-items", type=int, default=1000, help="size of the item pool")
    parser.add_argument("--answer", choices=("identity", "choice"), default="identity",
                        help="'choice' trains the 2-way answer instead (it stayed at chance in our runs)")
    parser.add_argument("--embedding-size", type=int, default=64)
    parser.add_argument("--max-hops", type=int, default=0,
                        help="MEMO's N (default: 2 * (length - 1) + 1, i.e. 5, 7, 9)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--final-learning-rate", type=float, default=None,
                        help="anneal the rate on a cosine over the budget's training minutes, from "
                             "--learning-rate to this (default: constant)")
    parser.add_argument("--halting-warmup", type=int, default=20,
                        help="rounds before the halting network starts learning (it runs ~N hops until then)")
    parser.add_argument("--warm-start", default=None, metavar="MODEL_KERAS",
                        help="a fresh run starts from this saved MEMO's weights with a new halting network "
                             "(e.g. to try --halting-inputs on a trained model)")
    memo_bench.add_halting_arguments(parser)
    add_bench_arguments(parser, "runs/bench_memo_pai", RESULTS, "print the tables from the JSON")
    parser.add_argument("--latency", action="store_true",
                        help="MEMO's inference latency by hops taken, from the trained model in --workdir")
    parser.add_argument("--hop-profile", action="store_true",
                        help="per query type and hop: accuracy of that hop's answer, the halting inputs "
                             "(attention distance, answer entropy) and P(halt), from the trained model in --workdir")
    args = parse_with_recipe(parser, argv)
    if not args.max_hops:
        args.max_hops = 2 * (args.length - 1) + 1
    return args


def parse_curriculum(text):
    """`"4:30,8:10,16:1"` -> `[(4, 30), (8, 10), (16, 1)]` (sequences, rounds)."""
    stages = []
    for part in text.split(","):
        try:
            count, rounds = (int(n) for n in part.split(":"))
        except ValueError:
            raise SystemExit(f"--curriculum: expected SEQUENCES:ROUNDS, got {part!r}") from None
        stages.append((count, rounds))
    return stages


def sequences_at(stages, index):
    """The number of sequences per memory in round `index` (the last stage never ends)."""
    for count, rounds in stages:
        if index < rounds:
            return count
        index -= rounds
    return stages[-1][0]


def query_name(kind):
    """`"AC"` -> `"A-C"`."""
    return f"{kind[0]}-{kind[1]}"


def distance(kind):
    """Inference distance of a query type: 0 for direct (A-B), 1 for A-C, ..."""
    return LETTERS.index(kind[1]) - LETTERS.index(kind[0]) - 1


def episodes(count, sequences, args, seed):
    from keras_relmem.data import synthetic

    data = synthetic.paired_associative_inference(
        count, args.length, sequences, args.embedding_size, seed=seed, num_items=args.num_items)
    if args.model == "emn":  # the EMN-style input: a fact's items summed (facts no longer separate)
        data["memory"] = data["memory"].sum(axis=2, keepdims=True)
    data["label"] = data["match_id"] if args.answer == "identity" else data["target"]
    return data


def inputs(data):
    return {"facts": data["memory"], "query": data["query"]}


def build(args):
    answers = args.num_items if args.answer == "identity" else 2
    model = memo_bench.build_classifier(args, answers, embedding_dim=64, num_heads=4, key_size=32)
    if args.warm_start:
        model(inputs(episodes(2, 4, args, seed=0)))  # build, so that there are weights to copy into
        copied = memo_bench.warm_start_memo(model, args.warm_start)
        print(f"warm start: {copied} weights from {args.warm_start}, a fresh halting network", flush=True)
    return model


def test_pass(model, data, answer):
    """Per-example correctness and hops on a test set."""
    logits, hops = memo_bench.predict_with_hops(model, inputs(data))
    return choice(logits, data["query_ids"], answer) == data["target"], hops


def choice(logits, query_ids, answer):
    """The model's choice, 0 or 1, from answer logits `(batch, ..., answers)` (e.g. one row per hop).

    With `answer="identity"` the choice is whichever of the query's two
    candidate items (`query_ids[:, 1]`, `query_ids[:, 2]`) scores higher; with
    `"choice"` the logits are the two-way answer itself.
    """
    import numpy as np

    if answer != "identity":
        return np.argmax(logits, -1)
    ids = query_ids.reshape((len(query_ids),) + (1,) * (logits.ndim - 2) + (query_ids.shape[-1],))
    first = np.take_along_axis(logits, ids[..., 1:2], -1)[..., 0]
    second = np.take_along_axis(logits, ids[..., 2:3], -1)[..., 0]
    return (second > first).astype("int32")


def by_query_type(correct, hops, query_type):
    """`{"A-B": %, ...}`, `{"A-B": hops, ...}` and `{distance: hops}` over the query types present."""
    accuracy, mean_hops, by_distance = {}, {}, {}
    kinds = sorted(set(query_type), key=lambda k: (distance(k), k))
    for kind in kinds:
        rows = query_type == kind
        accuracy[query_name(kind)] = round(100 * float(correct[rows].mean()), 2)
        mean_hops[query_name(kind)] = round(float(hops[rows].mean()), 3)
    distances = [distance(k) for k in query_type]
    for d in sorted(set(distances)):
        rows = [i for i, di in enumerate(distances) if di == d]
        by_distance[str(d)] = round(float(hops[rows].mean()), 3)
    return accuracy, mean_hops, by_distance


def run(args):
    limit_threads(args.threads)
    stages = parse_curriculum(args.curriculum)
    tests = {}
    current = {}

    def train_round(model, index):
        import numpy as np

        from keras_relmem.callbacks import HaltingWarmup

        sequences = current["sequences"] = sequences_at(stages, index)
        data = episodes(args.episodes, sequences, args, seed=args.seed * 100_000 + index)
        start = time.perf_counter()
        history = model.fit(inputs(data), data["label"], batch_size=args.batch_size, initial_epoch=index,
                            epochs=index + 1, verbose=0, callbacks=[HaltingWarmup(args.halting_warmup)])
        seconds = time.perf_counter() - start
        return {"sequences": sequences, "episodes": (index + 1) * args.episodes,
                "learning_rate": float(np.asarray(model.optimizer.learning_rate)),
                "episodes_per_s": round(args.episodes / seconds, 1),
                "train_hops": round(float(history.history["hops"][-1]), 3)}

    def evaluate(model):
        sequences = current["sequences"]  # the memory size of the round just trained
        if sequences not in tests:
            tests[sequences] = episodes(args.test, sequences, args, seed=10_000 + sequences)
        data = tests[sequences]
        correct, hops = test_pass(model, data, args.answer)
        accuracy, mean_hops, by_distance = by_query_type(correct, hops, data["query_type"])
        return {"test_sequences": sequences, "accuracy": accuracy, "hops": mean_hops,
                "hops_by_distance": by_distance}

    workdir = pathlib.Path(args.workdir) / str(args.length) / args.model

    def describe(entry):
        accuracy = "  ".join(f"{k} {v:5.1f}" for k, v in entry["accuracy"].items())
        hops = " ".join(f"{v:.2f}" for v in entry["hops_by_distance"].values())
        return (f"{memo_bench.label(args.model)} L={args.length} round {entry['round']:3d} "
                f"({entry['sequences']:2d} seq) "
                f"{entry['minutes']:5.1f} min  {accuracy}  hops by distance {hops}")

    def record(curve, complete=False):
        last = curve[-1]
        result = {**last["accuracy"], "hops": last["hops"], "hops_by_distance": last["hops_by_distance"],
                  "minutes": last["minutes"], "rounds": len(curve), "episodes": last["episodes"],
                  "sequences": last["test_sequences"], "complete": complete,
                  "curve": curve}
        record_model_result(args.results, str(args.length), args.model, result, run_arguments(args, "latency"))

    def anneal(model, minutes):
        if args.final_learning_rate is not None:
            anneal_learning_rate(model, minutes, args.budget_minutes, args.learning_rate, args.final_learning_rate)

    curve, _ = train_in_rounds(lambda: build(args), train_round, evaluate, workdir, args.budget_minutes,
                                   describe=describe, on_round=record, before_round=anneal,
                                   on_resume=lambda model: memo_bench.apply_halting_arguments(model, args))
    record(curve, complete=True)
    report(args)


def markdown(results):
    """One table per sequence length: MEMO's accuracy and hops per query type, the baseline's, the paper's."""
    sections = []
    for length in sorted(k for k in results if k.isdigit()):
        entry = results[length]
        emn = entry.get("EMN", {})
        kinds = [k for k in entry if "-" in k] or [k for k in emn if "-" in k]
        lines = [f"Paired associative inference, length {length}:", "",
                 "| query | MEMO % | MEMO hops | EMN % | paper MEMO % |", "|---|---|---|---|---|"]
        for kind in kinds:
            lines.append(f"| {kind} | {cell(entry.get(kind))} | {cell(entry.get('hops', {}).get(kind))} "
                         f"| {cell(emn.get(kind))} | {cell(PAPER.get(length, {}).get(kind))} |")
        lines.append("")
        for name, result in (("MEMO", entry), ("EMN", emn)):
            if "minutes" in result:
                state = "complete" if result.get("complete") else "unfinished"
                lines.append(f"- {name}: {result['minutes']:.1f} training minutes, {result['rounds']} rounds, "
                             f"{result['sequences']} sequences per memory ({state})")
        if entry.get("hops_by_distance"):
            lines.append("- MEMO mean hops by inference distance (0 = direct): "
                         + ", ".join(f"{d}: {h:.2f}" for d, h in entry["hops_by_distance"].items()))
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def report(args):
    print(markdown(read_results(args.results)))


def latency(args):
    """MEMO's inference latency (in process and as a SavedModel) when it halts after 1 hop, runs all N,
    or follows its learned policy."""
    import keras
    import numpy as np
    import tensorflow as tf

    path = pathlib.Path(args.workdir) / str(args.length) / "memo" / "model.keras"
    if not path.exists():
        sys.exit(f"No trained MEMO at {path}: run `python -m bench.memo_pai --length {args.length}` first.")
    model = keras.saving.load_model(path)
    sequences = parse_curriculum(args.curriculum)[-1][0]
    x = {k: tf.constant(v[:32]) for k, v in inputs(episodes(256, sequences, args, seed=99)).items()}

    def timed(fn, repeats=20):
        out = fn(x)
        start = time.perf_counter()
        for _ in range(repeats):
            fn(x)
        return (time.perf_counter() - start) / repeats * 1000, out

    bias = model.memo.policy.halt.bias
    trained = np.asarray(bias).copy()
    print(f"MEMO inference latency by hops taken (length {args.length}, batch 32):")
    for name, value in (("halt after hop 1", 30.0), (f"run to N={model.memo.max_hops}", -30.0),
                        ("learned policy", None)):
        bias.assign(trained if value is None else [value])
        ms, out = timed(tf.function(lambda x: model(x, return_hops=True)))
        with tempfile.TemporaryDirectory() as tmp:
            spec = {k: tf.TensorSpec((None,) + tuple(v.shape[1:]), tf.float32) for k, v in x.items()}
            model.export(tmp, format="tf_saved_model", verbose=False, input_signature=[spec])
            loaded = tf.saved_model.load(tmp)  # keep the object: it owns the variables
            saved, _ = timed(loaded.serve)
        print(f"  {name:18s} mean hops {float(np.mean(out['hops'])):4.2f}: {ms:6.2f} ms in process, "
              f"{saved:6.2f} ms SavedModel")
    bias.assign(trained)


def hop_profile(args, model=None):
    """What the halting network sees and what it could win, per query type and hop (all N hops unrolled).

    Returns `{"accuracy" | "distance" | "entropy" | "p_halt": {type: [per hop]}}`
    and prints it: the hop at which a type's answer becomes right, against
    the inputs the policy reads there.
    """
    import keras
    import numpy as np

    from keras_relmem.layers.halting import answer_entropy

    if model is None:
        path = pathlib.Path(args.workdir) / str(args.length) / "memo" / "model.keras"
        if not path.exists():
            sys.exit(f"No trained MEMO at {path}: run `python -m bench.memo_pai --length {args.length}` first.")
        model = keras.saving.load_model(path)
    sequences = parse_curriculum(args.curriculum)[-1][0]
    data = episodes(args.test, sequences, args, seed=10_000 + sequences)  # the bench's test set
    parts = {"accuracy": [], "distance": [], "entropy": [], "p_halt": []}
    for start in range(0, len(data["query"]), 256):
        batch = {k: v[start:start + 256] for k, v in inputs(data).items()}
        embedded, mask = model.embed_inputs(batch)
        out = model.memo.unrolled(embedded, mask=mask, training=False)
        picked = choice(np.asarray(out["answer_logits"]), data["query_ids"][start:start + 256], args.answer)
        parts["accuracy"].append(picked == data["target"][start:start + 256, None])  # (b, N hops)
        parts["distance"].append(np.asarray(out["distances"]))
        parts["entropy"].append(np.asarray(answer_entropy(out["answer_logits"])))
        parts["p_halt"].append(1 / (1 + np.exp(-np.asarray(out["halt_logits"]))))
    parts = {k: np.concatenate(v) for k, v in parts.items()}
    kinds = sorted(set(data["query_type"]), key=lambda k: (distance(k), k))
    profile = {name: {query_name(k): [round(float(x), 4) for x in values[data["query_type"] == k].mean(0)]
                      for k in kinds} for name, values in parts.items()}
    profile["accuracy"] = {k: [round(100 * x, 1) for x in v] for k, v in profile["accuracy"].items()}
    hops = len(next(iter(profile["accuracy"].values())))
    for name, title in (("accuracy", "accuracy (%) of the answer after hop t"),
                        ("distance", "Bhattacharyya distance to the previous hop's attention (halting input)"),
                        ("entropy", "entropy of the hop's answer, nats"), ("p_halt", "P(halt) after hop t")):
        print(f"\n{title}\n{'type':>5s} " + " ".join(f"{t + 1:6d}" for t in range(hops)))
        for kind, values in profile[name].items():
            print(f"{kind:>5s} " + " ".join(f"{v:6.1f}" if name == "accuracy" else f"{v:6.3f}" for v in values))
    return profile


def main(argv=None):
    args = parse_args(argv)
    dispatch(args, run, report=report, latency=latency, hop_profile=hop_profile)


if __name__ == "__main__":
    main()
