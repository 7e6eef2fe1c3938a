"""EntNet on the 20 bAbI tasks (en-10k), one model per task under a time budget, resumable.

Henaff et al. 2017 (Table 2, 10k) train one EntNet per task for 200 epochs
(Adam 0.01 halved every 25 epochs, batch 32, clip 40, 20 blocks, d = 100) and
report the best of 10 runs; every task ends under 5% error, mean 0.5%. This
bench trains `build_babi_model("entnet")` per task for `--budget-minutes` of
training time (and at most `--epochs`), for each of `--seeds`, and keeps the
seed with the lowest validation error (as the paper picks the best run). Task
3 trains on en (its en-10k training file is missing from our copy).

Each finished (task, seed) is written to `bench/entnet_babi/results/babi_entnet.json` at
once, so a rerun skips it and the table fills over several sittings:
`{"tasks": {"2": {"error": %, "validation_error": %, "epochs": n, "minutes": m,
"seed": s, "runs": {...}}}, "args": ...}`.

Training uses the fast path of `relmem-train-babi`: batches of stories of
similar length (`BabiData.bucketed_dataset`) and, with `--jit-compile`
(default on), XLA with one compilation per bucket bound (see
`bench.entnet_babi.speed`). `--schedule step` is the paper's (halve every 25
epochs); `--schedule plateau` halves the rate when the validation loss has not
improved for `--patience` epochs (`keras.callbacks.ReduceLROnPlateau`);
`--schedule cyclic` is the EntNet TF port's triangular cyclical rate, from
`--min-learning-rate` (2e-4) up to `--learning-rate` (1e-2) and back every
2 x `--half-cycle-epochs` (10) epochs. `--clip authors` and
`--story-mask-init normal` follow the authors' Lua code where Keras'
defaults differ (see `optimizer` and the flags' help). `--weight-decay`
(default 0, as the paper) adds AdamW's decoupled weight decay (Loshchilov &
Hutter 2019), which task 19 needs to generalise within minutes;
`--decay-scope matrices` spares the positional masks, PReLU slopes and biases
(`keras_relmem.training.adam`). `--embedding-stddev` draws the embeddings,
and so the tied keys, from N(0, stddev) (the paper's 0.1).
The library's default EntNet recipe (`entnet_babi`) is
`--schedule cyclic --tied-keys --weight-decay 0.02 --decay-scope matrices
--embedding-stddev 0.3`.

Usage:
    KERAS_RELMEM_DATA=../shared/data python -m bench.entnet_babi --budget-minutes 10
    python -m bench.entnet_babi --schedule cyclic --tied-keys --weight-decay 0.02 --decay-scope matrices \
        --embedding-stddev 0.3 --seeds 0 1 2 3 4 --threads 1 --results bench/entnet_babi/results/babi_entnet_seeds.json
    python -m bench.entnet_babi --report
    python -m bench.entnet_babi --merge other_sitting.json   # its seeds join the table's best-of-seeds
"""

import argparse
import dataclasses
import functools
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from bench.common import add_bench_arguments, dispatch, limit_threads, merge_result, read_results, run_arguments  # noqa: E402
from keras_relmem import training  # noqa: E402

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "babi_entnet.json"
# Henaff et al. 2017, Table 2 (10k), and the authors' repository (EntNet-babi/README.md): test error %.
PAPER = {1: 0.0, 2: 0.1, 3: 4.1, 4: 0.0, 5: 0.3, 6: 0.2, 7: 0.0, 8: 0.5, 9: 0.1, 10: 0.6, 11: 0.3, 12: 0.0,
         13: 1.3, 14: 0.0, 15: 0.0, 16: 0.2, 17: 0.5, 18: 0.3, 19: 2.3, 20: 0.0}
REPO = {1: 0.0, 2: 0.4, 3: 4.5, 4: 0.0, 5: 0.3, 6: 0.0, 7: 0.0, 8: 0.3, 9: 0.0, 10: 0.1, 11: 0.1, 12: 0.0,
        13: 2.1, 14: 0.0, 15: 0.0, 16: 0.2, 17: 0.6, 18: 1.2, 19: 0.4, 20: 0.0}
# The TensorFlow port (jimfleming/recurrent-entity-networks, README): None where it reports "?".
TF_PORT = {1: 0.0, 2: 3.0, 3: None, 4: 0.0, 5: None, 6: 0.1, 7: None, 8: None, 9: 0.7, 10: 0.1, 11: 0.0, 12: 0.0,
           13: 0.0, 14: 4.5, 15: 0.0, 16: 0.0, 17: 1.7, 18: 1.5, 19: 0.0, 20: 0.2}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-minutes", type=float, default=10.0, help="training minutes per task and seed")
    parser.add_argument("--tasks", type=int, nargs="+", default=list(range(1, 21)))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--schedule", choices=("step", "plateau", "cyclic"), default="step")
    parser.add_argument("--patience", type=int, default=3, help="epochs without improvement before halving (plateau)")
    parser.add_argument("--learning-rate", type=float, default=0.01, help="starting rate (cyclic: the peak)")
    parser.add_argument("--min-learning-rate", type=float, default=2e-4, help="cyclic: the rate between peaks")
    parser.add_argument("--half-cycle-epochs", type=float, default=10, help="cyclic: epochs from trough to peak")
    parser.add_argument("--tied-keys", action="store_true", help="one block per entity word, keys = its embedding")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="decoupled weight decay (AdamW; Loshchilov & Hutter 2019); the paper uses none")
    parser.add_argument("--decay-scope", choices=("all", "matrices"), default="all",
                        help="which weights --weight-decay shrinks: all, or the embedding and kernels only "
                             "(not the positional masks and PReLU slopes, which start at one, nor biases)")
    parser.add_argument("--clip", choices=("keras", "authors"), default="keras",
                        help="keras: Adam(clipnorm=40), each variable's gradient of the batch-mean loss; authors: "
                             "entnet.lua's global norm 40 of the batch-summed loss's gradient, Torch's Adam epsilon")
    parser.add_argument("--story-mask-init", choices=("ones", "normal"), default="ones",
                        help="story encoder's positional mask at ones (bag of words) or N(0, 0.1) as entnet.lua "
                             "leaves it (it fills only the query encoder's mask with ones)")
    parser.add_argument("--gradient-noise", type=float, default=0.0,
                        help="annealed Gaussian gradient noise, variance eta / (1 + step) ** 0.55 "
                             "(Neelakantan et al. 2015); 0: none")
    parser.add_argument("--embedding-stddev", type=float, default=0.1,
                        help="the word embeddings' (and tied keys') initial N(0, stddev), 0.1 as the paper")
    parser.add_argument("--gate-bias", type=float, default=0.0,
                        help="initial bias of every memory block's write gate (0: the paper's gate, no bias)")
    parser.add_argument("--no-jit-compile", dest="jit_compile", action="store_false")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="cap the training batches of each epoch (the task script's --max-steps; smoke tests)")
    parser.add_argument("--data-dir", default=None)
    add_bench_arguments(parser, "runs/bench_babi_entnet", RESULTS, seed=False)
    parser.add_argument("--merge", nargs="+", metavar="RESULTS_JSON", default=None,
                        help="add the runs of other sittings' results files (other seeds, same recipe) to "
                             "--results; each task keeps its best run by validation error")
    args = parser.parse_args(argv)
    if args.weight_decay < 0:  # Keras' Adam takes it and would grow every weight
        parser.error(f"--weight-decay must be >= 0; got {args.weight_decay}")
    return args


def optimizer_options(clip, gradient_noise=0.0, seed=None, batch_size=32, clipnorm=40.0):
    """The arguments of `keras_relmem.training.adam` that `--clip` and `--gradient-noise` give.

    "authors": entnet.lua sums the loss over the batch (ClassNLLCriterion,
    sizeAverage = false), rescales the whole gradient when its norm exceeds
    40 and runs Torch's Adam (epsilon 1e-8). Adam's update is unchanged when
    loss, gradient and epsilon are scaled alike, so the same updates come
    from Keras' batch-mean loss with the clip and epsilon divided by the
    batch size. "keras": each variable's gradient clipped to norm 40.
    """
    options = ({"clipnorm": None, "global_clipnorm": clipnorm / batch_size, "epsilon": 1e-8 / batch_size}
               if clip == "authors" else {"clipnorm": clipnorm})
    if gradient_noise:
        options.update(gradient_noise=gradient_noise, noise_seed=seed)
    return options


def optimizer(learning_rate, clip, batch_size=32, clipnorm=40.0, weight_decay=0.0, decay_scope="all",
              gradient_noise=0.0, seed=None):
    """Adam as `--clip` asks (`optimizer_options`), with decoupled `weight_decay` on the weights
    `decay_scope` names (`keras_relmem.training.adam`) when it is not 0."""
    return training.adam(learning_rate, weight_decay=weight_decay, decay_scope=decay_scope,
                         **optimizer_options(clip, gradient_noise, seed, batch_size, clipnorm))


def adjust_model(args, seed):
    """What this bench's experiments change in the task script's EntNet before it is compiled: the story
    mask drawn from N(0, 0.1) as entnet.lua leaves it (`--story-mask-init normal`) and a write-gate bias."""
    def adjust(model):
        if args.story_mask_init == "normal":
            mask = model.get_layer("story_encoder").positional_mask
            mask.assign(keras.initializers.RandomNormal(stddev=0.1, seed=seed)(mask.shape))
        if args.gate_bias:
            gate_bias = model.get_layer("memory").cell.gate_bias
            gate_bias.assign(keras.ops.full(gate_bias.shape, args.gate_bias))

    return adjust


def task_config(task, seed, args):
    """The `configs.BabiConfig` of one (task, seed) of this bench: every recipe field of the bench's flags
    (so the run does not depend on the default recipe), the budget, and the best validation epoch tested, as
    the paper picks its best run by validation. Task 3 trains on en (its en-10k training file is missing from
    our copy)."""
    from keras_relmem import recipes

    return dataclasses.replace(
        recipes.get("entnet_babi"), task=task, data="en" if task == 3 else "en-10k", seed=seed, epochs=args.epochs,
        schedule=args.schedule, learning_rate=args.learning_rate, min_learning_rate=args.min_learning_rate,
        half_cycle_epochs=args.half_cycle_epochs, patience=args.patience, weight_decay=args.weight_decay,
        decay_scope=args.decay_scope, embedding_stddev=args.embedding_stddev, tied_keys=args.tied_keys,
        batch_size=32, clipnorm=40.0, halve_every=25, budget_minutes=args.budget_minutes, restore_best=True)


def train_task(task, seed, args):
    """One (task, seed): the library's training of one bAbI model (`keras_relmem.tasks.babi.train_one`) with
    this bench's experiments, and what the table keeps of it."""
    import numpy as np

    from keras_relmem import distribute
    from keras_relmem.commands import command_line
    from keras_relmem.runs import RunOptions
    from keras_relmem.tasks import babi

    folder = pathlib.Path(args.workdir) / f"task{task}_seed{seed}"
    config = task_config(task, seed, args)
    babi.check_files(config)
    run = RunOptions(workdir=str(folder), export=False, verbose=0, jit_compile=args.jit_compile,
                     max_steps=args.max_steps)
    keras.utils.set_random_seed(seed)
    # one row per epoch (loss and accuracy, training and validation), so a long run can be watched with `tail -f`
    progress = keras.callbacks.CSVLogger(str(pathlib.Path(args.workdir) / f"task{task}_seed{seed}.csv"))
    pathlib.Path(args.workdir).mkdir(parents=True, exist_ok=True)
    model, data, accuracy, seconds, _, record = babi.train_one(
        config, run, [task], folder, distribute.get_strategy("auto"), callbacks=[progress],
        adjust_model=adjust_model(args, seed),
        optimizer_options=optimizer_options(args.clip, args.gradient_noise, seed))
    epochs = record["epochs"]
    best = int(np.argmin([e["val_loss"] for e in epochs]))
    return {"error": round(100 * (1 - accuracy[task][0]), 2),
            "validation_error": round(100 * (1 - epochs[best]["val_accuracy"]), 2),
            "epochs": len(epochs), "minutes": round(seconds / 60, 2), "seed": seed, "data": config.data,
            "final_learning_rate": epochs[-1]["learning_rate"],
            "loss_curve": [round(e["loss"], 4) for e in epochs],
            "val_loss_curve": [round(e["val_loss"], 4) for e in epochs],
            "best_epoch": best + 1,
            # the run's controls that change what it trains go with the config's flags
            "command": " ".join([command_line(config), "--jit-compile" if args.jit_compile else "--no-jit-compile",
                                 *(["--max-steps", str(args.max_steps)] if args.max_steps else [])])}


def _best_of(runs):
    """A task's entry: all its `runs` ({seed: run}), showing the best by validation error (as the
    paper: the best of its runs), and what one seed gives (`seed_summary`: median, worst,
    solved_seeds, seeds)."""
    return {**min(runs.values(), key=lambda r: r["validation_error"]), **seed_summary(runs), "runs": runs}


def _with_run(seed, result, entry):
    """A task's `entry` with one more seed's run. `entry` is read under the results file's lock, so
    seeds trained side by side into one file all stay."""
    return _best_of({**(entry or {}).get("runs", {}), seed: result})


def run(args):
    limit_threads(args.threads)
    path = pathlib.Path(args.results)
    arguments = run_arguments(args)
    for task in args.tasks:
        for seed in args.seeds:
            done = json.loads(path.read_text()).get("tasks", {}) if path.exists() else {}
            if str(seed) in done.get(str(task), {}).get("runs", {}):
                print(f"task {task:2d} seed {seed}: done, skipped", flush=True)
                continue
            result = train_task(task, seed, args)
            merge_result(path, ("tasks", str(task)), functools.partial(_with_run, str(seed), result), arguments)
            print(f"task {task:2d} seed {seed}: {result['epochs']} epochs, {result['minutes']:.1f} min, "
                  f"validation error {result['validation_error']:.1f}%, test error {result['error']:.1f}%",
                  flush=True)
    report(args)


# Arguments that make a run another recipe: its seeds cannot join this table's best-of-seeds.
RECIPE = ("budget_minutes", "epochs", "schedule", "patience", "learning_rate", "min_learning_rate",
          "half_cycle_epochs", "tied_keys", "clip", "story_mask_init", "weight_decay", "decay_scope",
          "embedding_stddev", "gradient_noise", "gate_bias")
# Recipe arguments added later: results written before them ran with these values.
RECIPE_DEFAULTS = {"min_learning_rate": 2e-4, "half_cycle_epochs": 10, "clip": "keras", "story_mask_init": "ones",
                   "weight_decay": 0.0, "decay_scope": "all",
                   "embedding_stddev": 0.1, "gradient_noise": 0.0, "gate_bias": 0.0}


def _recipe(arguments, key):
    return arguments.get(key, RECIPE_DEFAULTS.get(key))


def merge(args):
    """Add the (task, seed) runs of the files in `args.merge` to `args.results`.

    A seed already in the table is kept (a clash is reported, not overwritten),
    and a file trained with another recipe (`RECIPE`) is refused, so the table
    stays the best of several seeds of one recipe, as the paper's best of 10.
    """
    path = pathlib.Path(args.results)
    for other in args.merge:
        source = read_results(other)
        for task, entry in sorted(source.get("tasks", {}).items(), key=lambda kv: int(kv[0])):
            theirs = source.get("args", {}).get(f"tasks/{task}", {})
            current = read_results(path) if path.exists() else {}  # a new table may start from merged files
            ours = current.get("args", {}).get(f"tasks/{task}", {})
            differ = [k for k in RECIPE if ours and _recipe(theirs, k) != _recipe(ours, k)]
            if differ:
                sys.exit(f"--merge {other}: task {task} was trained with another recipe "
                         f"({', '.join(f'{k}={_recipe(theirs, k)!r}, here {_recipe(ours, k)!r}' for k in differ)}); "
                         "keep it in its own results file.")
            runs = dict(current.get("tasks", {}).get(task, {}).get("runs", {}))
            added = set()
            for seed, run in entry.get("runs", {}).items():
                if seed in runs:
                    print(f"task {int(task):2d} seed {seed}: already in {path}, kept; {other}'s run skipped")
                    continue
                runs[seed] = run
                added.add(seed)
                print(f"task {int(task):2d} seed {seed}: added from {other} "
                      f"(validation error {run['validation_error']:.1f}%, test error {run['error']:.1f}%)")
            row = _best_of(runs)
            recipe = theirs if str(row["seed"]) in added else ours  # the arguments of the row shown
            merged_from = sorted(set(ours.get("merged_from", [])) | {str(other)})
            merge_result(path, ("tasks", task), row, {**recipe, "merged_from": merged_from})
    report(args)


def _figure(value):
    return "?" if value is None else f"{value:.1f}"


def seed_summary(runs):
    """`{"median", "worst", "solved_seeds", "seeds"}` of a task's runs ({seed: run}): what one seed gives."""
    errors = {seed: run["error"] for seed, run in sorted(runs.items(), key=lambda kv: int(kv[0]))}
    ordered = sorted(errors.values())
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return {"median": round(median, 2), "worst": ordered[-1], "solved_seeds": sum(e < 5 for e in ordered),
            "seeds": errors}


def markdown(results):
    """The per-task table (best seed by validation, as the paper; and every seed) with the summary line."""
    tasks = results.get("tasks", {})
    lines = ["| task | error % | seed | epochs | minutes | every seed: error % (epochs) | median % | worst % "
             "| seeds < 5% | paper % | authors' repo % | TF port % |", "|" + "---|" * 12]
    medians = []
    for task in sorted(tasks, key=int):
        row = tasks[task]
        runs = row.get("runs") or {str(row["seed"]): row}
        seeds = seed_summary(runs)
        medians.append(seeds["median"])
        # epochs beside each seed: a wall-clock budget buys a machine-dependent number of them
        every = ", ".join(f"{seed}: {error:.1f} ({runs[seed]['epochs']})" for seed, error in seeds["seeds"].items())
        solved = f"{seeds['solved_seeds']} of {len(seeds['seeds'])}"
        lines.append(f"| {task} | {row['error']:.2f} | {row['seed']} | {row['epochs']} | {row['minutes']:.1f} "
                     f"| {every} | {seeds['median']:.1f} | {seeds['worst']:.1f} | {solved} "
                     f"| {PAPER[int(task)]:.1f} | {REPO[int(task)]:.1f} | {_figure(TF_PORT[int(task)])} |")
    errors = [row["error"] for row in tasks.values()]
    if errors:
        lines.append("")
        lines.append(f"{len(errors)} tasks, best seed by validation: mean error {sum(errors) / len(errors):.2f}%, "
                     f"{sum(e < 5 for e in errors)} solved (< 5%). Median of the seeds: "
                     f"{sum(m < 5 for m in medians)} solved, mean {sum(medians) / len(medians):.2f}%.")
    return "\n".join(lines)


def report(args):
    print(markdown(read_results(args.results)))


def main(argv=None):
    dispatch(parse_args(argv), run, report=report, merge=merge)


if __name__ == "__main__":
    main()
