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
`--budget-minutes` of training time, resumable. Results:
`bench/memo_shortest_path/results/memo_shortest_path.json` as `{"20/3/3": {"first_node": %,
"second_node": %, "path": %, "hops": {...}, "minutes": m, ..., "EMN":
{...}}}`.

Usage:
    python -m bench.memo_shortest_path --recipe memo_shortest_path   # the 20/3/3 result's settings
    python -m bench.memo_shortest_path --setting 20/3/3
    python -m bench.memo_shortest_path --setting 20/3/3 --model emn
    python -m bench.memo_shortest_path --report
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench import common  # noqa: E402
from keras_relmem.configs import ShortestPathConfig  # noqa: E402
from keras_relmem.tasks.shortest_path import (  # noqa: E402, F401  (the library's, as the tests use it)
    NODE_NAMES,
    build,
    graphs,
    queries,
    test_pass,
    training_examples,
)

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "memo_shortest_path.json"
SETTINGS = ("10/2/2", "20/3/3", "20/5/3")
# Banino et al. 2020, Table 2: test accuracy (%) of the first and second node of the path.
PAPER = {
    "MEMO": {"10/2/2": (100.0, None), "20/3/3": (94.4, 93.0), "20/5/3": (69.2, 68.8)},
    "DNC": {"20/3/3": (97.0, 98.0), "20/5/3": (30.0, 40.99)},
}


def parse_args(argv=None):
    """The flags of `configs.ShortestPathConfig` (as `relmem-train-memo --task shortest_path` parses them, over the
    config's own defaults), the run's, and the bench's --report. The graph's sizes and MEMO's hops follow."""
    args = common.parse_config(argv, ShortestPathConfig, "runs/bench_memo_shortest_path", RESULTS,
                        __doc__.splitlines()[0], derived=("hops", "graph"))
    args.nodes, args.degree, args.length = args.config.graph
    args.max_hops = args.hops
    return args


def run(args):
    """Train the run `args` describe (`kr.train` of its `ShortestPathConfig`) in WORKDIR/<setting>/<model>, its
    result recorded in the bench's table as it goes."""
    arguments = common.run_arguments(args, "hops", "graph")
    workdir = pathlib.Path(args.workdir) / args.setting.replace("/", "-") / args.model
    common.train_config(args, workdir, "memo_shortest_path",
                 lambda result: common.record_model_result(args.results, args.setting, args.model, result, arguments))
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
            hops = entry.get("hops", {}).get(name)
            lines.append(f"| {setting} | {name} | {common.cell(entry.get(name))} | {common.cell(hops)} "
                         f"| {common.cell(emn.get(name))} | {common.cell(paper, '.1f')} | {common.cell(dnc, '.1f')} |")
        for model, result in (("MEMO", entry), ("EMN", emn)):
            if "minutes" in result:
                state = "complete" if result.get("complete") else "unfinished"
                notes.append(f"- {setting} {model}: whole path right {result['path']:.2f}%, "
                             f"{result['minutes']:.1f} training minutes, {result['graphs']} graphs ({state})")
    return "\n".join(lines + [""] + notes)


def report(args):
    print(markdown(common.read_results(args.results)))


def main(argv=None):
    common.dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
