"""MEMO on paired associative inference: what `kr.train` runs for a `configs.PAIConfig` (`relmem-train-memo
--task pai`).

Banino et al. 2020 (§4, Tables 1, 5 and 6): every memory stores the consecutive pairs (A-B, B-C, ...) of
several sequences of `length` items; a query asks which of two items belongs to the cue's sequence, either
the next item (direct) or one further away (inference: A-C at distance 1, A-D at distance 2, A-E at 3).
Every query type is reported separately, with MEMO's mean hops per type: adaptive computation should spend
more hops on longer inference distances.

Episodes are generated afresh every round (`episodes` per round: no episode is seen twice) from a fixed pool
of item vectors standing in for the paper's ImageNet embeddings. The answer is the match's identity (a
softmax over the item pool); the model's choice is whichever of the query's two choices scores higher. A
curriculum grows the number of sequences per memory (`curriculum="4:30,8:10,16:1"`: rounds per stage, the
last stage runs until the budget is spent). After every round the test accuracies and hops are recorded and
the model saved, so a rerun continues.
"""

import time

from keras_relmem import configs, runs
from keras_relmem.tasks import memo_options
from keras_relmem.tasks.rounds import recorder

LETTERS = "ABCDEFGHIJ"


def parse_curriculum(text):
    """`"4:30,8:10,16:1"` -> `[(4, 30), (8, 10), (16, 1)]` (sequences, rounds)."""
    return [tuple(int(n) for n in part.split(":")) for part in text.split(",")]


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


def episodes(count, sequences, config, seed):
    """`count` episodes of `sequences` sequences per memory, as `config` describes them."""
    from keras_relmem.data import synthetic

    data = synthetic.paired_associative_inference(
        count, config.length, sequences, config.embedding_size, seed=seed, num_items=config.num_items)
    if memo_options.VARIANTS[config.model]["summed_facts"]:  # the EMN-style input: a fact's items summed
        data["memory"] = data["memory"].sum(axis=2, keepdims=True)
    data["label"] = data["match_id"] if config.answer == "identity" else data["target"]
    return data


def inputs(data):
    return {"facts": data["memory"], "query": data["query"]}


def build(config):
    """The compiled MEMOClassifier of `config` (warm-started from `config.warm_start` if it names a model)."""
    answers = config.num_items if config.answer == "identity" else 2
    model = memo_options.build_classifier(config, answers, embedding_dim=64, num_heads=4, key_size=32)
    if config.warm_start:
        model(inputs(episodes(2, 4, config, seed=0)))  # build, so that there are weights to copy into
        copied = memo_options.warm_start_memo(model, config.warm_start)
        print(f"warm start: {copied} weights from {config.warm_start}, a fresh halting network", flush=True)
    return model


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


def test_pass(model, data, answer):
    """Per-example correctness and hops on a test set."""
    logits, hops = memo_options.predict_with_hops(model, inputs(data))
    return choice(logits, data["query_ids"], answer) == data["target"], hops


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


def summary(curve):
    """The result of a run so far: the last round's accuracies and hops per query type, and the curve."""
    last = curve[-1]
    return {**last["accuracy"], "hops": last["hops"], "hops_by_distance": last["hops_by_distance"],
            "minutes": last["minutes"], "rounds": len(curve), "episodes": last["episodes"],
            "sequences": last["test_sequences"], "curve": curve}


def train(config, run):
    """Train `config` (a `configs.PAIConfig`) as `run` (`RunOptions`) says until its budget is spent
    (continuing what the workdir holds); returns the result also written to the results file."""
    from keras_relmem.training import anneal_learning_rate, train_in_rounds

    stages = parse_curriculum(config.curriculum)
    tests, current = {}, {}

    def train_round(model, index):
        import numpy as np

        from keras_relmem.callbacks import HaltingWarmup

        sequences = current["sequences"] = sequences_at(stages, index)
        data = episodes(config.episodes, sequences, config, seed=config.seed * 100_000 + index)
        start = time.perf_counter()
        history = model.fit(inputs(data), data["label"], batch_size=config.batch_size, initial_epoch=index,
                            epochs=index + 1, verbose=run.verbosity(0),
                            callbacks=[HaltingWarmup(config.halting_warmup)])
        seconds = time.perf_counter() - start
        return {"sequences": sequences, "episodes": (index + 1) * config.episodes,
                "learning_rate": float(np.asarray(model.optimizer.learning_rate)),
                "episodes_per_s": round(config.episodes / seconds, 1),
                "train_hops": round(float(history.history["hops"][-1]), 3)}

    def evaluate(model):
        sequences = current["sequences"]  # the memory size of the round just trained
        if sequences not in tests:
            tests[sequences] = episodes(config.test, sequences, config, seed=10_000 + sequences)
        data = tests[sequences]
        correct, hops = test_pass(model, data, config.answer)
        accuracy, mean_hops, by_distance = by_query_type(correct, hops, data["query_type"])
        return {"test_sequences": sequences, "accuracy": accuracy, "hops": mean_hops,
                "hops_by_distance": by_distance}

    def describe(entry):
        accuracy = "  ".join(f"{k} {v:5.1f}" for k, v in entry["accuracy"].items())
        hops = " ".join(f"{v:.2f}" for v in entry["hops_by_distance"].values())
        return (f"{memo_options.label(config.model)} L={config.length} round {entry['round']:3d} "
                f"({entry['sequences']:2d} seq) {entry['minutes']:5.1f} min  {accuracy}  hops by distance {hops}")

    def anneal(model, minutes):
        if config.final_learning_rate is not None:
            anneal_learning_rate(model, minutes, config.budget_minutes, config.learning_rate,
                                 config.final_learning_rate)

    on_round = recorder(config, run, summary)
    curve, _ = train_in_rounds(lambda: build(config), train_round, evaluate, run.workdir, config.budget_minutes,
                               describe=describe, on_round=on_round, before_round=anneal,
                               on_resume=lambda model: memo_options.apply_halting_arguments(model, config))
    return {"complete": True, **summary(curve)}


def table(result):
    """A PAI run's result as the command prints it: test accuracy and mean hops per query type."""
    args = result["args"]
    kinds = list(result["hops"])
    lines = [f"{memo_options.label(args['model'])} on paired associative inference, length {args['length']}: "
             f"{result['rounds']} rounds, {result['minutes']:.1f} training minutes, {result['sequences']} sequences "
             "per memory",
             f"{'query':>6} {'accuracy':>9} {'hops':>6}"]
    lines += [f"{kind:>6} {result[kind]:8.1f}% {result['hops'][kind]:6.2f}" for kind in kinds]
    by_distance = ", ".join(f"{d}: {h:.2f}" for d, h in result["hops_by_distance"].items())
    return "\n".join(lines + [f"mean hops by inference distance: {by_distance}"])


def check(config):
    """A warm-start file, if named, is a readable .keras file."""
    memo_options.check_warm_start(config.warm_start)


TASK = runs.register(runs.Task(configs.PAIConfig, train, table, "runs/memo_pai", check=check, exports=False))
