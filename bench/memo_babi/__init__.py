"""MEMO on bAbI in the paper's joint set-up, measured: the joint trainer of the library
(`keras_relmem.tasks.babi_joint`, what `relmem-train-babi --model memo --task all --joint` runs), its
results next to the paper's Table 3, the hops picture, and the input pipeline's speed.

Banino et al. 2020 (Table 3) train one MEMO on the 20 tasks together and report
0.21% mean test error with 20/20 tasks solved (error < 5%). This bench runs
the same training as the command (`kr.train` of a `configs.BabiJointConfig`:
the flags, the recipes, the rounds and their evaluation are the library's), records its config in
`bench/memo_babi/results/memo_babi*.json` and draws the tables of docs/results.md; a
rerun with a larger `--budget-minutes` continues where the last round ended.
Unlike the command it starts from the config class's own defaults unless
`--recipe` names one, so every committed results file's command reads back.

Usage:
    KERAS_RELMEM_DATA=../shared/data python -m bench.memo_babi --recipe memo_babi_joint --threads 1
    KERAS_RELMEM_DATA=../shared/data python -m bench.memo_babi --speed   # examples/s, padded vs bucketed
    python -m bench.memo_babi --report        # table next to the paper, hops picture
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.common import cell, dispatch, limit_threads, parse_config, read_results, seconds_for_steps  # noqa: E402
from keras_relmem.tasks import babi_joint  # noqa: E402
from keras_relmem.tasks.babi_joint import hops_spearman, solved_hops_spearman  # noqa: E402

# --tasks chooses the tasks one model trains on, so the results page's commands keep it
IN_COMMAND = {"tasks"}
RESULTS_DIR = pathlib.Path(__file__).parent / "results"
RESULTS = RESULTS_DIR / "memo_babi.json"
SPEED_RESULTS = RESULTS_DIR / "memo_babi_speed.json"
# Banino et al. 2020, Table 3 (joint bAbI 10k): mean test error (%) and tasks solved.
PAPER = {"MEMO": (0.21, 20), "Universal Transformer": (0.29, 20), "DNC": (3.8, 18), "EMN": (4.2, 17)}
# Drawn in another colour in the hops picture of a results file without supporting-fact counts.
MULTI_FACT = (2, 3, 16, 19)


def parse_args(argv=None):
    """The joint trainer's flags (a `configs.BabiJointConfig`'s fields and the run's) with the bench's defaults
    (the config's own values unless --recipe names one, bench/memo_babi/results/memo_babi.json, no export) and its own
    modes: --report and --speed. Returns the flags, with `config` and `options` (`kr.train`'s) among them."""
    from keras_relmem.configs import BabiJointConfig

    args = parse_config(argv, BabiJointConfig, "runs/bench_memo_babi", RESULTS, __doc__.splitlines()[0],
                        modes=(("speed", "measure examples/s of the training step and exit"),),
                        more=lambda parser: parser.add_argument("--speed-steps", type=int, default=60))
    # as results files recorded them: the implied values filled in (babi_joint.resolve), no tasks as None
    for name, value in babi_joint.resolve(args.config).to_dict().items():
        setattr(args, name, value)
    args.jit_compile, args.tasks = bool(args.jit_compile), args.tasks or None
    args.options = {"workdir": args.workdir, "results": args.results, "export": False, "threads": args.threads,
                    "jit_compile": args.jit_compile, "verbose": args.verbose,
                    "command": " ".join(["python -m bench.memo_babi", *(argv or [])])}
    return args


def run(args):
    from keras_relmem.runs import RunRefused, train

    try:
        train(args.config, **args.options)
    except RunRefused as error:
        raise SystemExit(f"error: {error}") from None
    report(args)


def speed(args):
    """Examples/s of the training step: padded vs bucketed, with and without XLA."""
    limit_threads(args.threads)
    from keras_relmem.training import write_json

    config = babi_joint.resolve(args.config)
    data = babi_joint.load(config)
    rates = {}
    for label, buckets, jit in (("padded", False, False), ("bucketed", True, False), ("bucketed + XLA", True, True)):
        model = babi_joint.build(config, data, jit_compile=jit)
        ds = babi_joint.train_dataset(data, config, seed=0, buckets=buckets)
        # One step on every bucket's shape first, so no tracing or XLA compilation is timed.
        arrays = data.arrays("train")
        rows = slice(0, config.batch_size)
        for bound in babi_joint.data_bucket_bounds(data) if buckets else [data.story_length]:
            model.train_on_batch({"story": arrays["story"][rows, :bound], "query": arrays["query"][rows],
                                  "time": arrays["time"][rows, :bound]}, arrays["answer"][rows])
        rate = args.speed_steps * config.batch_size / seconds_for_steps(model, ds, args.speed_steps, settle=5)
        rates[label] = round(rate, 1)
        print(f"{label:16s} {rate:8.1f} examples/s", flush=True)
    rates["speed-up"] = round(max(rates["bucketed"], rates["bucketed + XLA"]) / rates["padded"], 2)
    print(f"speed-up (best bucketed / padded): {rates['speed-up']}x")
    write_json(SPEED_RESULTS, {"examples_per_s": rates, "steps": args.speed_steps, "batch_size": config.batch_size,
                               "cpus": os.cpu_count(), "threads": args.threads})


def hops_by_fact_count(tasks, facts):
    """{n: (mean hops, number of tasks)} over the tasks whose questions have n supporting facts (rounded mean)."""
    groups = {}
    for task, row in tasks.items():
        if task in facts:
            groups.setdefault(round(facts[task]), []).append(row["hops"])
    return {n: (sum(h) / len(h), len(h)) for n, h in sorted(groups.items())}


def markdown(results):
    """Per-task error and mean hops of the joint run, with the paper's Table 3 beside it."""
    tasks = results["tasks"]
    state = "complete" if results.get("complete") else "unfinished"
    facts = results.get("supporting_facts", {})
    by_hop = results.get("hop_errors", {})
    trained = "Joint bAbI" if len(tasks) == 20 else f"bAbI tasks {', '.join(sorted(tasks, key=int))} together"
    lines = [f"{trained} en-10k (task 3: en), {results['minutes']:.1f} training minutes, "
             f"{results['epochs']:.2f} epochs ({state}):", "",
             "| task | error % | training error % | hops | supporting facts | error % after hop 1, 2, ... N "
             "| wrong at every hop % | attention on the supporting facts % at hop 1, 2, ... N |",
             "|---|---|---|---|---|---|---|---|"]
    for task in sorted(tasks, key=int):
        row, hop = tasks[task], by_hop.get(task, {})
        lines.append(f"| {task} | {row['error']:.2f} | {cell(row.get('train_error'))} | {row['hops']:.2f} | "
                     f"{cell(facts.get(task))} | {', '.join(f'{e:.1f}' for e in hop.get('error_by_hop', []))} | "
                     f"{cell(hop.get('wrong_at_every_hop'))} | "
                     f"{', '.join(f'{a:.0f}' for a in hop.get('attention_on_support_by_hop', [])) or '-'} |")
    lines += ["", f"- ours: mean error {results['mean_error']:.2f}%, solved {results['solved']}/{len(tasks)}",
              *([starts_markdown(results["starts"])] if "starts" in results else []),
              *(f"- paper, {name}: mean error {error}%, solved {solved}/20" for name, (error, solved) in PAPER.items())]
    if facts:
        groups = hops_by_fact_count(tasks, facts)
        lines.append("- mean hops by supporting facts: " + ", ".join(
            f"{n} fact{'s' * (n > 1)} {hops:.2f} ({count} task{'s' * (count > 1)})"
            for n, (hops, count) in groups.items()))
    rho = hops_spearman(tasks, facts) if facts else None
    if rho is not None:
        lines.append(f"- Spearman correlation across tasks of mean hops and mean supporting facts (from the data's "
                     f"supporting-fact ids): {rho:.2f}")
    solved_rho = solved_hops_spearman(tasks, facts) if facts else None
    if solved_rho is not None:
        lines.append(f"- the same over the solved tasks only: {solved_rho:.2f}")
    over_training = over_training_markdown(results.get("curve", []), facts or None)
    return "\n".join(lines + (["", over_training] if over_training else []))


def starts_markdown(starts):
    """One line on a --starts run: which start went on, and every start's training and test error when
    the choice was made."""
    trials = "; ".join(f"start {t['start'] + 1} (seed {t['seed']}): {t['train_error']:.2f}% / {t['mean_error']:.2f}%"
                       for t in starts["by_start"])
    on = starts.get("chosen_on")  # said only when a curriculum left tasks out of the starts' rounds
    every = len(starts["by_start"][0]["task_errors"])
    on = f" on task{'s' * (len(on) > 1)} {', '.join(on)}" if on and len(on) < every else ""
    return (f"- the best of {starts['count']} starts by training error{on} after {starts['rounds']} rounds: start "
            f"{starts['chosen'] + 1} (seed {starts['seed']}) went on; training / test mean error then: {trials}. "
            f"The minutes include the other starts' {starts['minutes_of_other_starts']:.1f} minutes.")


def at_minutes(curve, every=20.0):
    """The curve's first round at or past each multiple of `every` training minutes, and its last round."""
    picked, mark = [], every
    for entry in curve:
        if entry["minutes"] >= mark:
            picked.append(entry)
            mark = (entry["minutes"] // every + 1) * every
    if curve and (not picked or picked[-1] is not curve[-1]):
        picked.append(curve[-1])
    return picked


def over_training_markdown(curve, facts=None, every=20.0):
    """The run over training, every `every` minutes: mean error, tasks solved, training hops and the
    Spearman of hops and supporting facts `{task: mean facts}`, over all tasks and over the solved ones;
    '' for curves recorded without per-round hops."""
    rows = [e for e in at_minutes(curve, every) if "task_hops" in e]
    if not rows or facts is None:
        return ""
    lines = ["Over training (test error and hops by adaptive inference after each round):", "",
             "| training minutes | mean error % | tasks under 5% | training hops "
             "| Spearman of hops and supporting facts | the same, solved tasks only |",
             "|---|---|---|---|---|---|"]
    for e in rows:
        rho, solved_rho = round_spearmans(e, facts)
        lines.append(f"| {e['minutes']:.0f} | {e['mean_error']:.2f} | {e['solved']} | {e['train_hops']:.2f} | "
                     f"{cell(rho)} | {cell(solved_rho)} |")
    return "\n".join(lines)


def round_spearmans(entry, facts):
    """The Spearman of a curve entry's per-task hops and the supporting facts `{task: mean facts}`, over
    all tasks and over the tasks that round solved."""
    tasks = {t: {"error": errors[0], "hops": entry["task_hops"][t]} for t, errors in entry["task_errors"].items()}
    return hops_spearman(tasks, facts), solved_hops_spearman(tasks, facts)


def at_equal_examples(runs):
    """Runs of one recipe with different seeds, each at the round where the run with the fewest training
    examples stopped (training minutes differ between machines; examples do not). Returns the examples
    and, by seed, `(seed, curve entry, Spearman of hops and supporting facts, the same over the solved
    tasks)`; `runs` are results files recorded with per-round hops."""
    examples = min(run["curve"][-1]["examples"] for run in runs)
    rows = []
    for run in sorted(runs, key=lambda run: run["args"]["seed"]):
        e = [e for e in run["curve"] if e["examples"] <= examples][-1]
        rows.append((run["args"]["seed"], e, *round_spearmans(e, run["supporting_facts"])))
    return examples, rows


def seeds_markdown(runs):
    """`at_equal_examples(runs)` as a table: mean error, tasks under 5% and the Spearman of hops and
    supporting facts, over all and over the solved tasks, per seed."""
    examples, rows = at_equal_examples(runs)
    lines = [f"Per seed, at {examples:,d} training examples (the shortest run's last round):", "",
             "| seed | round | training minutes | mean error % | tasks under 5% "
             "| Spearman of hops and supporting facts | the same, solved tasks only |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {seed} | {e['round']} | {e['minutes']:.1f} | {e['mean_error']:.2f} | {e['solved']} | "
              f"{cell(rho)} | {cell(solved_rho)} |" for seed, e, rho, solved_rho in rows]
    return "\n".join(lines)


def speed_markdown(results):
    """`--speed`: examples/s of the training step by input path."""
    rates = results["examples_per_s"]
    lines = ["| path | examples/s |", "|---|---|"]
    lines += [f"| {path} | {rate} |" for path, rate in rates.items() if path != "speed-up"]
    lines += ["", f"Best bucketed over padded: {rates['speed-up']}x ({results['steps']} steps of batch "
              f"{results['batch_size']}, {results['cpus']} cores)."]
    return "\n".join(lines)


def report(args):
    results = read_results(args.results)
    print(markdown(results))
    try:
        from keras_relmem import viz
    except ImportError:
        return
    # beside the results it draws (bench/memo_babi/results/memo_babi_hops.png for the default --results)
    path = pathlib.Path(args.results)
    tasks = results["tasks"]
    facts = results.get("supporting_facts")
    rho = hops_spearman(tasks, facts) if facts else None
    rho = "" if rho is None else f", Spearman with supporting facts {rho:.2f}"
    picture = viz.hops_per_task({t: row["hops"] for t, row in tasks.items()}, path.with_name(f"{path.stem}_hops.png"),
                                title=f"MEMO on joint bAbI: mean hops per task ({results['minutes']:.0f} min{rho})",
                                highlight=MULTI_FACT, facts=facts)
    print(f"Wrote {picture}")


def main(argv=None):
    dispatch(parse_args(argv), run, report=report, speed=speed)


if __name__ == "__main__":
    main()
