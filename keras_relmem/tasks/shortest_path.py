"""MEMO on shortest paths: what `kr.train` runs for a `configs.ShortestPathConfig` (`relmem-train-memo --task
shortest_path`).

Banino et al. 2020 (Table 2): a random graph of `nodes` nodes with `out-degree` outgoing edges each is stored
edge by edge; a query names a start and an end node, and the answer is the next node of a shortest path
between them. Training asks for every intermediate node from the true node before it; the test reports the
first and second node's accuracy and the whole path followed from the model's own answers. Rounds of fresh
graphs run until the budget is spent; after each the model and curve are saved, so a rerun continues.
"""

import time

from keras_relmem import configs, runs
from keras_relmem.tasks import memo_options
from keras_relmem.tasks.rounds import recorder

NODE_NAMES = ("first_node", "second_node", "third_node")


def graphs(count, config, seed):
    from keras_relmem.data import synthetic

    nodes, degree, length = config.graph
    return synthetic.shortest_path(count, num_nodes=nodes, num_neighbours=degree, min_path_length=length,
                                   max_path_length=length, seed=seed)


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


def build(config):
    nodes = config.graph[0]
    return memo_options.build_classifier(config, nodes, vocab_size=nodes + 1, embedding_dim=config.embedding_dim,
                                         num_heads=config.num_heads, key_size=config.key_size,
                                         sum_fact_items=memo_options.VARIANTS[config.model]["summed_facts"])


def predict(model, x):
    """(predicted node, hops) for every query."""
    import numpy as np

    logits, hops = memo_options.predict_with_hops(model, x, batch_size=512)
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


def summary(curve):
    last = curve[-1]
    return {**{k: v for k, v in last.items() if k in NODE_NAMES + ("path", "hops")},
            "minutes": last["minutes"], "rounds": len(curve), "graphs": last["graphs"], "curve": curve}


def train(config, run):
    """Train `config` (a `configs.ShortestPathConfig`) as `run` (`RunOptions`) says until its budget is spent
    (continuing what the workdir holds); returns the result also written to the results file."""
    from keras_relmem.training import train_in_rounds

    length = config.graph[2]
    test = graphs(config.test, config, seed=1_000_003)  # seeds of training rounds stay below this

    def train_round(model, index):
        from keras_relmem.callbacks import HaltingWarmup

        x, y = training_examples(graphs(config.graphs, config, seed=config.seed * 10_000 + index), length)
        start = time.perf_counter()
        history = model.fit(x, y, batch_size=config.batch_size, initial_epoch=index, epochs=index + 1,
                            verbose=run.verbosity(0), callbacks=[HaltingWarmup(config.halting_warmup)])
        seconds = time.perf_counter() - start
        return {"graphs": (index + 1) * config.graphs, "examples_per_s": round(len(y) / seconds, 1),
                "train_accuracy": round(100 * float(history.history["accuracy"][-1]), 2),
                "train_hops": round(float(history.history["hops"][-1]), 3)}

    def describe(entry):
        nodes = "  ".join(f"{name} {entry[name]:5.1f}%" for name in NODE_NAMES if name in entry)
        return (f"{memo_options.label(config.model)} {config.setting} round {entry['round']:3d} "
                f"{entry['minutes']:5.1f} min  {nodes}  path {entry['path']:5.1f}%  hops {entry['hops']}")

    on_round = recorder(config, run, summary)
    curve, _ = train_in_rounds(lambda: build(config), train_round, lambda model: test_pass(model, test, length),
                               run.workdir, config.budget_minutes, describe=describe, on_round=on_round,
                               on_resume=lambda model: memo_options.apply_halting_arguments(model, config))
    return {"complete": True, **summary(curve)}


def table(result):
    """A shortest-path run's result as the command prints it: each node's accuracy and mean hops, the path's."""
    args = result["args"]
    lines = [f"{memo_options.label(args['model'])} on shortest paths {args['setting']}: {result['rounds']} rounds, "
             f"{result['minutes']:.1f} training minutes", f"{'answer':>12} {'accuracy':>9} {'hops':>6}"]
    lines += [f"{name:>12} {result[name]:8.1f}% {result['hops'][name]:6.2f}" for name in NODE_NAMES if name in result]
    return "\n".join(lines + [f"{'whole path':>12} {result['path']:8.1f}%"])


TASK = runs.register(runs.Task(configs.ShortestPathConfig, train, table, "runs/memo_shortest_path", exports=False))
