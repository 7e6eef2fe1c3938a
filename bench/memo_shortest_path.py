"""MEMO on shortest paths in random graphs against a single-hop baseline (Banino et al. 2020, Table 2).

The paper's three settings, named nodes/out-degree/path length: `10/2/2`,
`20/3/3` and `20/5/3`. A graph (`keras_relmem.data.synthetic.shortest_path`:
nodes joined to their K nearest neighbours, node ids shuffled) is stored as
its edges, one fact per directed edge `(source, destination)`; the query is a
pair of nodes whose shortest path is unique and has exactly the setting's
length. The output is the path's node ids one at a time: the query
`(current node, destination)` is answered with the next node of the path.
Training covers every intermediate node of the path with the true previous
node as `current`; at test, `first_node` is the answer to `(source,
destination)`, `second_node` the answer to `(true first node, destination)`
and `path` the share of graphs whose intermediate nodes are all right when
each query uses the model's own previous answer.

Node ids are words (`vocab_size = nodes + 1`, 0 pads graphs with fewer
edges). `--model memo` trains MEMO with REINFORCE halting; `--model emn` the
end-to-end memory network style baseline of ``bench.memo_pai`` (a fact's
items summed, one hop). Fresh graphs every round; training in rounds until
`--budget-minutes` of training time, resumable (`bench.budget`). Results:
`bench/results/memo_shortest_path.json` as `{"20/3/3": {"first_node": %,
"second_node": %, "path": %, "hops": {...}, "minutes": m, ..., "EMN":
{...}}}`.

Usage:
    python -m bench.memo_shortest_path --recipe memo_shortest_path   # the 20/3/3 result's settings
    python -m bench.memo_shortest_path --setting 20/3/3
    python -m bench.memo_shortest_path --setting 20/3/3 --model emn
    python -m bench.memo_shortest_path --report
"""

import argparse
import os
import pathlib
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
from keras_relmem.training import train_in_rounds  # noqa: E402

RESULTS = RESULTS_DIR / "memo_shortest_path.json"
SETTINGS = ("10/2/2", "20/3/3", "20/5/3")
# Banino et al. 2020, Table 2: test accuracy (%) of the first and second node of the path.
PAPER = {
    "MEMO": {"10/2/2": (100.0, None), "20/3/3": (94.4, 93.0), "20/5/3": (69.2, 68.8)},
    "DNC": {"20/3/3": (97.0, 98.0), "20/5/3": (30.0, 40.99)},
}
NODE_NAMES = ("first_node", "second_node", "third_node")


def parse_setting(text):
    """`"20/3/3"` -> `(20, 3, 3)` (nodes, out-degree, path length in edges)."""
    try:
        nodes, degree, length = (int(n) for n in text.split("/"))
    except ValueError:
        raise SystemExit(f"--setting: expected NODES/OUT-DEGREE/PATH-LENGTH such as 20/3/3, got {text!r}") from None
    if length < 2 or degree < 1 or nodes <= degree:
        raise SystemExit(f"--setting {text}: need path length >= 2 and out-degree < nodes")
    return nodes, degree, length


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_recipe_argument(parser, "shortest_path")
    parser.add_argument("--setting", default="20/3/3", help=f"NODES/OUT-DEGREE/PATH-LENGTH; the paper's: {SETTINGS}")
    parser.add_argument("--model", choices=("memo", "emn"), default="memo")
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    parser.add_argument("--graphs", type=int, default=10000, help="fresh training graphs per round")
    parser.add_argument("--test", type=int, default=2000, help="test graphs")
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--key-size", type=int, default=32)
    parser.add_argument("--max-hops", type=int, default=0, help="MEMO's N (default: 2 * path length + 1)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--halting-warmup", type=int, default=10,
                        help="rounds before the halting network starts learning")
    memo_bench.add_halting_arguments(parser)
    add_bench_arguments(parser, "runs/bench_memo_shortest_path", RESULTS)
    args = parse_with_recipe(parser, argv)
    args.nodes, args.degree, args.length = parse_setting(args.setting)
    if not args.max_hops:
        args.max_hops = 2 * args.length + 1
    return args


def graphs(count, args, seed):
    from keras_relmem.data import synthetic

    return synthetic.shortest_path(count, num_nodes=args.nodes, num_neighbours=args.degree,
                                   min_path_length=args.length, max_path_length=args.length, seed=seed)


def queries(data, step, current=None):
    """Inputs asking for the path's node `step + 1` from `current` (default: the true node `step`).

    Node `n` is word id `n + 1`; padded edges (-1) become 0.
    """
    import numpy as np

    current = data["path"][:, step] if current is None else current
    return {"facts": (data["edges"] + 1).astype("int32"),
            "query": np.stack([current, data["query"][:, 1]], axis=1).astype("int32") + 1}


def training_examples(data, length):
    """Every intermediate node of every path, from the true node before it."""
    import numpy as np

    parts = [queries(data, step) for step in range(length - 1)]
    x = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    y = np.concatenate([data["path"][:, step + 1] for step in range(length - 1)]).astype("int32")
    return x, y


def build(args):
    return memo_bench.build_classifier(args, args.nodes, vocab_size=args.nodes + 1, embedding_dim=args.embedding_dim,
                                       num_heads=args.num_heads, key_size=args.key_size,
                                       sum_fact_items=args.model != "memo")


def predict(model, x):
    """(predicted node, hops) for every query."""
    import numpy as np

    logits, hops = memo_bench.predict_with_hops(model, x, batch_size=512)
    return np.argmax(logits, -1), hops


def test_pass(model, data, length):
    """`{"first_node": %, "second_node": %, "path": %, "hops": {name: mean}}` on test graphs."""
    import numpy as np

    result, hops, chained_right = {}, {}, np.ones(len(data["path"]), bool)
    previous = None
    for step in range(length - 1):
        name = NODE_NAMES[step]
        target = data["path"][:, step + 1]
        nodes, step_hops = predict(model, queries(data, step))
        result[name] = round(100 * float(np.mean(nodes == target)), 2)
        hops[name] = round(float(step_hops.mean()), 3)
        chained = nodes if previous is None else predict(model, queries(data, step, current=previous))[0]
        chained_right &= chained == target
        previous = chained
    result["path"] = round(100 * float(chained_right.mean()), 2)
    return {**result, "hops": hops}


def run(args):
    limit_threads(args.threads)
    test = graphs(args.test, args, seed=1_000_003)  # seeds of training rounds stay below this

    def train_round(model, index):
        from keras_relmem.callbacks import HaltingWarmup

        x, y = training_examples(graphs(args.graphs, args, seed=args.seed * 10_000 + index), args.length)
        start = time.perf_counter()
        history = model.fit(x, y, batch_size=args.batch_size, initial_epoch=index, epochs=index + 1, verbose=0,
                            callbacks=[HaltingWarmup(args.halting_warmup)])
        seconds = time.perf_counter() - start
        return {"graphs": (index + 1) * args.graphs, "examples_per_s": round(len(y) / seconds, 1),
                "train_accuracy": round(100 * float(history.history["accuracy"][-1]), 2),
                "train_hops": round(float(history.history["hops"][-1]), 3)}

    def describe(entry):
        nodes = "  ".join(f"{name} {entry[name]:5.1f}%" for name in NODE_NAMES if name in entry)
        return (f"{memo_bench.label(args.model)} {args.setting} round {entry['round']:3d} "
                f"{entry['minutes']:5.1f} min  {nodes}  path {entry['path']:5.1f}%  hops {entry['hops']}")

    def record(curve, complete=False):
        last = curve[-1]
        result = {**{k: v for k, v in last.items() if k in NODE_NAMES + ("path", "hops")},
                  "minutes": last["minutes"], "rounds": len(curve), "graphs": last["graphs"],
                  "complete": complete, "curve": curve}
        record_model_result(args.results, args.setting, args.model, result, run_arguments(args))

    workdir = pathlib.Path(args.workdir) / args.setting.replace("/", "-") / args.model
    curve, _ = train_in_rounds(lambda: build(args), train_round,
                                   lambda model: test_pass(model, test, args.length), workdir,
                                   args.budget_minutes, describe=describe, on_round=record,
                                   on_resume=lambda model: memo_bench.apply_halting_arguments(model, args))
    record(curve, complete=True)
    report(args)


def markdown(results):
    """Per setting and node of the path: MEMO's accuracy and hops, the baseline's, the paper's MEMO and DNC."""
    lines = ["| setting | node | MEMO % | MEMO hops | EMN % | paper MEMO % | paper DNC % |", "|" + "---|" * 7]
    notes = []
    for setting in [s for s in results if s != "args"]:
        entry = results[setting]
        emn = entry.get("EMN", {})
        for index, name in enumerate(NODE_NAMES):
            if name not in entry and name not in emn:
                continue
            paper = PAPER["MEMO"].get(setting, (None, None))[index] if index < 2 else None
            dnc = PAPER["DNC"].get(setting, (None, None))[index] if index < 2 else None
            lines.append(f"| {setting} | {name} | {cell(entry.get(name))} | {cell(entry.get('hops', {}).get(name))} "
                         f"| {cell(emn.get(name))} | {cell(paper, '.1f')} | {cell(dnc, '.1f')} |")
        for model, result in (("MEMO", entry), ("EMN", emn)):
            if "minutes" in result:
                state = "complete" if result.get("complete") else "unfinished"
                notes.append(f"- {setting} {model}: whole path right {result['path']:.2f}%, "
                             f"{result['minutes']:.1f} training minutes, {result['graphs']} graphs ({state})")
    return "\n".join(lines + [""] + notes)


def report(args):
    print(markdown(read_results(args.results)))


def main(argv=None):
    dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
