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
training time: after every round the test accuracies and
hops are recorded, the model and curve saved under
`--workdir/<length>/<model>`, and the result so far written to
`bench/memo_pai/results/memo_pai.json` as `{"<length>": {"A-C": %, ..., "hops":
{"A-C": mean, ...}, "hops_by_distance": {...}, "minutes": m, "EMN": {...}}}`.
A rerun continues where the last round ended.

Usage:
    python -m bench.memo_pai --length 4                 # MEMO, 60 training minutes
    python -m bench.memo_pai --length 4 --model emn     # the baseline
    python -m bench.memo_pai --report                   # tables next to the paper's
    python -m bench.memo_pai --length 3 --latency       # MEMO's latency by hops taken
    python -m bench.memo_pai --length 5 --hop-profile   # each hop's accuracy and halting inputs by type
"""

import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench import common  # noqa: E402
from keras_relmem.configs import PAIConfig  # noqa: E402
from keras_relmem.tasks.pai import (  # noqa: E402, F401  (the library's PAI, as the tests and modes use it)
    build,
    by_query_type,
    choice,
    distance,
    episodes,
    inputs,
    parse_curriculum,
    query_name,
    sequences_at,
    test_pass,
)

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "memo_pai.json"
# Banino et al. 2020: MEMO's test accuracy (%) by query type, Table 1 (length 3),
# Table 5 (length 4) and Table 6 (length 5), as quoted in our issue tracker.
PAPER = {
    "3": {"A-C": 98.26},
    "4": {"A-C": 98.93, "B-D": 99.14, "A-D": 97.22},
    "5": {"A-D": 86.12, "A-E": 84.54},
}


def parse_args(argv=None):
    """The flags of `configs.PAIConfig` (as `relmem-train-memo --task pai` parses them, over the config's own
    defaults), the run's, and the bench's modes."""
    args = common.parse_config(argv, PAIConfig, "runs/bench_memo_pai", RESULTS, __doc__.splitlines()[0],
                        modes=(("latency", "MEMO's inference latency by hops taken, from the trained model in "
                                           "--workdir"),
                               ("hop_profile", "per query type and hop: accuracy of that hop's answer, the halting "
                                               "inputs and P(halt), from the trained model in --workdir")),
                        derived=("hops",))
    args.max_hops = args.hops  # as results files recorded it
    return args


def run(args):
    """Train the run `args` describe (`kr.train` of its `PAIConfig`) in WORKDIR/<length>/<model>, its result
    recorded in the bench's table as it goes."""
    arguments = common.run_arguments(args, "latency", "hop_profile", "hops")
    workdir = pathlib.Path(args.workdir) / str(args.length) / args.model
    common.train_config(args, workdir, "memo_pai", lambda result: common.record_model_result(
        args.results, str(args.length), args.model, result, arguments))
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
            lines.append(f"| {kind} | {common.cell(entry.get(kind))} | {common.cell(entry.get('hops', {}).get(kind))} "
                         f"| {common.cell(emn.get(kind))} | {common.cell(PAPER.get(length, {}).get(kind))} |")
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
    print(markdown(common.read_results(args.results)))


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
    common.dispatch(args, run, report=report, latency=latency, hop_profile=hop_profile)


if __name__ == "__main__":
    main()
