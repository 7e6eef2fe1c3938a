"""Nth Farthest: the RMC against an LSTM at equal training wall-clock (Santoro et al. 2018, §4.1).

The paper's task (8 vectors of 16 features; "what is the label of the n-th
farthest vector from vector m?") with fresh examples at every step, as in
Sonnet's `rmc_nth_farthest.py`, and a fixed test set. Each model trains in
rounds until `--budget-minutes` of training time are spent; after each round
test accuracy is recorded. Resumable: the model and its curve are saved after
every round under `--workdir/<model>`, and a rerun continues. The result goes
into `bench/nth_farthest/results/nth_farthest.json` as
`{"rmc": {"accuracy": %, "minutes": m, "curve": [...]}, "lstm": {...}, "args": ...}`.

Scaled down from the paper for a CPU: the paper's RMC
(Sonnet's example: 4 memories, 4 heads, 4 blocks, head size 2048, batch 1600,
Adam 1e-4, a 4 x 256 MLP) becomes 4 memories, 4 heads, head size 64, 1 block,
batch 64, Adam 1e-3, with the same 4 x 256 MLP; the LSTM has 512 units.

Usage (one core per model, both side by side):
    python -m bench.nth_farthest --model rmc --threads 1 &
    python -m bench.nth_farthest --model lstm --threads 1 &
    python -m bench.nth_farthest --report        # table + picture from the JSON

The runs behind the 4-, 6- and 8-object tables are named recipes (`keras_relmem.recipes`, configs of
`NthFarthestRoundsConfig`, which `relmem-train-nth-farthest --recipe NAME` trains too), e.g. the paper's 8
objects of 16 features with the curriculum:
    python -m bench.nth_farthest --recipe nth_farthest_8_curriculum_rmc --threads 1 &
    python -m bench.nth_farthest --recipe nth_farthest_8_curriculum_lstm --threads 1 &

Without a notion of distance a model still gets 2/N (the nearest to m is m
itself; every other answer is one of the other labels): the plateau both
models first sit on. `--questions 0` asks for the farthest alone, `--model
mlp` is an MLP that sees the whole sequence at once, and `--curriculum 80`
adds the questions one n at a time (the test set always asks every n).
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from bench import common  # noqa: E402
from keras_relmem.configs import NthFarthestRoundsConfig  # noqa: E402
from keras_relmem.tasks.nth_farthest import curriculum_start, next_questions  # noqa: E402, F401

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "nth_farthest.json"
# Santoro et al. 2018, Fig. 3 (8 objects of 16 features): final test accuracy.
PAPER = {"rmc": 91.0, "lstm": 30.0}


def parse_args(argv=None):
    """The flags of `configs.NthFarthestRoundsConfig` (as `relmem-train-nth-farthest --budget-minutes ...`
    parses them, over the config's own defaults), the run's, --name and --report."""
    return common.parse_config(argv, NthFarthestRoundsConfig, "runs/bench_nth_farthest", RESULTS,
                        __doc__.splitlines()[0])


def run(args):
    """Train the run `args` describe (`kr.train` of its `NthFarthestRoundsConfig`) in WORKDIR/<name>, its result
    recorded in the bench's table as it goes."""
    name = args.name or args.model
    arguments = common.run_arguments(args)
    common.train_config(args, pathlib.Path(args.workdir) / name, "nth_farthest",
                 lambda result: common.merge_result(args.results, name, result, arguments))


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
    for name in common.run_names(results):
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
    results = common.read_results(args.results)
    print(markdown(results))
    # A curriculum's training asks only the n reached so far while the test asks every n, so its test curve
    # stays flat until late; the training curve beside it shows whether the first question is being learnt.
    curricula = {name: ("train_accuracy", "(training, n asked)") for name in common.run_names(results)
                 if results.get("args", {}).get(name, {}).get("curriculum") is not None}
    title = "Nth Farthest: equal training time on one CPU core"
    title += "\n(solid: test accuracy, dashed: training accuracy)" if curricula else ""
    path = common.draw_model_curves(results, "test_accuracy", "accuracy (%)" if curricula else "test accuracy (%)",
                             title, args.results, dashed=curricula)
    print(f"Wrote {path}")


def main(argv=None):
    common.dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
