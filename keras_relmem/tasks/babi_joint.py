"""MEMO on bAbI in the paper's joint set-up, trained in rounds: the library behind
`tasks/train_babi.py --model memo --task all --joint`.

Banino et al. 2020 (Table 3) train one MEMO on the 20 tasks of en-10k together.
This trains `build_babi_model("memo")` that way under a wall-clock budget, in
rounds of `--steps-per-round` batches (one `fit` epoch each, so the training
controls of `keras_relmem.callbacks` see the round's index): after every round
it measures per-task test error and mean hops, saves the model with its
optimizer and the curve (`keras_relmem.training.train_in_rounds`), and writes
the result so far to `--results`, so a rerun of the same command continues
where the last round ended, across sittings.

Data: en-10k for every task but 3, whose 10k training file is missing from our
shared copy: task 3 uses its en (1k) files. Stories keep their most recent
`--memory-size` sentences (320: nothing is cut; the longest story has 228).
Batches are bucketed by story length (`BabiData.bucketed_dataset`).

The recipe (`keras_relmem.recipes`, `memo_babi_joint` by default from the task
script) sets the flags' values; each flag's help says what it does and why.

Example:

```
python tasks/train_babi.py --model memo --task all --joint --data en-10k          # the headline recipe
python tasks/train_babi.py --model memo --task all --joint --data en-10k --recipe memo_babi_joint_paper
```
"""

import argparse
import pathlib
import time

from keras_relmem.data.renaming import INTERCHANGEABLE_WORDS
from keras_relmem.models.memo import ANSWER_LOSSES
from keras_relmem.tasks import babi, common, memo_options

RECIPES = ("memo_babi_joint", "memo_babi_joint_paper")


def build_parser(description=None, workdir="runs/babi/memo_joint"):
    """The joint trainer's flags: what to train (--model, --task, --joint, --data), --recipe, every part of
    the recipe, and the run's (--seed, --workdir, --results, --threads, export)."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    parser.add_argument("--recipe", choices=RECIPES, default=None,
                        help="a named recipe (keras_relmem.recipes) whose settings are the defaults of the other "
                             "flags; an explicit flag overrides its part (default: %(default)s)")
    parser.add_argument("--model", choices=("memo",), default="memo", help="the model (MEMO only)")
    parser.add_argument("--task", type=babi.parse_task, default="all",
                        help="'all' (the default) or one task 1..20 (see --tasks)")
    parser.add_argument("--joint", action="store_true", help="one model on all the given tasks (always, here)")
    parser.add_argument("--data", choices=("en-10k", "en"), default="en-10k",
                        help="10k questions per task (task 3: its 1k files) or 1k")
    parser.add_argument("--data-dir", default=None, help="folder holding babi/ (default $KERAS_RELMEM_DATA)")
    parser.add_argument("--tasks", type=int, nargs="+", default=None,
                        help="train and test on these tasks only (default: all 20, the paper's joint set-up), "
                             "e.g. to try a recipe on the failing tasks before a joint run")
    parser.add_argument("--task-repeats", nargs="*", default=[], metavar="TASK=K",
                        help="put these tasks' training questions K times in every pass (BabiData.bucketed_dataset's "
                             "task_repeats), e.g. 17=8 19=4: the tasks a joint run learns slowest get more steps")
    parser.add_argument("--first-tasks", nargs="*", type=int, default=[], metavar="TASK",
                        help="a curriculum: train on these tasks alone for the first --first-tasks-rounds rounds, "
                             "then on every task (evaluation always covers every task), e.g. 16: task 16 alone "
                             "first (on tasks 1 and 16 it did not find the chain on a seed that failed without it)")
    parser.add_argument("--first-tasks-rounds", type=optional(int), default=None,
                        help="rounds trained on --first-tasks alone (default: 1 with --first-tasks, else 0)")
    parser.add_argument("--learning-rate-from", nargs="*", default=[], metavar="ROUND=RATE",
                        help="Adam's rate from these rounds on (--learning-rate before the first), e.g. 19=1e-3; "
                             "on joint bAbI from the tied start that rate lost task 16's chain at once, while 65=1e-4 "
                             "after 3e-4 lowered the mean error by about a point")
    parser.add_argument("--first-tasks-learning-rate", type=optional(float), default=None,
                        help="Adam's rate in the --first-tasks rounds (default: --learning-rate), e.g. 3e-4: on "
                             "tasks 1 and 16 the chain was found at 3e-4 and not at 1e-3, while the other tasks "
                             "learn fastest at 1e-3")
    parser.add_argument("--rename-words", type=int, nargs="*", default=[], metavar="TASK",
                        help="rename these tasks' interchangeable words (people, objects, places, animals, colours) "
                             "consistently within each training question, a new renaming per question "
                             "(keras_relmem.data.renaming), so stories cannot be learnt by their names; tasks 3 "
                             "and 16")
    parser.add_argument("--budget-minutes", type=float, default=120.0,
                        help="training minutes of the whole run, every start's included (see --starts)")
    parser.add_argument("--starts", type=int, default=1,
                        help="train this many starts (initial weights and data order; the first is --seed's own) "
                             "for --start-rounds rounds each, then go on with the one of lowest training error: "
                             "a start that has not found a task's chain by then seldom finds it later")
    parser.add_argument("--start-rounds", type=int, default=2, help="rounds each of --starts trains before the choice")
    parser.add_argument("--steps-per-round", type=int, default=400, help="training batches between evaluations")
    parser.add_argument("--memory-size", type=int, default=320,
                        help="most recent sentences kept per story (320 keeps every story whole)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3,
                        help="Adam's rate for MEMO (a resumed run goes on at this rate)")
    parser.add_argument("--clipnorm", type=float, default=10.0, help="gradient-norm clip of each variable")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="AdamW's decoupled weight decay on MEMO's weights (0: plain Adam; the halting "
                             "network's RMSProp never decays)")
    parser.add_argument("--decay-scope", choices=("all", "matrices"), default="matrices",
                        help="with --weight-decay: every weight, or embeddings and kernels only (not biases)")
    parser.add_argument("--time-noise", type=float, default=0.0,
                        help="age the training facts as if an empty sentence followed each with this "
                             "probability (end-to-end memory networks' random noise, e.g. 0.1)")
    parser.add_argument("--linear-start-rounds", type=int, default=0,
                        help="train the first rounds with the softmax taken out of the attention (end-to-end "
                             "memory networks' linear start), then put it back")
    parser.add_argument("--bag-init", action=argparse.BooleanOptionalAction, default=False,
                        help="MEMO(bag_init=True): keys, values and query start as one projection of their summed "
                             "words, so facts sharing the query's words start with higher logits")
    parser.add_argument("--per-hop-weights", action="store_true",
                        help="MEMO(share_hop_weights=False): each hop its own W_q and W_h, so a hop can undo what "
                             "the last one added to the query (task 16's chain)")
    parser.add_argument("--logit-scale", type=optional(float), default=None,
                        help="MEMO(logit_scale=S): attention logits are the cosine of key and query times a learned "
                             "scale per head starting at S, so the softmax can neither saturate nor start flat")
    parser.add_argument("--coverage-penalty", type=float, default=0.0,
                        help="MEMO(coverage_penalty=C): each hop's logits lose C times the attention its head put on "
                             "each fact at the hops before, so a hop reads a fact not read yet (a chain of facts, "
                             "task 16's); 0: off, the paper's")
    parser.add_argument("--sum-fact-items", action="store_true",
                        help="MEMOClassifier(sum_fact_items=True): each sentence's words summed into one item, as "
                             "end-to-end memory networks' bag of words (far fewer weights per fact to memorise with)")
    parser.add_argument("--attention-supervision", type=float, default=0.0,
                        help="a diagnostic, not the paper's training: weight of a loss that shows hop t the t-th "
                             "supporting fact the data names (MEMOClassifier's attention_supervision; 0: none); "
                             "set on a resumed model too, so 0 on a copy of a supervised run's --workdir withdraws "
                             "it (is the chain, once shown, kept by the answers' loss alone?)")
    parser.add_argument("--supervised-hops", type=int, default=1,
                        help="how many of the first hops --attention-supervision shows their fact (default 1)")
    parser.add_argument("--no-time", action="store_true",
                        help="no time encoding: facts are their words alone, so the attention cannot pick a "
                             "sentence by its place in the story")
    parser.add_argument("--dropout", type=float, default=0.1,
                        help="MEMO's dropout on the attention weights and before the answer layer")
    parser.add_argument("--embedding-dim", type=int, default=64, help="word embedding size")
    parser.add_argument("--embedding-stddev", type=optional(float), default=None,
                        help="draw the word and time embeddings from N(0, this) (default: Keras' uniform in "
                             "+-0.05, which starts every attention logit near 0)")
    parser.add_argument("--num-heads", type=int, default=4, help="MEMO's attention heads")
    parser.add_argument("--key-size", type=int, default=32, help="MEMO's key size per head")
    parser.add_argument("--max-hops", type=int, default=5, help="MEMO's hard stop N")
    parser.add_argument("--halting-warmup-rounds", type=int, default=10,
                        help="rounds before the halting network starts learning")
    memo_options.add_halting_arguments(parser)
    parser.add_argument("--warmup-answer-loss", type=optional(str), choices=(*ANSWER_LOSSES, None), default=None,
                        help="the answer loss of the --halting-warmup-rounds rounds (default: --answer-loss "
                             "throughout); e.g. 'last' while a chain of facts is found, then --answer-loss "
                             "'all' while the policy learns where to stop")
    parser.add_argument("--answer-warmup-rounds", type=optional(int), default=None,
                        help="rounds trained with --warmup-answer-loss (default: --halting-warmup-rounds); fewer "
                             "lets the early hops learn to answer before the halting network starts learning")
    parser.add_argument("--reset-halting", action="store_true",
                        help="re-initialise the halting network of a resumed MEMO before this sitting trains "
                             "(e.g. after it collapsed under another --gamma)")
    parser.add_argument("--jit-compile", action="store_true", help="XLA training steps (see --speed)")
    parser.add_argument("--no-buckets", action="store_true", help="pad every batch to the longest story")
    parser.add_argument("--test-limit", type=int, default=0, help="evaluate on this many test questions per task")
    parser.add_argument("--threads", type=int, default=0, help="cores for TensorFlow (0: all)")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and data order")
    parser.add_argument("--workdir", default=workdir, help="the run's saved model and curve (a rerun continues)")
    parser.add_argument("--results", default=None, help="the results JSON (default WORKDIR/results.json)")
    parser.add_argument("--export-dir", default=None, help="TF Serving base folder (default WORKDIR/export)")
    parser.add_argument("--no-export", action="store_true", help="do not export a SavedModel at the end")
    parser.add_argument("--resume", action="store_true",
                        help="accepted for the other bAbI runs' sake: a rerun always continues what WORKDIR holds")
    parser.add_argument("--verbose", type=int, choices=(0, 1, 2), default=0,
                        help="Keras' progress output within a round (default 0: one line per round)")
    return parser


def parse_args(argv=None, parser=None, recipe=None):
    """Parse `argv` with the settings of its --recipe (or `recipe`, when it names none) as defaults; an
    explicit flag still wins. Every impossible combination is refused here, naming the flag."""
    parser = common.show_defaults(parser or build_parser())
    # --help waits until the recipe's values are the defaults it shows
    name = parser.parse_known_args([a for a in (argv or []) if a not in ("-h", "--help")])[0].recipe or recipe
    if name:
        common.apply_recipe(parser, name)
    args = parser.parse_args(argv)
    args.recipe = name
    if args.task != "all":
        if args.tasks and args.tasks != [args.task]:
            parser.error(f"--task {args.task} and --tasks {args.tasks} disagree; give one of them")
        args.tasks = [args.task]
    if args.results is None:
        args.results = str(pathlib.Path(args.workdir) / "results.json")
    if args.weight_decay < 0:  # Keras' Adam takes it and would grow every weight
        parser.error(f"--weight-decay must be >= 0; got {args.weight_decay}")
    if args.embedding_stddev is not None and args.embedding_stddev <= 0:
        parser.error(f"--embedding-stddev must be > 0; got {args.embedding_stddev}")
    if args.linear_start_rounds < 0:
        parser.error(f"--linear-start-rounds must be >= 0; got {args.linear_start_rounds}")
    if not args.warmup_answer_loss and args.answer_warmup_rounds == parser.get_default("answer_warmup_rounds"):
        args.answer_warmup_rounds = None  # the recipe's answer warm-up goes with its loss (`--warmup-answer-loss none`)
    if args.answer_warmup_rounds is not None and (args.answer_warmup_rounds < 0 or not args.warmup_answer_loss):
        parser.error("--answer-warmup-rounds takes a count >= 0 and --warmup-answer-loss; "
                     f"got {args.answer_warmup_rounds} with --warmup-answer-loss {args.warmup_answer_loss}")
    for flag in ("dropout", "time_noise"):
        if not 0 <= getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be in [0, 1); got {getattr(args, flag)}")
    if args.coverage_penalty < 0:
        parser.error(f"--coverage-penalty must be >= 0; got {args.coverage_penalty}")
    if args.logit_scale is not None and args.logit_scale <= 0:
        parser.error(f"--logit-scale must be > 0; got {args.logit_scale}")
    if args.attention_supervision < 0:
        parser.error(f"--attention-supervision must be >= 0; got {args.attention_supervision}")
    if not 1 <= args.supervised_hops <= args.max_hops:
        parser.error(f"--supervised-hops must be in [1, --max-hops {args.max_hops}]; got {args.supervised_hops}")
    try:
        task_repeats(args.task_repeats)
        round_rates(args.learning_rate_from)
    except ValueError as error:
        parser.error(str(error))
    if args.starts < 1 or args.start_rounds < 1:
        parser.error(f"--starts and --start-rounds must be >= 1; got {args.starts} and {args.start_rounds}")
    if not args.first_tasks:  # no curriculum (e.g. `--first-tasks` alone): the recipe's curriculum settings go
        for flag in ("first_tasks_rounds", "first_tasks_learning_rate"):
            if getattr(args, flag) not in (None, parser.get_default(flag)):
                parser.error(f"--{flag.replace('_', '-')} needs --first-tasks: the tasks the curriculum's first "
                             "rounds train")
            setattr(args, flag, None)
    if args.first_tasks_rounds is None:
        args.first_tasks_rounds = 1 if args.first_tasks else 0
    if args.first_tasks_rounds < 1 and args.first_tasks:
        parser.error(f"--first-tasks-rounds must be >= 1; got {args.first_tasks_rounds}")
    if args.tasks and args.first_tasks == parser.get_default("first_tasks"):  # the recipe's, on fewer tasks
        args.first_tasks = [task for task in args.first_tasks if task in args.tasks]
    if args.tasks and args.task_repeats == parser.get_default("task_repeats"):
        args.task_repeats = [item for item in args.task_repeats if int(item.partition("=")[0]) in args.tasks]
    outside = sorted(set(args.first_tasks) - set(args.tasks or range(1, 21)))
    if outside:
        parser.error(f"--first-tasks names task(s) {outside}, which are not trained (--tasks {args.tasks})")
    unknown = sorted(set(args.rename_words) - set(INTERCHANGEABLE_WORDS))
    if unknown:
        parser.error(f"--rename-words knows the word classes of task(s) {sorted(INTERCHANGEABLE_WORDS)}; got {unknown}")
    if args.no_time and args.time_noise:  # the noise would fall on a time encoding that is not there
        parser.error("--time-noise needs the time encoding; it cannot go with --no-time")
    return args


def optional(kind):
    """An argparse type: `kind(text)`, or None for "none" (a recipe's value taken back, e.g.
    `--embedding-stddev none`)."""
    def parse(text):
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__  # argparse names the type in its errors
    return parse


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


def load(args):
    from keras_relmem.data import load_babi

    # task 3's en-10k training file is missing from the shared copy: its 1k files stand in
    return load_babi(args.tasks or "all", args.data, data_dir=args.data_dir, memory_size=args.memory_size,
                     seed=args.seed, task_data={3: "en"} if args.data == "en-10k" else None)


def build(args, data):
    import keras

    from keras_relmem.models import build_babi_model
    from keras_relmem.training import adam

    keras.utils.set_random_seed(args.seed)
    model = build_babi_model(
        "memo", len(data.vocab), len(data.answer_vocab), data.story_length, data.sentence_length,
        data.query_length, embedding_dim=args.embedding_dim, num_heads=args.num_heads,
        key_size=args.key_size, max_hops=args.max_hops,
        attention_dropout=args.dropout, answer_dropout=args.dropout, linear_start=args.linear_start_rounds > 0,
        bag_init=args.bag_init, share_hop_weights=not args.per_hop_weights,
        logit_scale=args.logit_scale, coverage_penalty=args.coverage_penalty,
        sum_fact_items=args.sum_fact_items, time_encoding=not args.no_time,
        attention_supervision=args.attention_supervision, supervised_hops=args.supervised_hops,
        **memo_options.halting_settings(args),
    )
    if args.embedding_stddev is not None:
        for salt, table in enumerate((model.embed, model.time_embed)):  # a seed per table: distinct rows
            if table is None:  # --no-time
                continue
            table.embeddings.assign(keras.initializers.RandomNormal(
                stddev=args.embedding_stddev, seed=args.seed + salt)(table.embeddings.shape))
    model.compile(adam(args.learning_rate, weight_decay=args.weight_decay, decay_scope=args.decay_scope,
                       clipnorm=args.clipnorm),
                  jit_compile=bool(args.jit_compile))
    return model


def repeats_for_round(args, tasks, index):
    """Each task's repeats in round `index`'s training pass: --task-repeats, and during the curriculum's
    first --first-tasks-rounds rounds 0 for every task not in --first-tasks."""
    repeats = task_repeats(args.task_repeats)
    if index < args.first_tasks_rounds:
        repeats = {**repeats, **{task: 0 for task in tasks if task not in args.first_tasks}}
    return repeats


def train_dataset(data, args, seed, buckets=True, index=None):
    """Training batches of round `index` (None: past any curriculum); without buckets, every batch is
    padded to the longest story (as `BabiData.dataset`), through the same index-shuffling pipeline so
    only the padding differs."""
    bounds = None if buckets else [data.story_length]
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
    from scipy import stats

    names = [t for t in tasks if t in facts]
    if len(names) < 3:
        return None  # undefined for one task, and trivially +-1 for two
    hops, counts = [tasks[t]["hops"] for t in names], [facts[t] for t in names]
    if len(set(hops)) == 1 or len(set(counts)) == 1:
        return None  # undefined when either side is constant (every task the same hops, e.g. before halting learns)
    return round(float(stats.spearmanr(hops, counts)[0]), 3)


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


def train(args, recorded=None):
    """Train (or go on training) the run `args` describe until its budget is spent; returns the results.

    Args:
        args: from `parse_args`.
        recorded: the arguments its results file records (default: `args` but --results).

    Returns:
        `(results, model, data)`: the results dict also written to `args.results`.
    """
    from keras_relmem.training import train_in_rounds, write_json

    common.limit_threads(args.threads)
    refuse_to_overwrite(pathlib.Path(args.results), pathlib.Path(args.workdir))
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
        check_linear_start(model, args.linear_start_rounds)
        apply_learning_rate(model, learning_rate_for_round(args, index))  # every round, so a resume too
        if index == args.first_tasks_rounds and index:
            print(f"round {index}: curriculum over, training on every task", flush=True)
        ds = train_dataset(data, args, seed=seed * 1000 + index, buckets=not args.no_buckets, index=index)
        start = time.perf_counter()
        # a round is an epoch of fit, so the controls (keras_relmem.callbacks) see the round's index
        history = model.fit(ds, steps_per_epoch=args.steps_per_round, initial_epoch=index, epochs=index + 1,
                            callbacks=training_controls(args), verbose=args.verbose, shuffle=False)
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
        seeded = argparse.Namespace(**{**vars(args), "seed": seed})
        return train_in_rounds(
            lambda: build(seeded, data), lambda model, index: train_round(model, index, seed), evaluate,
            workdir, args.budget_minutes, describe=describe, on_resume=resume, on_round=on_round,
            max_rounds=max_rounds,
        )

    facts = supporting_facts(data)
    workdir = pathlib.Path(args.workdir)
    starts = choose_start(args, workdir, rounds) if args.starts > 1 else None

    if recorded is None:
        recorded = {k: v for k, v in vars(args).items() if k != "results"}

    def record(curve, complete=False, extra=None):
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
        write_json(args.results, results)
        return results

    curve, model = rounds(starts["seed"] if starts else args.seed, workdir, on_round=record)
    return record(curve, complete=True, extra={"hop_errors": hop_errors(model, data, args)}), model, data


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


def refuse_to_overwrite(results, workdir):
    """A new run (nothing in `workdir` to continue) would write over `results`: refused when that file
    already holds a run, so a committed result is not lost to a rerun of its command after its workdir
    was removed, or to a new recipe left on the default --results."""
    from keras_relmem.training import saved_curve

    begun = saved_curve(workdir) or (workdir / "starts.json").exists() or (workdir / "start0").is_dir()
    if results.exists() and not begun:
        raise SystemExit(f"{results} already holds a run, and {workdir} has none to continue: a new run would "
                         "overwrite it; pass another --results, or remove the file to train again")


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
        raise SystemExit(f"--starts {args.starts} --start-rounds {args.start_rounds}: {error}") from None


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
        raise SystemExit(f"--attention-supervision/--supervised-hops for the saved model: {error}") from None
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


def check_linear_start(model, rounds):
    """--linear-start-rounds needs a MEMO built with linear start (a saved model's is fixed)."""
    if rounds and not model.memo.linear_start:
        raise SystemExit("--linear-start-rounds: the saved MEMO in this --workdir was built without linear "
                         "start; use a new --workdir.")


def reset_halting_network(model):
    """Give the halting network fresh initial weights (MEMO itself keeps its training)."""
    from keras_relmem.layers.halting import HaltingPolicy

    policy = model.memo.policy
    fresh = HaltingPolicy.from_config(policy.get_config())
    fresh.build()
    policy.set_weights(fresh.get_weights())


def data_bucket_bounds(data):
    from keras_relmem.data import babi

    return babi.bucket_bounds(data.story_lengths("train"))


def run(argv, recipe="memo_babi_joint", command="python tasks/train_babi.py"):
    """The task script's joint MEMO run: parse `argv` (defaults from `recipe`), train in rounds until the
    budget (resuming what WORKDIR holds), print the per-task table, write the results and export the model.

    The results file records the arguments and `command` followed by `argv`, the command that made it.
    """
    from keras_relmem import export

    args = parse_args(argv, recipe=recipe)
    recorded = {"command": " ".join([command, *argv]),
                **{k: v for k, v in vars(args).items() if k != "results"}}
    results, model, data = train(args, recorded=recorded)
    rows = {int(task): {"accuracy": 1 - row["error"] / 100, "error": row["error"] / 100}
            for task, row in results["tasks"].items()}
    print("\n" + babi.format_table(rows, "memo, joint"), flush=True)
    rho = results["hops_spearman"]
    print(f"Spearman of mean hops and supporting facts across tasks: {'-' if rho is None else f'{rho:.2f}'}")
    print(f"Results written to {args.results}")
    if not args.no_export:
        base = args.export_dir or str(pathlib.Path(args.workdir) / "export")
        export.announce(str(export.export_babi(model, data, base, name=export.babi_model_name("memo", data.tasks))))
    return results
