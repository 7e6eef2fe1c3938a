"""Every study's runner starts from `python -m bench <study>` and, on a tiny budget, writes a results file in
the study's schema: the top-level keys its headline file has, and a table the study's page can draw from it.

These runs take seconds; the real budgets are the studies' own (their pages give the commands).
"""

import json
import os

import pytest

from bench import STUDIES
from bench import __main__ as bench_main
from bench.report import catalogue

needs_data = pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")

# A tiny budget for each study's runner (--results and --workdir are added), and the headline file whose schema
# the written file must follow.
TINY = {
    "entnet_babi": (["--tasks", "1", "--epochs", "1", "--max-steps", "2", "--seeds", "0", "--no-jit-compile"],
                    "babi_entnet_seeds.json"),
    "memo_babi": (["--recipe", "memo_babi_joint", "--tasks", "1", "2", "--embedding-dim", "8", "--num-heads", "2",
                   "--key-size", "4", "--max-hops", "2", "--batch-size", "16", "--steps-per-round", "2",
                   "--budget-minutes", "0.01", "--test-limit", "20", "--starts", "1"], "memo_babi.json"),
    "memo_pai": (["--length", "4", "--episodes", "64", "--test", "60", "--curriculum", "2:1", "--max-hops", "2",
                  "--budget-minutes", "0.001"], "memo_pai_length4_entropy_cosine.json"),
    "memo_shortest_path": (["--setting", "10/2/2", "--graphs", "64", "--test", "50", "--max-hops", "2",
                            "--budget-minutes", "0.001"], "memo_shortest_path.json"),
    "nth_farthest": (["--model", "lstm", "--units", "8", "--num-objects", "4", "--num-features", "4",
                      "--steps-per-round", "2", "--batch-size", "8", "--test-examples", "40", "--budget-minutes",
                      "0.01"], "nth_farthest.json"),
    "lte": (["--task", "add", "--length", "2", "--steps-per-round", "2", "--batch-size", "4", "--test-examples",
             "20", "--budget-minutes", "0.01", "--embedding-dim", "8", "--mlp-units", "8", "--mem-slots", "2",
             "--head-size", "4", "--num-heads", "2", "--advance-every", "8"], "lte.json"),
    "lm": (["--model", "lstm", "--units", "8", "--num-layers", "1", "--batch-size", "4", "--bptt", "5",
            "--batches-per-round", "2", "--budget-minutes", "0.01"], "ptb_lm_fair.json"),
    "serving": (["--seconds", "0.2", "--clients", "1", "--rows", "8", "--max-rows", "4"], "serving_one_path.json"),
}


def test_every_study_has_a_tiny_run():
    assert set(TINY) == set(STUDIES)


def test_python_m_bench_lists_every_study_with_its_question_and_commands(capsys):
    bench_main.main([])
    listing = capsys.readouterr().out
    for study in catalogue.studies():
        assert f"{study.name}: {study.question}" in listing and f"python -m bench.{study.name}\n" in listing
    assert "python -m bench.lm.speed" in listing and "python -m bench.serving.soak" in listing
    with pytest.raises(SystemExit, match="no study 'ptb'; the studies are entnet_babi, "):
        bench_main.main(["ptb"])


def test_python_m_bench_study_lists_its_results_files_with_their_commands(capsys):
    bench_main.main(["memo_shortest_path"])
    listing = capsys.readouterr().out
    assert listing.startswith("memo_shortest_path: Does MEMO find")
    assert "Shortest paths (the paper's Table 2) (headline, bench/memo_shortest_path/results/" in listing
    assert ("    python -m bench.memo_shortest_path --setting 20/5/3 --threads 1 --halting-inputs distance --results "
            "bench/memo_shortest_path/results/memo_shortest_path.json") in listing


@needs_data
@pytest.mark.parametrize("study", STUDIES)
def test_a_tiny_run_of_each_study_writes_its_schema(study, tmp_path):
    argv, headline = TINY[study]
    results = tmp_path / "results.json"
    where = ["--out", str(results)] if study == "serving" else ["--results", str(results), "--workdir",
                                                                str(tmp_path / "runs")]
    bench_main.main([study, *argv, *where])
    written = json.loads(results.read_text())
    committed = catalogue.load(headline)
    entry = catalogue.entry(headline)
    missing = set(written) - set(committed) - {"args"}
    # a table keyed by its units (tasks, settings, runs by name) holds other keys than the tiny run's
    keyed_by_unit = study in ("memo_pai", "memo_shortest_path", "nth_farthest", "lm")
    assert keyed_by_unit or not missing, f"{study} wrote keys its headline file has not: {missing}"
    import importlib

    table = getattr(importlib.import_module(f"bench.{entry.bench}"), entry.render)(written)
    assert "|" in table, f"{study}'s table from the tiny run: {table!r}"


def test_a_report_of_a_file_not_written_yet_names_the_files_the_study_has(tmp_path):
    from bench import common

    (tmp_path / "headline.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"No results yet: .*missing\.json\. Run the study first, or report one of "
                                         r"its files with --results .*/NAME: headline\.json\."):
        common.read_results(tmp_path / "missing.json")
    with pytest.raises(SystemExit, match=r"No results yet: .*\. Run the study first\.$"):
        common.read_results(tmp_path / "nowhere" / "missing.json")
