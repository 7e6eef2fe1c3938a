"""Nth Farthest: the RMC against an LSTM at equal training wall-clock (Santoro et al. 2018, §4.1).

The paper's task (8 vectors of 16 features; "what is the label of the n-th
farthest vector from vector m?") with fresh examples at every step, as in
Sonnet's `rmc_nth_farthest.py`, and a fixed test set. Each model trains in
rounds until `--budget-minutes` of training time are spent; after each round
test accuracy is recorded. Resumable: the model and its curve are saved after
every round under `--workdir/<model>`, and a rerun continues. The result goes
into `bench/results/nth_farthest.json` as
`{"rmc": {"accuracy": %, "minutes": m, "curve": [...]}, "lstm": {...}, "args": ...}`.

Scaled down from the paper for a CPU: the paper's RMC
(Sonnet's example: 4 memories, 4 heads, 4 blocks, head size 2048, batch 1600,
Adam 1e-4, a 4 x 256 MLP) becomes 4 memories, 4 heads, head size 64, 1 block,
batch 64, Adam 1e-3, with the same 4 x 256 MLP; the LSTM has 512 units.

Usage (one core per model, both side by side):
    python -m bench.nth_farthest --model rmc --threads 1 &
    python -m bench.nth_farthest --model lstm --threads 1 &
    python -m bench.nth_farthest --report        # table + picture from the JSON

The runs behind the 4-, 6- and 8-object tables are named recipes (`keras_relmem.recipes`, task
"nth_farthest_budget"), e.g. the paper's 8 objects of 16 features with the curriculum:
    python -m bench.nth_farthest --recipe nth_farthest_8_curriculum_rmc --threads 1 &
    python -m bench.nth_farthest --recipe nth_farthest_8_curriculum_lstm --threads 1 &

Without a notion of distance a model still gets 2/N (the nearest to m is m
itself; every other answer is one of the other labels): the plateau both
models first sit on. `--questions 0` asks for the farthest alone, `--model
mlp` is an MLP that sees the whole sequence at once, and `--curriculum 80`
adds the questions one n at a time (the test set always asks every n).
"""

import argparse
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from bench.budget import draw_model_curves, record_unfinished, run_names  # noqa: E402
from bench.cli import (  # noqa: E402
    add_bench_arguments,
    add_recipe_argument,
    dispatch,
    limit_threads,
    parse_with_recipe,
    run_arguments,
)
from bench.results import RESULTS_DIR, merge_result, read_results  # noqa: E402
from keras_relmem.training import saved_curve, train_in_rounds  # noqa: E402

RESULTS = RESULTS_DIR / "nth_farthest.json"
# Santoro et al. 2018, Fig. 3 (8 objects of 16 features): final test accuracy.
PAPER = {"rmc": 91.0, "lstm": 30.0}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_recipe_argument(parser, "nth_farthest_budget")
    parser.add_argument("--model", choices=["rmc", "lstm", "mlp"], default="rmc",
                        help="mlp: the MLP alone on the flattened sequence, a reference that sees every "
                             "object at once")
    parser.add_argument("--name", default=None,
                        help="the run's key in the results (default: the model), e.g. one LSTM of a tuning grid")
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    parser.add_argument("--steps-per-round", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--test-examples", type=int, default=3000)
    parser.add_argument("--num-objects", type=int, default=8)
    parser.add_argument("--num-features", type=int, default=16)
    parser.add_argument("--questions", type=int, nargs="+", default=None,
                        help="ask only these n (training and test), e.g. 0: the farthest only")
    parser.add_argument("--curriculum", type=float, default=None, metavar="ACCURACY",
                        help="train on the farthest (n = 0) first and add the next n after each round whose "
                             "training accuracy reaches ACCURACY %%; the test set asks every n throughout")
    parser.add_argument("--mem-slots", type=int, default=4)
    parser.add_argument("--head-size", type=int, default=64)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--num-blocks", type=int, default=1)
    parser.add_argument("--units", type=int, default=512, help="LSTM units")
    parser.add_argument("--mlp-layers", type=int, default=4)
    add_bench_arguments(parser, "runs/bench_nth_farthest", RESULTS, "print the table and draw the curves")
    return parse_with_recipe(parser, argv)


def next_questions(asked, train_accuracy, threshold, num_objects):
    """The curriculum's questions for the next round: `asked` (n = 0 .. k), with n = k + 1 added once a
    round on them reaches `threshold` % training accuracy."""
    if train_accuracy >= threshold and len(asked) < num_objects:
        return [*asked, len(asked)]
    return list(asked)


def curriculum_start(curve, threshold, num_objects):
    """The questions a curriculum run asks in its next round: the farthest alone for a new run, or what
    the last round of its saved `curve` leads to for a resumed one."""
    if curve:
        return next_questions(curve[-1]["asked"], curve[-1]["train_accuracy"], threshold, num_objects)
    return [0]


def run(args):
    limit_threads(args.threads)
    import keras

    from keras_relmem.data import synthetic
    from keras_relmem.tasks.nth_farthest import build_model

    keras.utils.set_random_seed(args.seed)
    task = {"num_objects": args.num_objects, "num_features": args.num_features, "questions": args.questions}
    test = synthetic.nth_farthest(args.test_examples, seed=10_000 + args.seed, **task)

    def build():
        model = build_model(args, test["inputs"].shape[1:])
        model.compile(
            keras.optimizers.Adam(args.learning_rate),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    name = args.name or args.model
    workdir = pathlib.Path(args.workdir) / name
    if args.curriculum is not None and args.questions is not None:
        raise ValueError("--curriculum chooses the questions asked in training; drop --questions")
    asked = None
    if args.curriculum is not None:
        asked = curriculum_start(saved_curve(workdir), args.curriculum, args.num_objects)

    def train_round(model, index):
        nonlocal asked
        # Fresh examples every round (a different seed per round, so a resumed
        # run sees the data it would have seen).
        data = synthetic.nth_farthest(
            args.steps_per_round * args.batch_size, seed=args.seed * 100_003 + index + 1,
            **{**task, "questions": args.questions if asked is None else asked},
        )
        history = model.fit(
            data["inputs"], data["target"], batch_size=args.batch_size, epochs=1, verbose=0
        )
        metrics = {"train_accuracy": round(100 * history.history["accuracy"][-1], 2)}
        if asked is not None:
            metrics["asked"] = asked
            asked = next_questions(asked, metrics["train_accuracy"], args.curriculum, args.num_objects)
        return metrics

    def evaluate(model):
        _, accuracy = model.evaluate(test["inputs"], test["target"], batch_size=500, verbose=0)
        return {"test_accuracy": round(100 * accuracy, 2)}

    arguments = run_arguments(args)

    def summary(curve):
        return {
            "accuracy": curve[-1]["test_accuracy"],
            "best_accuracy": max(e["test_accuracy"] for e in curve),
            "minutes": curve[-1]["minutes"],
            "examples": len(curve) * args.steps_per_round * args.batch_size,
            "curve": [{k: e[k] for k in ("minutes", "train_accuracy", "test_accuracy", "asked") if k in e}
                      for e in curve],
        }

    curve, model = train_in_rounds(
        build, train_round, evaluate, workdir, args.budget_minutes,
        describe=lambda e: (
            f"{name} round {e['round']:3d}  {e['minutes']:6.1f} min  "
            f"train {e['train_accuracy']:5.1f}%  test {e['test_accuracy']:5.1f}%"
            + (f"  asked n = {', '.join(map(str, e['asked']))}" if "asked" in e else "")
        ),
        on_round=record_unfinished(args.results, name, summary, arguments, args.budget_minutes),
    )
    result = {"complete": True, "parameters": int(model.count_params()), **summary(curve)}
    merge_result(args.results, name, result, arguments)
    print(f"{name}: test accuracy {result['accuracy']:.1f}% after {result['minutes']:.1f} training minutes")


def without_distances(num_objects, questions=None):
    """Accuracy (%) with no notion of distance: 2 / num_objects when every n is asked.

    The nearest vector to m (n = num_objects - 1) is m itself, whose label is
    in the input; every other answer is one of the other labels. Answering m
    for the nearest and guessing among the others for the rest gives
    1/N + (N-1)/N * 1/(N-1): the plateau a model sits on before it has
    learnt a distance. With only some n asked (`questions`), the same
    strategy's accuracy over those.
    """
    questions = list(range(num_objects)) if questions is None else list(questions)
    nearest = questions.count(num_objects - 1) / len(questions)
    return 100.0 * (nearest + (1 - nearest) / (num_objects - 1))


# How far above the guess a test accuracy must go to count as learnt rather than noise: the test sets'
# accuracy wanders about two points around the guess while a model has no distance.
ABOVE_THE_GUESS = 5.0


def examples_after(run, rounds):
    """How many examples run `run` had trained after its first `rounds` rounds: every round trains as many."""
    return run["examples"] * rounds // len(run["curve"])


def left_the_guess(run, guess):
    """(training minutes, examples) at the first round whose test accuracy is `ABOVE_THE_GUESS` points above
    `guess` (`without_distances`): when a model began to use a distance. None if it has not.
    """
    for index, row in enumerate(run["curve"]):
        if row["test_accuracy"] > guess + ABOVE_THE_GUESS:
            return row["minutes"], examples_after(run, index + 1)
    return None


def accuracy_after(run, examples):
    """Run `run`'s test accuracy at the end of the round that brought it to `examples` training examples,
    or None if it has not trained so many."""
    return next((row["test_accuracy"] for index, row in enumerate(run["curve"])
                 if examples_after(run, index + 1) >= examples), None)


def markdown(results):
    """Test accuracy of each model after its budget, next to the paper's."""
    lines = ["| model | seed | objects | test accuracy % | best % | without distances % | training minutes "
             f"| examples | first {ABOVE_THE_GUESS:g} points above the guess: minutes, examples | parameters "
             "| paper % |",
             "|" + "---|" * 11]
    for name in run_names(results):
        r, run_args = results[name], results.get("args", {}).get(name, {})
        state = "" if r.get("complete") else " (unfinished)"
        model = run_args.get("model", name)
        objects, features = run_args.get("num_objects", 8), run_args.get("num_features", 16)
        questions = run_args.get("questions")
        # the paper's figures are for its task: 8 objects of 16 features, every n asked
        paper = f"{PAPER[model]:.0f}" if model in PAPER and (objects, features, questions) == (8, 16, None) else ""
        asked = "" if questions is None else f", n = {', '.join(map(str, questions))}"
        if run_args.get("curriculum") is not None:
            asked += f", curriculum over n at {run_args['curriculum']:g}%"
        guess = without_distances(objects, questions)
        left = left_the_guess(r, guess)
        left = f"{left[0]:.1f}, {left[1]:,d}" if left else "not yet" if state else "no"
        lines.append(f"| {name.upper()}{state} | {run_args.get('seed', 0)} | {objects} x {features}{asked} "
                     f"| {r['accuracy']:.1f} | {r['best_accuracy']:.1f} | {guess:.1f} "
                     f"| {r['minutes']:.1f} | {r['examples']:,d} | {left} | {r.get('parameters', '')} | {paper} |")
    return "\n".join(lines)


def report(args):
    results = read_results(args.results)
    print(markdown(results))
    # A curriculum's training asks only the n reached so far while the test asks every n, so its test curve
    # stays flat until late; the training curve beside it shows whether the first question is being learnt.
    curricula = {name: ("train_accuracy", "(training, n asked)") for name in run_names(results)
                 if results.get("args", {}).get(name, {}).get("curriculum") is not None}
    title = "Nth Farthest: equal training time on one CPU core"
    title += "\n(solid: test accuracy, dashed: training accuracy)" if curricula else ""
    path = draw_model_curves(results, "test_accuracy", "accuracy (%)" if curricula else "test accuracy (%)",
                             title, args.results, dashed=curricula)
    print(f"Wrote {path}")


def main(argv=None):
    dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
