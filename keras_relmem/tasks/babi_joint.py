"""MEMO on bAbI in the paper's joint set-up, trained in rounds: what `kr.train` runs for a
`configs.BabiJointConfig` (`relmem-train-babi --model memo --task all --joint`).

Banino et al. 2020 (Table 3) train one MEMO on the 20 tasks of en-10k together.
This trains `build_babi_model("memo")` that way under a wall-clock budget, in
rounds of `steps_per_round` batches (one `fit` epoch each, so the training
controls of `keras_relmem.callbacks` see the round's index): after every round
it measures per-task test error and mean hops, saves the model with its
optimizer and the curve (`keras_relmem.training.train_in_rounds`), and writes
the result so far to `results.json`, so a rerun of the same command continues
where the last round ended, across sittings.

Data: en-10k for every task but 3, whose 10k training file is missing from our
shared copy: task 3 uses its en (1k) files. Stories keep their most recent
`memory_size` sentences (320: nothing is cut; the longest story has 228).
Batches are bucketed by story length (`BabiData.bucketed_dataset`).

The recipe (`keras_relmem.recipes`, `memo_babi_joint` by default from the
command) sets the config's values; each field's help says what it does and why.

Example:

```
relmem-train-babi --model memo --task all --joint --data en-10k          # the headline recipe
relmem-train-babi --recipe memo_babi_joint_paper                         # the paper's set-up
```
"""

import dataclasses
import pathlib
import time

from keras_relmem import configs, runs
from keras_relmem.data.renaming import INTERCHANGEABLE_WORDS
from keras_relmem.tasks import memo_options
from keras_relmem.tasks.babi import check_files as babi_check_files
from keras_relmem.tasks.babi import format_table


def resolve(config):
    """`config` with what its fields imply filled in: `tasks` from a single `task`; the curriculum's
    `first_tasks` and `task_repeats` kept to the trained tasks; no curriculum rounds or rate without
    `first_tasks` (a recipe's curriculum taken back with `first_tasks=()`); `first_tasks_rounds` 1 by default
    with a curriculum; no answer warm-up rounds without `warmup_answer_loss`."""
    trained = config.trained_tasks
    first = tuple(task for task in config.first_tasks if task in trained)
    repeats = tuple(item for item in config.task_repeats if int(item.partition("=")[0]) in trained)
    return dataclasses.replace(
        config, tasks=tuple(trained) if config.tasks or config.task != "all" else (), first_tasks=first,
        task_repeats=repeats,
        first_tasks_rounds=(1 if config.first_tasks_rounds is None else config.first_tasks_rounds) if first else 0,
        first_tasks_learning_rate=config.first_tasks_learning_rate if first else None,
        answer_warmup_rounds=config.answer_warmup_rounds if config.warmup_answer_loss else None)


def keyed_items(items, flag, form, value_type, allowed, needs):
    """{key: value} from a flag's KEY=VALUE items (`form` names them, e.g. "TASK=K items such as 17=4"; the key
    an int named once, the value a `value_type` that `allowed(key, value)` accepts), or a ValueError naming the
    bad item and what it `needs`."""
    parsed = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            key, value = int(key), value_type(value)
        except ValueError:
            raise ValueError(f"{flag} takes {form}; got {item!r}") from None
        if not allowed(key, value) or key in parsed:
            raise ValueError(f"{flag}: {item!r} needs {needs}")
        parsed[key] = value
    return parsed


def round_rates(items):
    """[(round, rate)] in round order from --learning-rate-from's ROUND=RATE items, or a ValueError naming
    the bad item."""
    rates = keyed_items(items, "--learning-rate-from", "ROUND=RATE items such as 19=1e-3", float,
                        lambda start, rate: start >= 0 and rate > 0, "ROUND >= 0, RATE > 0 and a round named once")
    return sorted(rates.items())


def task_repeats(items):
    """{task: K} from --task-repeats' TASK=K items (kept as given in the arguments, so the recorded command
    reads back), or a ValueError naming the bad item."""
    return keyed_items(items, "--task-repeats", "TASK=K items such as 17=4", int, lambda task, times: times >= 1,
                       "K >= 1 and a task named once")


# task 3's en-10k training file is missing from the shared copy: its 1k files stand in
TASK_DATA = {"en-10k": {3: "en"}}


def load(config):
    from keras_relmem.data import load_babi

    return load_babi(list(config.tasks) or "all", config.data, data_dir=config.data_dir,
                     memory_size=config.memory_size, seed=config.seed, task_data=TASK_DATA.get(config.data))


def build(args, data, jit_compile=False):
    import keras

    from keras_relmem.models import build_babi_model
    from keras_relmem.training import adam

    keras.utils.set_random_seed(args.seed)
    model = build_babi_model(
        "memo", len(data.vocab), len(data.answer_vocab), data.story_length, data.sentence_length,
        data.query_length, embedding_dim=args.embedding_dim, num_heads=args.num_heads,
        key_size=args.key_size, max_hops=args.max_hops,
        attention_dropout=args.attention_dropout, answer_dropout=args.answer_dropout,
        kernel_initializer="bags" if args.bag_init else "glorot_uniform", share_hop_weights=args.share_hop_weights,
        logit_scale=args.logit_scale, coverage_penalty=args.coverage_penalty,
        sum_fact_items=args.sum_fact_items, time_encoding=args.time_encoding,
        attention_supervision=args.attention_supervision, supervised_hops=args.supervised_hops,
        answer_loss=args.answer_loss, halting=memo_options.halting_policy(args),
    )
    if args.embedding_stddev is not None:
        for salt, table in enumerate((model.embed, model.time_embed)):  # a seed per table: distinct rows
            if table is None:  # no time encoding
                continue
            table.embeddings.assign(keras.initializers.RandomNormal(
                stddev=args.embedding_stddev, seed=args.seed + salt)(table.embeddings.shape))
    model.compile(adam(args.learning_rate, weight_decay=args.weight_decay, decay_scope=args.decay_scope,
                       clipnorm=args.clipnorm),
                  jit_compile=bool(jit_compile))
    return model


def repeats_for_round(args, tasks, index):
    """Each task's repeats in round `index`'s training pass: --task-repeats, and during the curriculum's
    first --first-tasks-rounds rounds 0 for every task not in --first-tasks."""
    repeats = task_repeats(args.task_repeats)
    if index < args.first_tasks_rounds:
        repeats = {**repeats, **{task: 0 for task in tasks if task not in args.first_tasks}}
    return repeats


def train_dataset(data, args, seed, buckets=None, index=None):
    """Training batches of round `index` (None: past any curriculum); without buckets, every batch is
    padded to the longest story (as `BabiData.dataset`), through the same index-shuffling pipeline so
    only the padding differs."""
    bounds = None if (args.buckets if buckets is None else buckets) else [data.story_length]
    features = ("story", "query", "time") + (("support",) if args.attention_supervision else ())
    repeats = repeats_for_round(args, data.tasks, args.first_tasks_rounds if index is None else index)
    return data.bucketed_dataset("train", args.batch_size, bounds=bounds, seed=seed, features=features,
                                 time_noise=args.time_noise, task_repeats=repeats,
                                 rename_words={t: INTERCHANGEABLE_WORDS[t] for t in args.rename_words}).repeat()


def split_arrays(data, split, limit):
    """A split with its story lengths (all of it, or the first `limit` questions of every task)."""
    import numpy as np

    arrays = {**data.arrays(split), "length": data.story_lengths(split)}
    if not limit:
        return arrays
    keep = np.concatenate([np.flatnonzero(arrays["task"] == t)[:limit] for t in data.tasks])
    return {k: v[keep] for k, v in arrays.items()}


def length_sorted_batches(arrays, size=256):
    """(rows, inputs) batches of `arrays` with stories of similar length together, each cut to its longest
    story: little padding."""
    import numpy as np

    lengths = arrays["length"]
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(order), size):
        rows = order[start:start + size]
        width = int(lengths[rows].max())
        yield rows, {"story": arrays["story"][rows, :width], "query": arrays["query"][rows],
                     "time": arrays["time"][rows, :width]}


def adaptive_answers(model, arrays):
    """(correct, hops) of every question in `arrays`, by adaptive inference."""
    import numpy as np

    forward = memo_options.hops_forward(model)  # traced once per model, not once per evaluation
    correct = np.zeros(len(arrays["length"]), bool)
    hops = np.zeros(len(arrays["length"]), "float32")
    for rows, x in length_sorted_batches(arrays):
        out = forward(x)
        correct[rows] = np.argmax(np.asarray(out["logits"]), -1) == arrays["answer"][rows]
        hops[rows] = np.asarray(out["hops"])
    return correct, hops


def per_task(model, data, args):
    """{task: {"error": %, "hops": mean}} on the test split, by adaptive inference."""
    arrays = split_arrays(data, "test", args.test_limit)
    correct, hops = adaptive_answers(model, arrays)
    result = {}
    for task in data.tasks:
        rows = arrays["task"] == task
        result[str(task)] = {"error": round(100 * (1 - float(correct[rows].mean())), 2),
                             "hops": round(float(hops[rows].mean()), 3)}
    return result


def summary(tasks):
    errors = [row["error"] for row in tasks.values()]
    return {"mean_error": round(sum(errors) / len(errors), 2), "solved": sum(e < 5.0 for e in errors)}


def supporting_facts(data, split="test"):
    """{task: mean number of supporting facts per question}, from the data's own supporting-fact ids."""
    counts = {}
    for example in data.examples[split]:
        counts.setdefault(str(example.task), []).append(len(example.supporting_facts))
    return {task: round(sum(c) / len(c), 3) for task, c in sorted(counts.items(), key=lambda kv: int(kv[0]))}


def hops_spearman(tasks, facts):
    """Spearman's rank correlation, across tasks, of a task's mean hops and its mean supporting facts."""
    names = [t for t in tasks if t in facts]
    if len(names) < 3:
        return None  # undefined for one task, and trivially +-1 for two
    hops, counts = [tasks[t]["hops"] for t in names], [facts[t] for t in names]
    if len(set(hops)) == 1 or len(set(counts)) == 1:
        return None  # undefined when either side is constant (every task the same hops, e.g. before halting learns)
    import numpy as np

    return round(float(np.corrcoef(average_ranks(hops), average_ranks(counts))[0, 1]), 3)


def average_ranks(values):
    """1-based ranks of `values`, tied values sharing the mean of their ranks (Spearman's rho is the Pearson
    correlation of these)."""
    import numpy as np

    values = np.asarray(values, "float64")
    ranks = np.empty(len(values))
    for value in np.unique(values):
        at = np.flatnonzero(values == value)
        ranks[at] = (np.sum(values < value) + 1 + np.sum(values <= value)) / 2
    return ranks


def solved_hops_spearman(tasks, facts):
    """`hops_spearman` over the solved tasks only (test error under 5%): an unsolved task's answer stays
    uncertain, which keeps an entropy-reading policy hopping whatever the task's reasoning needs."""
    return hops_spearman({t: row for t, row in tasks.items() if row["error"] < 5.0}, facts)


def train_errors(model, data, per_task_limit=100):
    """{task: error %} on the first `per_task_limit` training questions of every task (adaptive inference):
    beside the test error, whether a task is overfitted or never learnt."""
    arrays = split_arrays(data, "train", per_task_limit)
    correct, _ = adaptive_answers(model, arrays)
    return {str(t): round(100 * (1 - float(correct[arrays["task"] == t].mean())), 2) for t in data.tasks}


def hop_errors(model, data, args):
    """{task: {"error_by_hop": [% wrong after hop 1..N], "wrong_at_every_hop": %,
    "attention_on_support_by_hop": [% of the attention on the supporting facts at hop 1..N]}}: all N hops
    unrolled on the test split, whatever the halting network would do. A task whose answer is right at some
    hop but not where the policy stops needs a better policy; one wrong at every hop, a better MEMO. The
    attention (mean over heads) says whether the hops read the facts the data names as the answer's
    support."""
    import numpy as np

    arrays = split_arrays(data, "test", args.test_limit)
    wrong = np.zeros((len(arrays["length"]), model.memo.max_hops), bool)
    on_support = np.zeros(wrong.shape)
    for rows, x in length_sorted_batches(arrays):
        embedded, mask = model.embed_inputs(x)
        out = model.memo.unrolled(embedded, mask=mask, training=False)
        wrong[rows] = np.argmax(np.asarray(out["answer_logits"]), -1) != arrays["answer"][rows, None]
        support = arrays["support"][rows, :x["story"].shape[1]] > 0  # (b, I)
        attention = np.asarray(out["attention"]).mean(2)  # (b, N, I)
        on_support[rows] = (attention * support[:, None, :]).sum(-1)
    result = {}
    for task in data.tasks:
        rows = arrays["task"] == task
        result[str(task)] = {"error_by_hop": [round(100 * float(e), 2) for e in wrong[rows].mean(0)],
                             "wrong_at_every_hop": round(100 * float(wrong[rows].all(1).mean()), 2),
                             "attention_on_support_by_hop": [round(100 * float(a), 1)
                                                             for a in on_support[rows].mean(0)]}
    return result


def train_model(config, run):
    """Train (or go on training) the run `config` describes until its budget is spent.

    Args:
        config: a `configs.BabiJointConfig`.
        run: the run's `keras_relmem.runs.RunOptions` (workdir, results file, threads, ...).

    Returns:
        `(results, model, data)`: the complete results (`kr.train` writes them to the results file; each round's
        are written as it ends).
    """
    from keras_relmem.training import train_in_rounds, write_json

    recorded = run.recorded(config)
    args = resolve(config)
    data = load(args)
    print(f"bAbI tasks {', '.join(map(str, data.tasks))}: {len(data.examples['train'])} training questions, "
          f"stories up to {data.story_length} sentences; bucket bounds {data_bucket_bounds(data)}", flush=True)

    def resume(model):
        memo_options.apply_halting_arguments(model, args)  # read when the training step is traced
        apply_supervision_arguments(model, args)
        if args.reset_halting:
            reset_halting_network(model)
            print(f"halting network re-initialised, gamma {args.gamma}", flush=True)

    def train_round(model, index, seed):
        apply_learning_rate(model, learning_rate_for_round(args, index))  # every round, so a resume too
        if index == args.first_tasks_rounds and index:
            print(f"round {index}: curriculum over, training on every task", flush=True)
        ds = train_dataset(data, args, seed=seed * 1000 + index, index=index)
        start = time.perf_counter()
        # a round is an epoch of fit, so the controls (keras_relmem.callbacks) see the round's index
        history = model.fit(ds, steps_per_epoch=args.steps_per_round, initial_epoch=index, epochs=index + 1,
                            callbacks=training_controls(args), verbose=run.verbosity(0), shuffle=False)
        seconds = time.perf_counter() - start
        return {
            "examples": (index + 1) * args.steps_per_round * args.batch_size,
            "examples_per_s": round(args.steps_per_round * args.batch_size / seconds, 1),
            "train_accuracy": round(100 * history.history["accuracy"][-1], 2),
            "train_hops": round(history.history["hops"][-1], 3),
        }

    def evaluate(model):
        tasks = per_task(model, data, args)
        for task, error in train_errors(model, data).items():
            tasks[task]["train_error"] = error
        return {**summary(tasks), "tasks": tasks}

    def describe(entry):
        return (f"round {entry['round']:3d}  {entry['minutes']:6.1f} min  {entry['examples']:8d} examples  "
                f"train acc {entry['train_accuracy']:5.1f}%  mean test error {entry['mean_error']:5.2f}%  "
                f"solved {entry['solved']:2d}/{len(data.tasks)}  train hops {entry['train_hops']:.2f}")

    def rounds(seed, workdir, max_rounds=None, on_round=None):
        """Train the model of `seed` (initial weights and data order) in `workdir` until the budget or
        `max_rounds`."""
        seeded = dataclasses.replace(args, seed=seed)
        return train_in_rounds(
            lambda: build(seeded, data, jit_compile=run.jit_compile),
            lambda model, index: train_round(model, index, seed), evaluate,
            workdir, args.budget_minutes, describe=describe, on_resume=resume, on_round=on_round,
            max_rounds=max_rounds,
        )

    facts = supporting_facts(data)
    workdir = pathlib.Path(run.workdir)
    starts = choose_start(args, workdir, rounds) if args.starts > 1 else None

    def results_of(curve, complete=False, extra=None):
        last = curve[-1]
        results = {
            "minutes": last["minutes"],
            "examples": last["examples"],
            "epochs": round(last["examples"] / len(data.examples["train"]), 3),
            "tasks": last["tasks"],
            **summary(last["tasks"]),
            "supporting_facts": facts,
            "hops_spearman": hops_spearman(last["tasks"], facts),
            "complete": complete,
            **({"starts": starts} if starts else {}),
            **(extra or {}),
            # each round's per-task test and training errors (overfitting or never learnt) and hops (when
            # the hops come to follow the supporting facts)
            "curve": [{**{k: v for k, v in e.items() if k != "tasks"},
                       "task_errors": task_errors(e["tasks"]),
                       "task_hops": {t: row["hops"] for t, row in e["tasks"].items()}}
                      for e in curve],
            "args": recorded,
        }
        return results

    def record(curve):  # the result so far, after every round (the complete one is the run lifecycle's to write)
        write_json(run.results_path, results_of(curve))

    curve, model = rounds(starts["seed"] if starts else args.seed, workdir, on_round=record)
    return results_of(curve, complete=True, extra={"hop_errors": hop_errors(model, data, args)}), model, data


# start k of a run with --seed s trains with seed s + 1000 k: its data-order seeds (seed * 1000 + round)
# stay clear of any other seed's
START_SEED_STRIDE = 1000


def start_seed(seed, start):
    """The seed of start `start` (0, 1, ...) of a run with --seed `seed`; start 0 is the run's own."""
    return seed + START_SEED_STRIDE * start


def task_errors(tasks):
    """{task: [test error %, training error %]} of an evaluation's per-task rows, as results files keep them."""
    return {task: [row["error"], row.get("train_error")] for task, row in tasks.items()}


def mean_train_error(entry, tasks=None):
    """A curve entry's training error (first 100 training questions of each task), averaged over `tasks`
    (names as in the entry; None: every task)."""
    errors = [row["train_error"] for task, row in entry["tasks"].items() if tasks is None or task in tasks]
    return round(sum(errors) / len(errors), 2)


def start_trained_tasks(args, tasks):
    """The tasks (names) that every one of the starts' --start-rounds rounds trains: those a curriculum
    (--first-tasks) leaves out are not chosen on, whatever their errors by chance."""
    return [str(task) for task in tasks
            if all(repeats_for_round(args, tasks, index).get(task, 1) > 0 for index in range(args.start_rounds))]


def choose_start(args, workdir, rounds):
    """--starts: train each start for --start-rounds rounds in `workdir`/start<k>, then go on with the one of
    lowest training error over the tasks those rounds train (`start_trained_tasks`; a curriculum's left-out
    tasks say nothing about a start), by `keras_relmem.training.best_of_starts`. `rounds(seed, workdir,
    max_rounds)` trains one start. Returns the choice's record (the chosen start, its seed, every start's
    errors), read back on a rerun."""
    from keras_relmem.training import WorkdirMismatch, best_of_starts

    def summarize(last):
        chosen_on = start_trained_tasks(args, [int(task) for task in last["tasks"]])
        return {"train_error": mean_train_error(last, chosen_on), "mean_error": last["mean_error"],
                "solved": last["solved"], "task_errors": task_errors(last["tasks"])}

    tasks = sorted(int(task) for task in (args.tasks or range(1, 21)))
    try:
        return best_of_starts(lambda seed, folder, limit: rounds(seed, folder, max_rounds=limit), workdir,
                              args.starts, args.start_rounds, args.seed, summarize,
                              extra={"chosen_on": start_trained_tasks(args, tasks)}, seed_stride=START_SEED_STRIDE)
    except WorkdirMismatch as error:
        raise ValueError(f"starts {args.starts}, start_rounds {args.start_rounds}: {error}") from None


def answer_warmup_rounds(args):
    """How many rounds train with --warmup-answer-loss: --answer-warmup-rounds, or the halting warm-up's."""
    return args.halting_warmup_rounds if args.answer_warmup_rounds is None else args.answer_warmup_rounds


def apply_supervision_arguments(model, args):
    """Give a (resumed) MEMOClassifier the run's --attention-supervision and --supervised-hops; like the
    halting flags, they are read when the training step is traced, after this."""
    before = (model.attention_supervision, model.supervised_hops)
    try:
        model.set_attention_supervision(float(args.attention_supervision), int(args.supervised_hops))
    except ValueError as error:
        raise ValueError(f"attention_supervision/supervised_hops for the saved model: {error}") from None
    if before != (model.attention_supervision, model.supervised_hops):
        print(f"attention supervision {before[0]:g} on {before[1]} hop(s) -> "
              f"{args.attention_supervision:g} on {args.supervised_hops}", flush=True)


def learning_rate_for_round(args, index):
    """Adam's rate in round `index`: --first-tasks-learning-rate in the curriculum's rounds, else the last
    --learning-rate-from rate whose round has come, else --learning-rate."""
    if index < args.first_tasks_rounds and args.first_tasks_learning_rate is not None:
        return args.first_tasks_learning_rate
    rate = args.learning_rate
    for start, later in round_rates(args.learning_rate_from):
        if index >= start:
            rate = later
    return rate


def apply_learning_rate(model, rate):
    """Give a (resumed) model's Adam `rate`: a run can go on at another rate (after its curriculum, or after
    its supervision is withdrawn) without losing the optimizer's moments."""
    import keras

    variable = model.optimizer.learning_rate  # MEMO's Adam's, not the halting network's RMSProp's
    before = float(keras.ops.convert_to_numpy(variable))
    if abs(before - rate) > 1e-6 * max(before, rate):
        variable.assign(rate)
        print(f"learning rate {before:g} -> {rate:g}", flush=True)


def training_controls(args):
    """The callbacks of a round: the halting network's warm-up, the answer loss's (--warmup-answer-loss)
    and linear start (--linear-start-rounds), each set by the round's index, so a resumed run is in the
    phase its round says."""
    from keras_relmem.callbacks import AnswerLossWarmup, HaltingWarmup, LinearStart

    controls = [HaltingWarmup(args.halting_warmup_rounds)]
    if args.warmup_answer_loss:
        controls.append(AnswerLossWarmup(args.warmup_answer_loss, answer_warmup_rounds(args), loss=args.answer_loss))
    if args.linear_start_rounds:
        controls.append(LinearStart(args.linear_start_rounds))
    return controls


def reset_halting_network(model):
    """Give the halting network fresh initial weights (MEMO itself keeps its training)."""
    policy = model.memo.policy
    fresh = type(policy).from_config(policy.get_config())
    fresh.build()
    policy.set_weights(fresh.get_weights())


def data_bucket_bounds(data):
    from keras_relmem.data import babi

    return babi.bucket_bounds(data.story_lengths("train"))


def train(config, run):
    """Train `config` (a `configs.BabiJointConfig`) as `run` (`RunOptions`) says, until its budget is spent
    (continuing what the workdir holds), and export the model; returns the results dict."""
    from keras_relmem import export

    results, model, data = train_model(config, run)
    if run.export:
        results["export"] = str(export.export_babi(model, data, run.export_base(),
                                                   name=export.babi_model_name("memo", data.tasks)))
    return results


def table(results):
    """A joint run's results as the command prints them: the per-task table and the hops' rank correlation."""
    rows = {int(task): {"accuracy": 1 - row["error"] / 100, "error": row["error"] / 100}
            for task, row in results["tasks"].items()}
    rho = results["hops_spearman"]
    return (format_table(rows, "memo, joint") + "\nSpearman of mean hops and supporting facts across tasks: "
            + ("-" if rho is None else f"{rho:.2f}"))


def check_files(config):
    """Every bAbI file the joint run reads exists (task 3 of en-10k: its en files, see `load`)."""
    babi_check_files(config, config.trained_tasks, TASK_DATA.get(config.data))


TASK = runs.register(runs.Task(configs.BabiJointConfig, train, table, "runs/babi/memo_joint", check=check_files))
