"""bench.lte: runs land under runs/, the table's summary is the median over seeds, and the RMC and the
LSTM are compared at equal examples and at equal minutes."""

import json

import pytest

from bench import lte as bench_lte

TINY = ["--task", "copy", "--length", "2", "--steps-per-round", "2", "--batch-size", "4", "--test-examples", "20",
        "--budget-minutes", "0.01", "--embedding-dim", "8", "--mlp-units", "8"]


def test_tiny_runs_and_their_summary(tmp_path):
    results = tmp_path / "lte.json"
    common = [*TINY, "--workdir", str(tmp_path / "runs"), "--results", str(results)]
    bench_lte.main(["--model", "rmc", "--mem-slots", "2", "--head-size", "4", "--num-heads", "2", *common])
    for seed in ("0", "1"):
        bench_lte.main(["--model", "lstm", "--units", "8", "--seed", seed, *common])
    bench_lte.main(["--model", "lstm", "--label", "lstm_u12", "--units", "12", *common])  # a tuning point
    written = json.loads(results.read_text())
    assert set(written["runs"]) == {"copy/rmc/seed0", "copy/lstm/seed0", "copy/lstm/seed1", "copy/lstm_u12/seed0"}
    assert set(written["tasks"]["copy"]) == {"rmc", "lstm", "lstm_u12"}
    # the task script's flags are recorded with the run: the bench adds no model option of its own
    assert written["args"]["runs/copy/lstm/seed1"]["units"] == 8 and written["args"]["runs/copy/rmc/seed0"][
        "head_size"] == 4
    lstm = written["tasks"]["copy"]["lstm"]
    seeds = [written["runs"][f"copy/lstm/seed{s}"]["accuracy"] for s in (0, 1)]
    assert lstm["seeds"] == {"0": seeds[0], "1": seeds[1]} and lstm["accuracy"] == pytest.approx(sum(seeds) / 2)
    assert set(written["comparisons"]["copy"]) == {"equal_examples", "equal_minutes"}
    # one schedule for every model by default: the first round trains at (1, 1), set by examples, not a probe
    first = written["runs"]["copy/lstm/seed0"]["curve"][0]
    assert written["curriculum"] == "shared" and first["level"] == [1, 1] and "level_accuracy" not in first
    assert written["args"]["runs/copy/rmc/seed0"]["advance_every"] == bench_lte.ADVANCE_EVERY
    table = bench_lte.markdown(written).splitlines()
    assert table[0].startswith("Curriculum: shared")
    assert table[4].startswith("| copy | RMC |") and table[4].endswith("| 100.0 |")  # the paper's RMC copy figure
    assert table[5].startswith("| copy | LSTM |") and table[6].startswith("| copy | LSTM_U12 |")
    assert table[6].endswith("|  |")  # a variant has no paper figure


def test_max_examples_stops_a_run_at_that_count_and_a_rerun_with_more_continues(tmp_path):
    results = tmp_path / "lte.json"
    common = [*TINY, "--budget-minutes", "60", "--model", "lstm", "--units", "8", "--workdir", str(tmp_path),
              "--results", str(results)]
    bench_lte.main([*common, "--max-examples", "16"])  # rounds of 2 batches of 4: the 2 rounds that reach 16
    run = json.loads(results.read_text())["runs"]["copy/lstm/seed0"]
    assert run["complete"] and [row["examples"] for row in run["curve"]] == [8, 16]
    bench_lte.main([*common, "--max-examples", "20"])  # a round past 16 reaches 20 (rounds are whole)
    run = json.loads(results.read_text())["runs"]["copy/lstm/seed0"]
    assert run["complete"] and run["examples"] == 24 and len(run["curve"]) == 3
    with pytest.raises(SystemExit):
        bench_lte.main([*common, "--max-examples", "0"])


def test_each_models_own_probe_as_1_0_measured(tmp_path):
    results = tmp_path / "lte.json"
    bench_lte.main(["--model", "lstm", "--units", "8", "--advance-every", "0", *TINY, "--workdir", str(tmp_path),
                    "--results", str(results)])
    written = json.loads(results.read_text())
    # the first round trained below the target (length 1 of 2): the probe that decides the curriculum is kept
    first = written["runs"]["copy/lstm/seed0"]["curve"][0]
    assert written["curriculum"] == "per-model" and first["level"] == [1, 1] and 0 <= first["level_accuracy"] <= 100


def _run(task, model, seed, accuracies, examples_per_round, minutes_per_round):
    curve = [{"examples": (i + 1) * examples_per_round, "minutes": (i + 1) * minutes_per_round, "accuracy": a,
              "solved": a / 2} for i, a in enumerate(accuracies)]
    return {"task": task, "model": model, "seed": seed, "complete": True, "accuracy": accuracies[-1],
            "solved": accuracies[-1] / 2, "examples": curve[-1]["examples"], "minutes": curve[-1]["minutes"],
            "curve": curve}


def test_equal_examples_and_equal_minutes():
    # the RMC: 100 examples and 2 minutes a round; the LSTM: 100 examples and 1 minute a round
    runs = {"rmc": _run("add", "rmc", 0, [10, 50, 80], 100, 2.0),
            "lstm": _run("add", "lstm", 0, [5, 35, 30, 40, 60, 70], 100, 1.0)}
    results = {"runs": runs}
    bench_lte.summarize(results)
    equal = results["comparisons"]["add"]
    # at 300 examples (the RMC's all): RMC 80, LSTM after its third round 30; the LSTM's best by then (the
    # paper's measure) was its second round's 35
    assert equal["equal_examples"] == {"examples": 300, "rmc": 80, "lstm": 30, "best": {"rmc": 80, "lstm": 35}}
    # at 6 minutes (both budgets): RMC 80, LSTM 70
    assert equal["equal_minutes"] == {"minutes": 6.0, "rmc": 80, "lstm": 70, "best": {"rmc": 80, "lstm": 70}}
    assert results["tasks"]["add"]["rmc"]["seeds"] == {"0": 80}


def test_examples_to_99_is_the_first_round_there_and_none_until_every_seed_is():
    runs = {"a": _run("copy", "rmc", 0, [50, 99.2, 98, 100], 100, 1.0),
            "b": _run("copy", "rmc", 1, [99.5, 100], 100, 1.0),
            "c": _run("copy", "lstm", 0, [10, 20], 100, 1.0)}
    results = {"runs": runs}
    bench_lte.summarize(results)
    assert results["tasks"]["copy"]["rmc"]["examples_to_99"] == 150  # seeds at 200 and 100
    assert results["tasks"]["copy"]["lstm"]["examples_to_99"] is None


def test_a_seed_still_training_stays_out_of_the_row_of_the_finished_ones():
    unfinished = {**_run("program", "rmc", 1, [5, 9], 100, 1.0), "complete": False}
    runs = {"a": _run("program", "rmc", 0, [10, 30, 40], 100, 2.0), "b": unfinished,
            "c": _run("program", "lstm", 0, [5, 20, 30, 35], 100, 1.0)}
    results = {"runs": runs}
    bench_lte.summarize(results)
    row = results["tasks"]["program"]["rmc"]
    assert (row["accuracy"], row["seeds"], row["unfinished_seeds"], row["complete"]) == (40, {"0": 40}, {"1": 9}, True)
    # the comparison too is between finished runs: at the RMC seed 0's 300 examples, not seed 1's 200
    assert results["comparisons"]["program"]["equal_examples"] == {"examples": 300, "rmc": 40, "lstm": 30,
                                                                   "best": {"rmc": 40, "lstm": 30}}
    assert "1: 9.0 (unfinished)" in bench_lte.markdown(results)
    # with no seed finished, the unfinished ones are the row (marked so)
    alone = {"runs": {"b": unfinished}}
    bench_lte.summarize(alone)
    assert alone["tasks"]["program"]["rmc"]["seeds"] == {"1": 9} and not alone["tasks"]["program"]["rmc"]["complete"]


def test_rows_of_one_setting_are_compared_under_settings():
    # both models at a tuned rate (labels rmc_lr3e-3 and lstm_lr3e-3) besides their default rows
    runs = {"rmc": _run("program", "rmc", 0, [10, 20], 100, 1.0),
            "lstm": _run("program", "lstm", 0, [5, 15], 100, 1.0),
            "rmc3": {**_run("program", "rmc", 0, [12, 24, 30], 100, 2.0), "label": "rmc_lr3e-3"},
            "lstm3a": {**_run("program", "lstm", 0, [20, 40, 50, 60], 100, 1.0), "label": "lstm_lr3e-3"},
            "lstm3b": {**_run("program", "lstm", 1, [10, 30, 45, 55], 100, 1.0), "label": "lstm_lr3e-3"},
            "lstm_only": {**_run("program", "lstm", 0, [1, 2], 100, 1.0), "label": "lstm_u512"}}
    results = {"runs": runs}
    bench_lte.summarize(results)
    program = results["comparisons"]["program"]
    assert program["equal_examples"] == {"examples": 200, "rmc": 20, "lstm": 15, "best": {"rmc": 20, "lstm": 15}}
    # at 300 examples (what the RMC at 3e-3 trained): RMC 30, the LSTM's seeds 50 and 45, median 47.5
    assert program["settings"] == {"lr3e-3": {
        "equal_examples": {"examples": 300, "rmc": 30, "lstm": 47.5, "best": {"rmc": 30, "lstm": 47.5}},
        "equal_minutes": {"minutes": 4.0, "rmc": 24, "lstm": 57.5, "best": {"rmc": 24, "lstm": 57.5}}}}
    table = bench_lte.markdown(results)
    assert "| program (lr3e-3) | 300, 30.0, 47.5 | 4.0, 24.0, 57.5 |" in table


def test_a_variant_row_draws_its_own_curve():
    runs = {"a": _run("program", "rmc", 0, [10, 20], 100, 1.0),
            "b": {**_run("program", "rmc", 0, [12, 24], 100, 1.0), "label": "rmc_lr3e-3"},
            "c": {**_run("copy", "lstm", 1, [50], 100, 1.0), "complete": False}}
    panels = bench_lte.curves_by_task({"runs": runs})
    assert list(panels) == ["program", "copy"]  # the table's task order
    assert set(panels["program"]) == {"RMC seed 0", "RMC_LR3E-3 seed 0"}
    assert panels["program"]["RMC_LR3E-3 seed 0"][-1]["accuracy"] == 24
    assert set(panels["copy"]) == {"LSTM seed 1 (unfinished)"}


def test_a_tuning_grid_sets_each_variant_against_its_models_default_at_equal_examples():
    # rows rmc (3 rounds of 100 examples), lstm (6) and the variants rmc_h64 (2 rounds) and lstm_u512 (4)
    runs = {"rmc": _run("add", "rmc", 0, [10, 50, 80], 100, 2.0),
            "lstm": _run("add", "lstm", 0, [5, 20, 30, 40, 60, 70], 100, 1.0),
            "rmc_h64": {**_run("add", "rmc", 0, [15, 55], 100, 3.0), "label": "rmc_h64"},
            "lstm_u512": {**_run("add", "lstm", 0, [1, 2, 3, 90], 100, 1.0), "label": "lstm_u512"}}
    for run in runs.values():
        for row in run["curve"]:
            row["level"] = [2, 1] if row["examples"] <= 200 else [3, 1]
    results = {"runs": runs}
    bench_lte.summarize(results)
    # rmc_h64 at its 200 examples against the RMC's second round; lstm_u512 at 400 against the LSTM's fourth
    # and the best test up to there (the paper's measure): lstm_u512's round 4 is its best, the LSTM's too
    assert results["grids"]["add"] == {
        "lstm_u512": {"examples": 400, "level": [3, 1], "accuracy": 90, "default": 40,
                      "best": {"accuracy": 90, "default": 40}},
        "rmc_h64": {"examples": 200, "level": [2, 1], "accuracy": 55, "default": 50,
                    "best": {"accuracy": 55, "default": 50}}}
    runs["rmc_h64"]["curve"][0]["accuracy"] = 65  # its best before the compared round
    bench_lte.summarize(results)
    assert results["grids"]["add"]["rmc_h64"]["best"] == {"accuracy": 65, "default": 50}
    table = bench_lte.markdown(results)
    assert "| add | RMC_H64 | 200, (2, 1), 55.0, 50.0 |" in table  # one schedule per model: the test there
    assert "| add | LSTM_U512 | 400, (3, 1), 90.0, 40.0 |" in table
    results["curriculum"] = "shared"  # the shared schedule's page shows the best beside the last
    assert "| add | RMC_H64 | 200, (2, 1), 65.0 / 55.0, 50.0 / 50.0 |" in bench_lte.markdown(results)
    del runs["rmc_h64"], runs["lstm_u512"]
    bench_lte.summarize(results)
    assert results["grids"] == {}  # no variants: the comparison above is the whole table


def test_each_model_trains_by_its_recipe_and_a_run_at_another_rate_names_it_in_its_command():
    from bench.report.pages import command_for
    from keras_relmem import recipes
    from keras_relmem.configs import LTEConfig

    for model in bench_lte.MODELS:
        args, recipe = bench_lte.parse_args(["--model", model]), recipes.default(LTEConfig, model)
        assert (args.learning_rate, args.units, args.head_size, args.mlp_units) == (
            recipe.learning_rate, recipe.units, recipe.head_size, list(recipe.mlp_units))
        assert args.advance_every == bench_lte.ADVANCE_EVERY  # the shared schedule, whatever the recipe's
    # the tuned rate of the RMC and the LSTM; the EntNet cell keeps the rate it was run at
    assert [bench_lte.parse_args(["--model", m]).learning_rate for m in bench_lte.MODELS] == [3e-3, 3e-3, 1e-3]
    recorded = dict(vars(bench_lte.parse_args(["--model", "lstm", "--learning-rate", "0.001"])), results="x.json")
    assert command_for("lte", recorded) == "python -m bench.lte --model lstm --learning-rate 0.001"
    recorded["learning_rate"] = 3e-3
    assert command_for("lte", recorded) == "python -m bench.lte --model lstm"


def test_the_picture_marks_where_the_shared_schedule_reaches_the_tests_setting():
    runs = {"add/rmc/seed0": _run("add", "rmc", 0, [10, 20, 30, 40], 100, 1.0),
            "add/lstm/seed0": _run("add", "lstm", 0, [10, 20, 30, 40, 50], 100, 1.0)}
    for run in runs.values():
        for row, level in zip(run["curve"], ([1, 1], [2, 1], [2, 2], [2, 2], [2, 2])):
            row["level"] = level
    args = {"length": 2, "nesting": 2, "advance_every": 200}
    results = {"runs": runs, "args": {f"runs/{name}": args for name in runs}}
    bench_lte.summarize(results)
    # the third round (examples 200-300) is the first at (2, 2): the line is at 200
    assert bench_lte.target_reached(results) == {"add": (200, "level (2, 2) from here")}
    for run in runs.values():  # Copy has no nesting: its test's setting is (2, 1), whatever --nesting says
        run["task"] = "copy"
        for row, level in zip(run["curve"], ([1, 1], [2, 1], [2, 1], [2, 1], [2, 1])):
            row["level"] = level
    assert bench_lte.target_reached(results) == {"copy": (100, "level (2, 1) from here")}
    results["args"] = {}  # runs recorded without their settings: no target known, no line
    assert bench_lte.target_reached(results) == {}
    results["curriculum"] = "per-model"  # each model's own levels: no one line
    assert bench_lte.target_reached(results) == {}
