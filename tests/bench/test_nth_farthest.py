"""bench.nth_farthest: a named run of a smaller task lands under its name, without the paper's figure."""

import json

import pytest

from bench import nth_farthest


@pytest.mark.slow  # minutes of training; the curriculum test runs the bench in the default suite
def test_named_small_task_run(tmp_path):
    results = tmp_path / "nf.json"
    common = ["--num-objects", "4", "--num-features", "4", "--steps-per-round", "2", "--batch-size", "8",
              "--test-examples", "40", "--budget-minutes", "0.01", "--workdir", str(tmp_path / "runs"),
              "--results", str(results)]
    nth_farthest.main(["--model", "lstm", "--name", "lstm_u8", "--units", "8", *common])
    nth_farthest.main(["--model", "rmc", "--mem-slots", "2", "--head-size", "4", "--num-heads", "2", *common])
    written = json.loads(results.read_text())
    assert written["lstm_u8"]["complete"] and 0 <= written["lstm_u8"]["accuracy"] <= 100
    assert written["args"]["lstm_u8"]["units"] == 8
    table = nth_farthest.markdown(written).splitlines()
    assert table[2].startswith("| RMC |") and table[3].startswith("| LSTM_U8 |")
    assert table[2].endswith("|  |") and table[3].endswith("|  |")  # 4 objects: not the paper's task
    assert "| 4 x 4 |" in table[2] and "| 50.0 |" in table[2]  # 2 / N without distances


def test_farthest_only_mlp_reference(tmp_path):
    results = tmp_path / "nf.json"
    nth_farthest.main(["--model", "mlp", "--name", "mlp_farthest", "--questions", "0", "--num-objects", "4",
                       "--num-features", "4", "--steps-per-round", "2", "--batch-size", "8", "--test-examples",
                       "40", "--budget-minutes", "0.01", "--workdir", str(tmp_path / "runs"),
                       "--results", str(results)])
    written = json.loads(results.read_text())
    assert written["args"]["mlp_farthest"]["questions"] == [0]
    row = nth_farthest.markdown(written).splitlines()[2]
    # n = 0 only: no free answers, a guess among the 3 labels that are not m
    assert row.startswith("| MLP_FARTHEST | 0 | 4 x 4, n = 0 |") and "| 33.3 |" in row


def test_without_distances_counts_the_free_nearest():
    assert nth_farthest.without_distances(8) == 25.0
    assert nth_farthest.without_distances(4, [0, 3]) == 100 * (0.5 + 0.5 / 3)


def test_left_the_guess_is_the_first_round_five_points_above_it():
    # four rounds of 1,000 examples each; a guess of 20%: the third round is the first above 25%
    curve = [{"minutes": 1.0, "test_accuracy": 24.0}, {"minutes": 2.0, "test_accuracy": 25.0},
             {"minutes": 3.5, "test_accuracy": 25.1}, {"minutes": 4.0, "test_accuracy": 90.0}]
    run = {"examples": 4000, "curve": curve}
    assert nth_farthest.left_the_guess(run, 20.0) == (3.5, 3000)
    assert nth_farthest.left_the_guess(run, 90.0) is None
    # after 2,000 examples: the second round; 2,500 are reached only at the end of the third
    assert nth_farthest.accuracy_after(run, 2000) == 25.0
    assert nth_farthest.accuracy_after(run, 2500) == 25.1
    assert nth_farthest.accuracy_after(run, 4001) is None
    arguments = {"model": "lstm", "num_objects": 6, "num_features": 4, "questions": [0]}
    finished = {**run, "complete": True, "accuracy": 90.0, "best_accuracy": 90.0, "minutes": 4.0}
    row = nth_farthest.markdown({"args": {"x": arguments}, "x": finished}).splitlines()[2]
    assert "| 4,000 | 3.5, 3,000 |" in row  # without distances 20% (a guess among the five labels not m's)


def test_next_questions_adds_the_next_n_at_the_threshold():
    assert nth_farthest.next_questions([0], 79.9, 80, 4) == [0]
    assert nth_farthest.next_questions([0], 80.0, 80, 4) == [0, 1]
    assert nth_farthest.next_questions([0, 1, 2, 3], 99.0, 80, 4) == [0, 1, 2, 3]


def test_curriculum_resumes_where_it_stopped(tmp_path):
    results, workdir = tmp_path / "nf.json", tmp_path / "runs"
    common = ["--model", "mlp", "--curriculum", "0", "--num-objects", "4", "--num-features", "4",
              "--steps-per-round", "2", "--batch-size", "8", "--test-examples", "40", "--workdir", str(workdir),
              "--results", str(results)]
    nth_farthest.main([*common, "--budget-minutes", "0.0001"])  # one round
    curve_path = workdir / "mlp" / "curve.json"
    spent = json.loads(curve_path.read_text())[-1]["minutes"]
    nth_farthest.main([*common, "--budget-minutes", str(spent + 0.0001)])  # one more, resumed
    curve = json.loads(curve_path.read_text())
    # threshold 0: every round adds the next n; the resumed round carries on from the saved curve
    assert [e["asked"] for e in curve] == [[0], [0, 1]]
    written = json.loads(results.read_text())
    assert [e["asked"] for e in written["mlp"]["curve"]] == [[0], [0, 1]]
    assert "curriculum over n at 0%" in nth_farthest.markdown(written)
