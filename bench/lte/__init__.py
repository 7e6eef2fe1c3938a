"""Learning to Execute: the RMC paper's Table 1 with our RMC, our EntNet cell and an LSTM (Santoro et al. 2018, §4.4).

One run is one task, one model, one seed, trained in rounds of fresh examples
(`--steps-per-round` batches, drawn from the round's own seed, so a resumed
run sees the data it would have seen) until `--budget-minutes` of training
time are spent (by default 240 for Program and 60 for the other five tasks), or
`--max-examples` are trained.
Every model follows one curriculum schedule: the level moves on every
`--advance-every` training examples (19,200: length 5 and nesting 2 from
96,000), so models are compared at the same level after the same examples.
After every round the run is tested on the fixed test set of the target
setting (per-character accuracy and solved answers) and saved under
`--workdir/<task>/<label>/seed<seed>`; a rerun continues. The model, its
optimizer and its data are `relmem-train-lte`'s (every flag this bench does
not know is passed to it, e.g. `--learning-rate 3e-3` or `--units 512`).

`bench/lte/results/lte.json` holds every run under `runs` and, computed from
them: `curriculum` ("shared" when every run followed one schedule); `tasks`:
`{task: {row: {"accuracy": median over seeds of the last test, "best_accuracy":
of the best (the paper's measure), "solved", "examples", "minutes", "seeds":
{seed: accuracy}}}}`; `comparisons`: each task's RMC and LSTM at equal
training examples (with the `level` both trained at) and at equal minutes,
and under `settings` the rows `rmc_<setting>` and `lstm_<setting>` compared
alike; `grids`: each variant row (`--label`) against its model's default.

Usage (one core per run, two side by side):
    python -m bench.lte --task copy --model rmc --threads 1 &
    python -m bench.lte --task copy --model lstm --threads 1 &
    python -m bench.lte --report
"""

import argparse
import os
import pathlib
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from bench.common import add_bench_arguments, dispatch, limit_threads, read_results, run_arguments, update_results  # noqa: E402
from keras_relmem.data import lte  # noqa: E402
from keras_relmem.training import saved_curve, train_in_rounds  # noqa: E402

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "lte.json"
# Santoro et al. 2018, Table 1: per-character test accuracy (%), literal length 5, nesting 2.
PAPER = {
    "lstm": {"add": 99.8, "control": 97.4, "program": 66.1, "copy": 99.8, "reverse": 99.7, "double": 99.7},
    "entnet": {"add": 98.4, "control": 98.0, "program": 73.4, "copy": 91.8, "reverse": 100.0, "double": 62.3},
    "rmc": {"add": 99.9, "control": 99.6, "program": 79.0, "copy": 100.0, "reverse": 100.0, "double": 99.8},
}
MODELS = ("rmc", "lstm", "entnet")
BUDGET_MINUTES = {"program": 240.0}  # the budgets: 4 hours for Program, 1 for the others
DEFAULT_BUDGET = 60.0
# One schedule for every model: the level moves on every 3 rounds of 100 batches of 64, so each model is
# compared with the others at the same level after the same examples (issue: "measured as the paper measures it").
ADVANCE_EVERY = 19200


def _bench_parser():
    from keras_relmem.commands import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--task", choices=lte.TASKS, default="program")
    parser.add_argument("--model", choices=MODELS, default="rmc")
    parser.add_argument("--label", default=None,
                        help="the run's row in the table (default: the model), e.g. lstm_u512 for one point of a "
                             "tuning grid; runs are keyed TASK/LABEL/seedSEED")
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="training minutes (default: 240 for program, 60 for the other tasks)")
    parser.add_argument("--max-examples", type=positive_int, default=None,
                        help="also stop once this many training examples are trained (the rounds that reach it), "
                             "e.g. a tuning grid's point run to the count its default is compared at")
    parser.add_argument("--steps-per-round", type=int, default=100)
    parser.add_argument("--test-examples", type=int, default=1000)
    return add_bench_arguments(parser, "runs/bench_lte", RESULTS, "print the tables from the JSON")


def _defaults(given):
    """The config the passed-through flags apply to: what `relmem-train-lte` trains (the model's recipe, `lte_rmc`,
    `lte_lstm` or `lte_entnet`) on the shared schedule (`--advance-every 0` is each model's own probe, as 1.0
    measured)."""
    import dataclasses

    from keras_relmem.commands.train import COMMANDS

    return dataclasses.replace(COMMANDS["relmem-train-lte"]["choose"](given), advance_every=ADVANCE_EVERY)


def parse_args(argv=None):
    """The bench's own flags, and every other flag a field of the library's `configs.LTEConfig` (parsed as
    `relmem-train-lte` parses it, from `_defaults`), in one namespace."""
    from keras_relmem.commands import parse
    from keras_relmem.configs import LTEConfig

    bench = _bench_parser()
    args, rest = bench.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        argparse.ArgumentParser(description=__doc__.splitlines()[0], parents=[bench]).print_help()
        print("\nAny other flag of relmem-train-lte (model, optimizer, curriculum) is passed to it:")
        parse(["--help"], [LTEConfig], _defaults, "runs/lte")
    ours = {a.dest for a in bench._actions}
    config, _, _ = parse(rest + ["--task", args.task, "--model", args.model], [LTEConfig], _defaults, "runs/lte")
    for key, value in config.to_dict().items():
        if key not in ours:
            setattr(args, key, value)
    if args.budget_minutes is None:
        args.budget_minutes = BUDGET_MINUTES.get(args.task, DEFAULT_BUDGET)
    return args


# Task-script flags that are about the task script's own run (checkpoints, export), not the model.
NOT_RECORDED = ("strategy", "workdir", "resume", "logdir", "export_dir", "no_export", "max_steps",
                "max_eval_steps", "verbose", "epochs", "steps_per_epoch", "jit_compile")


def run(args):
    limit_threads(args.threads)
    import keras

    from keras_relmem.tasks import lte as lte_task

    keras.utils.set_random_seed(args.seed)
    label = args.label or args.model
    name = f"{args.task}/{label}/seed{args.seed}"
    workdir = pathlib.Path(args.workdir) / name
    setting = (args.task, args.length, args.nesting)
    test = lte.test_set(*setting, args.test_examples, style=args.data)
    curve = saved_curve(workdir)
    every = args.advance_every or None
    level = lte.CurriculumLevel(args.length, args.nesting, args.curriculum, task=args.task, every=every,
                                level=curve[-1]["level"] if curve and "level" in curve[-1] else None)
    examples_per_round = args.steps_per_round * args.batch_size

    def train_round(model, index):
        if every:  # the shared schedule: the level is set by the examples trained, the same for every model
            level.at_examples(index * examples_per_round)
        trained_at = list(level.level)
        data = lte.examples(examples_per_round, *setting, seed=[args.seed, index], level=level, style=args.data)
        history = model.fit(data["program"], data["answer"], batch_size=args.batch_size, epochs=1,
                            shuffle=False, verbose=0)
        if every:
            return {"train_accuracy": round(100 * history.history["character_accuracy"][-1], 2),
                    "level": trained_at}
        at_level = lte_task.advance_if_mastered(model, level, args.task, args.advance_at, seed=[args.seed, index, 7],
                                                style=args.data)
        return {"train_accuracy": round(100 * history.history["character_accuracy"][-1], 2),
                "level": list(level.level),
                # the probe of the level the round trained at, which moves the curriculum on at --advance-at
                **({"level_accuracy": round(100 * at_level, 2)} if at_level is not None else {})}

    def evaluate(model):
        accuracy, solved = lte_task.accuracy_at(model, test)
        return {"accuracy": round(100 * accuracy, 2), "solved": round(100 * solved, 2)}

    def summary(curve):
        return {
            "task": args.task, "model": args.model, "label": label, "seed": args.seed,
            "accuracy": curve[-1]["accuracy"], "solved": curve[-1]["solved"],
            "best_accuracy": max(e["accuracy"] for e in curve),
            "minutes": curve[-1]["minutes"], "examples": len(curve) * examples_per_round,
            "curve": [{"examples": (i + 1) * examples_per_round,
                       **{k: e[k] for k in ("minutes", "train_accuracy", "level_accuracy", "accuracy", "solved",
                                            "level") if k in e}}
                      for i, e in enumerate(curve)],
        }

    arguments = run_arguments(args, *NOT_RECORDED)

    def record(result):
        def change(results):
            results.setdefault("runs", {})[name] = result
            results.setdefault("args", {})[f"runs/{name}"] = arguments
            summarize(results)

        update_results(args.results, change)

    max_rounds = -(-args.max_examples // examples_per_round) if args.max_examples else None

    def on_round(curve):  # an unfinished run shows its progress (the last round is recorded complete below)
        finished = curve[-1]["minutes"] >= args.budget_minutes or (max_rounds and len(curve) >= max_rounds)
        if not finished:
            record({"complete": False, **summary(curve)})

    curve, model = train_in_rounds(
        lambda: lte_task.build_model(args), train_round, evaluate, workdir, args.budget_minutes,
        describe=lambda e: (f"{name} round {e['round']:3d}  {e['minutes']:6.1f} min  level {e['level']}"
                            + (f" ({e['level_accuracy']:.0f}%)" if "level_accuracy" in e else "") + "  "
                            f"train {e['train_accuracy']:5.1f}%  test {e['accuracy']:5.1f}% chars, "
                            f"{e['solved']:5.1f}% solved"),
        on_round=on_round,
        max_rounds=max_rounds,
    )
    result = {"complete": True, "parameters": int(model.count_params()), **summary(curve)}
    record(result)
    print(f"{name}: {result['accuracy']:.1f}% of characters, {result['solved']:.1f}% solved after "
          f"{result['minutes']:.1f} training minutes ({result['examples']:,d} examples)")


def _at(run, key, limit, metric="accuracy"):
    """`run`'s `metric` at the end of the first round whose `key` (examples or minutes) reaches `limit`."""
    return next((row.get(metric) for row in run["curve"] if row[key] >= limit), None)


def _best_until(run, key, limit):
    """`run`'s best test accuracy (the paper's measure) over its rounds up to the first whose `key` reaches `limit`."""
    best = None
    for row in run["curve"]:
        best = row["accuracy"] if best is None else max(best, row["accuracy"])
        if row[key] >= limit:
            return best
    return None


def _label(run):
    """A run's row: its `--label`, or its model (runs recorded before labels existed have none)."""
    return run.get("label", run["model"])


def _median_or_none(values):
    """The median of `values`, or None when any is None (a seed that has not got there)."""
    return None if any(v is None for v in values) else statistics.median(values)


def summarize(results):
    """Fill `results["tasks"]` and `results["comparisons"]` from `results["runs"]` (in place).

    Runs are grouped by task and label (the model unless `--label` named a variant, such as one point of
    a tuning grid); the comparisons are between the rows labelled `rmc` and `lstm`, and under `settings`
    between `rmc_<setting>` and `lstm_<setting>` (both models at one setting, e.g. `lr3e-3`)."""
    tasks, comparisons = {}, {}
    for run in results.get("runs", {}).values():
        tasks.setdefault(run["task"], {}).setdefault(_label(run), []).append(run)
    for task, models in tasks.items():
        for model, runs in models.items():
            runs.sort(key=lambda r: r["seed"])
            # a seed still training does not move the row of the seeds that finished (it is listed apart)
            every, runs = runs, [r for r in runs if r.get("complete")] or runs
            models[model] = {
                "accuracy": statistics.median(r["accuracy"] for r in runs),
                # the paper's measure: each run's best test accuracy
                "best_accuracy": statistics.median(r.get("best_accuracy", r["accuracy"]) for r in runs),
                "solved": statistics.median(r["solved"] for r in runs),
                "examples": statistics.median(r["examples"] for r in runs),
                "minutes": round(statistics.median(r["minutes"] for r in runs), 1),
                "complete": all(r.get("complete") for r in runs),
                "seeds": {str(r["seed"]): r["accuracy"] for r in runs},
                "model": runs[0]["model"],
                # how soon a task is learnt: examples until the test accuracy first reaches 99% (None: not yet)
                "examples_to_99": _median_or_none([_at(r, "accuracy", 99.0, metric="examples") for r in runs]),
                "unfinished_seeds": {str(r["seed"]): r["accuracy"] for r in every if r not in runs},
            }
        if "rmc" in models and "lstm" in models:
            comparisons[task] = _compare(results["runs"], task, models, "rmc", "lstm")
        # a setting both models were run at (rows rmc_<setting> and lstm_<setting>, e.g. a learning rate)
        settings = {label[len("rmc_"):] for label in models if label.startswith("rmc_")
                    and f"lstm_{label[len('rmc_'):]}" in models}
        if settings:
            comparisons.setdefault(task, {})["settings"] = {
                setting: _compare(results["runs"], task, models, f"rmc_{setting}", f"lstm_{setting}")
                for setting in sorted(settings)}
    results["tasks"] = {task: tasks[task] for task in lte.TASKS if task in tasks}
    results["comparisons"] = {task: comparisons[task] for task in lte.TASKS if task in comparisons}
    # a tuning grid: each variant against its model's default at equal examples, as the models are compared
    grids = {task: _grid(results["runs"], task, rows) for task, rows in results["tasks"].items()}
    results["grids"] = {task: grid for task, grid in grids.items() if grid}
    # one schedule for every model (the level set by examples trained), or each model's own probe
    shared = {bool(args.get("advance_every")) for key, args in results.get("args", {}).items()}
    results["curriculum"] = "shared" if shared == {True} else "per-model" if shared == {False} else "mixed"


def _grid(every_run, task, rows):
    """Each variant row of `task` (a `--label` of a tuning grid) against its model's default row, at equal
    examples (the fewer either trained): `{label: {"examples": n, "level": [length, nesting], "accuracy":
    variant %, "default": default %, "best": {"accuracy": ..., "default": ...}}}`, the test there and under
    `best` the best test up to there (the paper's measure), medians over the seeds both rows counted."""
    grid = {}
    for label in sorted(rows, key=_row_order):
        model = rows[label]["model"]
        if label in MODELS or model not in rows:
            continue
        compared = _compare(every_run, task, rows, label, model)["equal_examples"]
        level = compared.get("level")
        grid[label] = {"examples": compared["examples"], **({"level": level} if isinstance(level, list) else {}),
                       "accuracy": compared["rmc"], "default": compared["lstm"],
                       "best": {"accuracy": compared["best"]["rmc"], "default": compared["best"]["lstm"]}}
    return grid


def _row_order(label):
    """The models' own rows first (RMC, LSTM, EntNet), then the variants by label."""
    return (MODELS.index(label) if label in MODELS else len(MODELS), label)


def _compare(every_run, task, rows, rmc, lstm):
    """Rows `rmc` and `lstm` of `task` at equal examples and at equal minutes: the fewest any of their counted
    seeds trained, and each row's median over those seeds at that point, keyed "rmc" and "lstm"."""
    runs = [r for r in every_run.values() if r["task"] == task and _label(r) in (rmc, lstm)
            and str(r["seed"]) in rows[_label(r)]["seeds"]]
    by_model = {model: [r for r in runs if _label(r) == label] for model, label in (("rmc", rmc), ("lstm", lstm))}
    compared = {}
    for key in ("examples", "minutes"):
        limit = min(r[key] for r in runs)
        compared[f"equal_{key}"] = {key: limit, **{
            model: statistics.median(_at(r, key, limit) for r in chosen) for model, chosen in by_model.items()},
            # the paper's measure: each run's best test accuracy up to that point
            "best": {model: statistics.median(_best_until(r, key, limit) for r in chosen)
                     for model, chosen in by_model.items()}}
        # the curriculum level each model trained at there: one level under a shared schedule
        levels = {model: sorted({tuple(_at(r, key, limit, metric="level") or ()) for r in chosen})
                  for model, chosen in by_model.items()}
        if key == "examples" and any(levels.values()) and () not in set().union(*levels.values()):
            same = levels["rmc"] == levels["lstm"] and len(levels["rmc"]) == 1
            compared["equal_examples"]["level"] = (list(levels["rmc"][0]) if same
                                                   else {m: [list(v) for v in lv] for m, lv in levels.items()})
    return compared


def markdown(results):
    """Per task and model: median test accuracy over seeds, each seed's, solved, examples and minutes, and
    the paper's; then the RMC against the LSTM at equal examples and at equal minutes, for the default rows
    and for each setting both were run at (`program (lr3e-3)`)."""
    # runs under one shared schedule show the paper's measure (the best test accuracy) beside the last
    shared = results.get("curriculum") == "shared"
    accuracy = "median: best (the paper's measure) / last" if shared else "median"
    lines = (["Curriculum: shared (levels set by training examples, the same for every model).", ""] if shared
             else []) + [f"| task | model | per-character accuracy %, {accuracy} | seeds | solved % | examples "
                         "| training minutes | paper % |", "|" + "---|" * 8]
    for task, rows in results.get("tasks", {}).items():
        for label in sorted(rows, key=_row_order):
            row = rows[label]
            state = "" if row["complete"] else " (unfinished)"
            seeds = ", ".join([f"{seed}: {value:.1f}" for seed, value in row["seeds"].items()]
                              + [f"{seed}: {value:.1f} (unfinished)"
                                 for seed, value in row.get("unfinished_seeds", {}).items()])
            paper = f"{PAPER[label][task]:.1f}" if label in MODELS else ""
            shown = f"{row['best_accuracy']:.1f} / {row['accuracy']:.1f}" if shared else f"{row['accuracy']:.1f}"
            lines.append(f"| {task} | {label.upper()}{state} | {shown} | {seeds} | {row['solved']:.1f} "
                         f"| {int(row['examples']):,d} | {row['minutes']:.1f} | {paper} |")
    if results.get("comparisons"):
        level_column = "level, " if shared else ""
        measure = " (best / last)" if shared else ""
        lines += ["", f"| task | equal examples: examples, {level_column}RMC %, LSTM %{measure} "
                  f"| equal minutes: minutes, RMC %, LSTM %{measure} |", "|---|---|---|"]
        for task, c in results["comparisons"].items():
            named = ([(task, c)] if "equal_examples" in c else []) + [
                (f"{task} ({setting})", compared) for setting, compared in c.get("settings", {}).items()]
            for name, compared in named:
                e, m = compared["equal_examples"], compared["equal_minutes"]
                level = e.get("level")
                level = "" if level is None or not shared else (
                    f"({level[0]}, {level[1]}), " if isinstance(level, list) else f"{level}, ")
                lines.append(f"| {name} | {int(e['examples']):,d}, {level}{_shown(e, 'rmc', shared)}, "
                             f"{_shown(e, 'lstm', shared)} | {m['minutes']:.1f}, {_shown(m, 'rmc', shared)}, "
                             f"{_shown(m, 'lstm', shared)} |")
    if results.get("grids"):
        measure = " (best / last)" if shared else ""
        lines += ["", "| task | variant | equal examples: examples, level, variant %, its model's default "
                  f"%{measure} |", "|---|---|---|"]
        for task, grid in results["grids"].items():
            for label, row in grid.items():
                level = f"({row['level'][0]}, {row['level'][1]}), " if "level" in row else ""
                # the comparisons' shape, so the grid shows best / last as they do
                shown = {"rmc": row["accuracy"], "lstm": row["default"],
                         "best": {"rmc": row["best"]["accuracy"], "lstm": row["best"]["default"]}}
                lines.append(f"| {task} | {label.upper()} | {int(row['examples']):,d}, {level}"
                             f"{_shown(shown, 'rmc', shared)}, {_shown(shown, 'lstm', shared)} |")
    return "\n".join(lines)


def _shown(compared, model, shared):
    """One model's figure in a comparison: best / last under the shared schedule (the paper's measure first)."""
    if shared and "best" in compared:
        return f"{compared['best'][model]:.1f} / {compared[model]:.1f}"
    return f"{compared[model]:.1f}"


def draw(results, results_path):
    """Each task's runs: per-character test accuracy against training examples, beside the results file."""
    from keras_relmem.viz import panel_curves

    return panel_curves(curves_by_task(results), "examples", "accuracy", "training examples", "test accuracy (%)",
                        "Learning to Execute: per-character test accuracy",
                        pathlib.Path(results_path).with_suffix(".png"), marks=target_reached(results))


def target_reached(results):
    """Under the shared schedule, `{task: (examples, "level (L, N) from here")}`: where the runs of a task begin
    training at the test's setting (one count for all of them, as the schedule is one); the memorization tasks'
    setting has nesting 1, whatever the run's `--nesting`, as their curriculum has."""
    if results.get("curriculum") != "shared":
        return {}
    marks = {}
    for name, run in results.get("runs", {}).items():
        args = results.get("args", {}).get(f"runs/{name}")
        if not args:  # a run recorded without its settings has no known target: no line, as before
            continue
        target = list(lte.CurriculumLevel(args["length"], args["nesting"], task=run["task"]).target)
        ends = [row["examples"] for row in run["curve"] if row.get("level") == target]
        if ends:  # a curve's count is at a round's end: the level began one round earlier
            first = ends[0] - run["curve"][0]["examples"]
            marks[run["task"]] = (min(first, marks.get(run["task"], (first,))[0]),
                                  f"level ({target[0]}, {target[1]}) from here")
    return marks


def curves_by_task(results):
    """`{task: {"<ROW> seed <seed>": curve}}` in the table's task order; a row is its label (a grid's variant
    has a curve of its own beside the model's default row)."""
    panels = {}
    for _, run in sorted(results.get("runs", {}).items()):
        label = f"{_label(run).upper()} seed {run['seed']}" + ("" if run.get("complete") else " (unfinished)")
        panels.setdefault(run["task"], {})[label] = run["curve"]
    return {task: panels[task] for task in lte.TASKS if task in panels}


def report(args):
    read_results(args.results)  # a clear exit when the bench has not run
    results = update_results(args.results, summarize)
    print(markdown(results))
    print(f"Wrote {draw(results, args.results)}")


def main(argv=None):
    dispatch(parse_args(argv), run, report=report)


if __name__ == "__main__":
    main()
