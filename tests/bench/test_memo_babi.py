"""bench.memo_babi: a run through the bench records the analysis, and its tables (over training, per
seed, hops by supporting facts) from results by hand."""

import numpy as np
import pytest

from bench import memo_babi


def test_hops_by_fact_count_by_hand():
    tasks = {"1": {"hops": 1.0}, "2": {"hops": 2.0}, "3": {"hops": 3.5}, "7": {"hops": 3.0}}
    facts = {"1": 1.0, "2": 2.0, "3": 3.0, "7": 2.332}
    assert memo_babi.hops_by_fact_count(tasks, facts) == {1: (1.0, 1), 2: (2.5, 2), 3: (3.5, 1)}


def test_a_run_on_some_tasks_records_the_analysis(tmp_path):
    import json

    results = tmp_path / "memo.json"
    argv = ["--tasks", "1", "2", "--embedding-dim", "8", "--num-heads", "2", "--key-size", "4", "--max-hops", "2",
            "--batch-size", "16", "--steps-per-round", "2", "--budget-minutes", "0.01", "--test-limit", "20",
            "--halting-warmup-rounds", "0", "--task-repeats", "2=3", "--workdir", str(tmp_path / "run"),
            "--results", str(results)]
    try:
        memo_babi.main(argv)
    except FileNotFoundError as error:
        pytest.skip(f"bAbI en-10k not available: {error}")
    run = json.loads(results.read_text())
    assert run["complete"] and sorted(run["tasks"]) == ["1", "2"]
    assert run["args"]["task_repeats"] == ["2=3"]  # as given, so the page's command reads back
    assert run["supporting_facts"] == {"1": 1.0, "2": 2.0}
    assert all(len(row["error_by_hop"]) == 2 for row in run["hop_errors"].values())
    assert all(set(e["task_errors"]) == {"1", "2"} for e in run["curve"])
    last = run["curve"][-1]  # every round keeps its per-task hops (their Spearman is derived when rendered)
    assert last["task_hops"] == {t: row["hops"] for t, row in run["tasks"].items()}
    assert "solved" in memo_babi.markdown(run) and "1 fact" in memo_babi.markdown(run)
    assert memo_babi.markdown(run).startswith("bAbI tasks 1, 2 together en-10k")
    # the same results file from a new workdir: refused before anything trains, and the file is kept
    written = results.read_text()
    with pytest.raises(SystemExit, match="memo.json already holds a run's results, and .*fresh has no run"):
        memo_babi.main([*argv[:-4], "--workdir", str(tmp_path / "fresh"), "--results", str(results)])
    assert results.read_text() == written and not (tmp_path / "fresh").exists()


def test_the_over_training_table_takes_a_round_per_mark_and_the_last():
    facts = {"1": 1.0, "2": 2.0, "3": 3.0, "4": 1.0}
    # hops rank with the facts on tasks 1, 2 and 4; task 3 (unsolved, 40% error) takes the fewest
    task_errors = {"1": [0.0, 0.0], "2": [1.0, 0.0], "3": [40.0, 0.0], "4": [2.0, 0.0]}
    task_hops = {"1": 1.0, "2": 3.0, "3": 0.5, "4": 1.5}
    curve = [{"round": i, "minutes": m, "mean_error": 50.0 - i, "solved": i, "train_hops": 2.0,
              "task_errors": task_errors, "task_hops": task_hops}
             for i, m in enumerate([3, 19, 21, 25, 44, 61, 62])]
    assert [e["minutes"] for e in memo_babi.at_minutes(curve, every=20)] == [21, 44, 61, 62]
    assert [e["minutes"] for e in memo_babi.at_minutes(curve[:6], every=20)] == [21, 44, 61]
    # all four: hops 1.0, 3.0, 0.5, 1.5 against facts 1, 2, 3, 1 -> ranks (2, 4, 1, 3) and (1.5, 3, 4, 1.5)
    every = np.corrcoef([2, 4, 1, 3], [1.5, 3, 4, 1.5])[0, 1]
    # solved tasks 1, 4, 2: hops 1.0, 1.5, 3.0 against facts 1, 1, 2 -> ranks (1, 2, 3) and (1.5, 1.5, 3)
    solved = np.corrcoef([1, 2, 3], [1.5, 1.5, 3])[0, 1]
    assert memo_babi.solved_hops_spearman({t: {"error": e[0], "hops": task_hops[t]} for t, e in task_errors.items()},
                                          facts) == round(solved, 3)
    table = memo_babi.over_training_markdown(curve, facts, every=20).splitlines()
    assert table[4:] == [f"| {m} | {e:.2f} | {n} | 2.00 | {every:.2f} | {solved:.2f} |"
                         for m, e, n in ((21, 48, 2), (44, 46, 4), (61, 45, 5), (62, 44, 6))]
    old = [{k: v for k, v in e.items() if k != "task_hops"} for e in curve]  # recorded before per-round hops
    assert memo_babi.over_training_markdown(old, facts) == ""


def test_seeds_are_compared_at_the_shortest_runs_examples():
    facts = {"1": 1.0, "2": 2.0, "3": 3.0, "4": 1.0}

    def run(seed, rounds, hops):
        curve = [{"round": i, "minutes": 2.0 * (i + 1) * (seed + 1), "examples": 1000 * (i + 1),
                  "mean_error": 30.0 - i - seed, "solved": i,
                  "task_errors": {"1": [0.0, 0.0], "2": [1.0, 0.0], "3": [10.0 * i, 0.0], "4": [2.0, 0.0]},
                  "task_hops": dict(zip(facts, hops))} for i in range(rounds)]
        return {"args": {"seed": seed}, "supporting_facts": facts, "curve": curve}

    # seed 1 is on a slower machine: its three rounds take longer than seed 0's five
    table = memo_babi.seeds_markdown([run(1, 3, (1.0, 2.0, 3.0, 1.5)), run(0, 5, (3.0, 2.0, 1.0, 2.5))])
    table = table.splitlines()
    assert table[0].startswith("Per seed, at 3,000 training examples")
    # both at round 2 (3,000 examples), where task 3 (20% error) is unsolved. Seed 0: hops (3, 2, 1, 2.5)
    # rank (4, 2, 1, 3) against the facts' (1.5, 3, 4, 1.5); solved tasks 1, 2, 4: (3, 1, 2) against (1.5, 3, 1.5)
    every, solved = (np.corrcoef(*ranks)[0, 1] for ranks in (([4, 2, 1, 3], [1.5, 3, 4, 1.5]),
                                                              ([3, 1, 2], [1.5, 3, 1.5])))
    # seed 1: hops (1, 2, 3, 1.5) rank (1, 3, 4, 2); solved: (1, 3, 2) against (1.5, 3, 1.5)
    every1, solved1 = (np.corrcoef(*ranks)[0, 1] for ranks in (([1, 3, 4, 2], [1.5, 3, 4, 1.5]),
                                                                ([1, 3, 2], [1.5, 3, 1.5])))
    assert table[4:] == [f"| 0 | 2 | 6.0 | 28.00 | 2 | {every:.2f} | {solved:.2f} |",
                         f"| 1 | 2 | 12.0 | 27.00 | 2 | {every1:.2f} | {solved1:.2f} |"]


def test_the_task_script_and_the_bench_train_the_same_run(tmp_path):
    """`relmem-train-babi --model memo --task all --joint` and `python -m bench.memo_babi --recipe
    memo_babi_joint` are one code path (keras_relmem.tasks.babi_joint): the same seed gives the same rounds."""
    import json

    from keras_relmem.commands import train as commands

    small = ["--tasks", "1", "2", "--embedding-dim", "8", "--num-heads", "2", "--key-size", "4", "--max-hops", "2",
             "--batch-size", "16", "--steps-per-round", "2", "--budget-minutes", "0.01", "--test-limit", "20",
             "--starts", "1", "--seed", "3"]
    try:
        memo_babi.main(["--recipe", "memo_babi_joint", *small, "--workdir", str(tmp_path / "bench"),
                        "--results", str(tmp_path / "bench.json")])
    except FileNotFoundError as error:
        pytest.skip(f"bAbI en-10k not available: {error}")
    user = ["--model", "memo", "--task", "all", "--joint", "--data", "en-10k", *small, "--no-export"]
    user += ["--workdir", str(tmp_path / "task")]
    commands.babi(user)
    bench, task = (json.loads(path.read_text()) for path in (tmp_path / "bench.json", tmp_path / "task/results.json"))
    clock = {"minutes", "examples_per_s"}  # wall-clock differs; nothing else may
    assert [{k: v for k, v in e.items() if k not in clock} for e in bench["curve"]] == \
        [{k: v for k, v in e.items() if k not in clock} for e in task["curve"]]
    assert bench["tasks"] == task["tasks"] and bench["hop_errors"] == task["hop_errors"]
    # the task script's results name the command that made them, and the recipe it defaulted to
    assert task["args"]["command"] == " ".join(["relmem-train-babi", *user])
    assert task["args"]["recipe"] == bench["args"]["recipe"] == "memo_babi_joint"
