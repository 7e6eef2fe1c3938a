"""The results page and the README's results table are what the JSON files in bench/results/ give."""

import json
import re

import pytest

from bench import report


def test_every_results_file_is_catalogued_and_every_entry_exists():
    assert report.check_catalogue() == []


@pytest.mark.results
def test_committed_pages_match_the_json():
    """Fails when a results file changed (or the page was edited by hand) without `python -m bench.report`."""
    assert report.PAGE.read_text() == report.page(), "docs/results.md is stale: run python -m bench.report"
    for path, text in report.archive_pages().items():
        assert path.exists() and path.read_text() == text, f"{path} is stale: run python -m bench.report"
    readme = report.README.read_text()
    assert report.readme(readme) == readme, "README.md's results table is stale: run python -m bench.report"


@pytest.fixture
def stub_results(tmp_path):
    """A results folder with an empty stand-in for every catalogued file and picture."""
    for section in report.CATALOGUE:
        for entry in section.entries:
            for name in filter(None, (entry.name, entry.picture)):
                (tmp_path / name).write_text("{}")
    return tmp_path


def test_an_uncatalogued_file_is_an_error(stub_results, monkeypatch):
    tmp_path = stub_results
    (tmp_path / "orphan.json").write_text("{}")
    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    assert report.check_catalogue() == [
        "bench/results/orphan.json is in no table: add it to bench/catalogue.toml or remove it"]
    (tmp_path / "memo_babi.json").unlink()
    assert "bench/catalogue.toml lists bench/results/memo_babi.json, which does not exist" in report.check_catalogue()


@pytest.mark.parametrize("entry", [e for s in report.CATALOGUE for e in s.entries if not e.command],
                         ids=lambda e: e.name)
def test_each_command_parses_back_to_the_recorded_arguments(entry):
    """The page's command, run through its bench's parser, gives the arguments the file recorded."""
    import importlib

    module = importlib.import_module(f"bench.{entry.bench}")
    results = json.loads((report.RESULTS_DIR / entry.name).read_text())
    recorded_args = results["args"]
    runs = recorded_args.values() if all(isinstance(v, dict) for v in recorded_args.values()) else [recorded_args]
    for recorded in runs:
        if "command" in recorded:  # written by the task script: its own command, parsed as it parses it
            parsed = _task_script_arguments(recorded["command"])
        else:
            command = report.command_for(entry.bench, recorded).split()[3:]  # after `python -m bench.x`
            parsed = vars(module.parse_args(command))
        for key, value in recorded.items():
            if key in report.not_in_command(entry.bench) or key not in parsed:
                continue
            assert parsed[key] == value, f"{key}: the command gives {parsed[key]!r}, the run had {value!r}"


def _task_script_arguments(command):
    """What `relmem-train-babi` (`tasks/train_babi.py`) makes of `command` (its joint MEMO runs): the config's
    fields with its implied values, its recipe and the run's options that it sets."""
    import shlex

    from keras_relmem.commands import train as commands
    from keras_relmem.tasks import babi_joint

    words = shlex.split(command)
    assert words[:2] == ["python", "tasks/train_babi.py"] or words[0] == "relmem-train-babi", command
    config, options = commands.parse_babi(words[2:] if words[0] == "python" else words[1:])
    resolved = babi_joint.resolve(config).to_dict()
    return {**resolved, "tasks": resolved["tasks"] or None, "recipe": config.recipe,  # no tasks recorded as None
            **{k: v for k, v in options.items() if v is not None and k != "command"}}


def test_command_for_writes_only_what_differs_from_the_defaults():
    recorded = {"budget_minutes": 10.0, "schedule": "cyclic", "tied_keys": True, "weight_decay": 0.02,
                "jit_compile": False, "threads": 1, "tasks": [1, 2], "results": "x.json"}
    assert report.command_for("babi_entnet", recorded) == (
        "python -m bench.babi_entnet --schedule cyclic --tied-keys --weight-decay 0.02 --no-jit-compile --threads 1")
    # MEMO's --tasks is what one model trains on, not which units of a table ran: its command keeps it
    assert report.command_for("memo_babi", {"tasks": [16], "budget_minutes": 20.0, "workdir": "runs/x"}) == (
        "python -m bench.memo_babi --tasks 16 --budget-minutes 20")


def _summary_with(monkeypatch, changes):
    """The README's summary table with some results files' JSON changed by `changes[name](json)`."""
    load = report._load

    def patched(name):
        results = load(name)
        return changes[name](results) if name in changes else results

    monkeypatch.setattr(report, "_load", patched)
    return report.summary()


def _row(summary, title):
    return next(line for line in summary.splitlines() if line.startswith(f"| {title} |"))


def _seed_zero_only(results):
    """The committed Nth Farthest results without their runs of other seeds, which the tests add themselves."""
    kept = [name for name, arguments in results["args"].items() if arguments["seed"] == 0]
    return {"args": {name: results["args"][name] for name in kept}, **{name: results[name] for name in kept}}


def test_the_small_nth_farthest_row_takes_the_best_rmc_at_the_lstms_training_time(monkeypatch):
    def add_rmcs(results):
        results = _seed_zero_only(results)
        results["args"]["lstm_u256_seed1"] = {**results["args"]["lstm_u256"], "name": "lstm_u256_seed1", "seed": 1}
        results["lstm_u256_seed1"] = {**results["lstm_u256"], "accuracy": 50.0}
        results["args"]["rmc_better"] = {**results["args"]["rmc_farthest"], "name": "rmc_better", "units": 8}
        results["rmc_better"] = {**results["rmc_farthest"], "accuracy": 99.0, "minutes": 84.1, "complete": True}
        results["args"]["rmc_short"] = {**results["args"]["rmc_farthest"], "name": "rmc_short", "units": 9}
        results["rmc_short"] = {**results["rmc_farthest"], "accuracy": 100.0, "minutes": 40.0}  # not at 84 min
        return results

    committed = report._load("nth_farthest_4objects.json")
    committed = _seed_zero_only(committed)
    lstm = max(run["accuracy"] for name, run in committed.items() if name.startswith("lstm") and run.get("complete"))
    at_84 = sum(name.startswith("rmc") and committed["args"][name].get("questions") == [0] and run["minutes"] >= 83.5
                for name, run in committed.items())
    row = _row(_summary_with(monkeypatch, {"nth_farthest_4objects.json": add_rmcs}),
               "RMC, Nth Farthest, 4 objects of 4 features, farthest only, per seed")
    # rmc_better has no second seed: its other seeds are not run, the LSTM's are shown
    assert f"| seed 0: 99.0% / {lstm:.1f}%; seed 1: not run / 50.0% (84 training min each; " in row
    assert f"among {at_84 + 1} RMC and" in row


def test_the_small_nth_farthest_row_shows_every_seed_of_the_chosen_settings(monkeypatch):
    def reseed(results):
        results = _seed_zero_only(results)
        for name in [name for name in results if name != "args"]:
            seed = results["args"][name]["seed"]
            for extra in (1, 2):  # a copy of every run under seeds 1 and 2, a point lower per seed
                copy = f"{name}_copy{extra}"
                results["args"][copy] = {**results["args"][name], "name": copy, "seed": seed + extra}
                results[copy] = {**results[name], "accuracy": results[name]["accuracy"] - extra}
        results["rmc_farthest_copy2"].update(minutes=20.0, complete=False)  # stopped early
        return results

    committed = report._load("nth_farthest_4objects.json")
    rmc, lstm = committed["rmc_farthest"]["accuracy"], committed["lstm_u256"]["accuracy"]
    row = _row(_summary_with(monkeypatch, {"nth_farthest_4objects.json": reseed}),
               "RMC, Nth Farthest, 4 objects of 4 features, farthest only, per seed")
    assert (f"| seed 0: {rmc:.1f}% / {lstm:.1f}%; seed 1: {rmc - 1:.1f}% / {lstm - 1:.1f}%; "
            f"seed 2: {rmc - 2:.1f}% (unfinished at 20 of 240 min) / {lstm - 2:.1f}% (84 training min each; ") in row


def test_an_rmc_continued_past_the_lstms_budget_counts_at_the_lstms_training_time(monkeypatch):
    # rmc_farthest_long is rmc_farthest's 84-minute checkpoint trained on: at 84 minutes it is rmc_farthest
    def continued(results):
        results = _seed_zero_only(results)
        del results["rmc_farthest"], results["args"]["rmc_farthest"]
        results["rmc_farthest_long"].update(accuracy=99.0, minutes=240.2, complete=True)
        return results

    committed = report._load("nth_farthest_6objects.json")
    rmc, lstm = committed["rmc_farthest"]["accuracy"], committed["lstm_u256"]["accuracy"]
    row = _row(_summary_with(monkeypatch, {"nth_farthest_6objects.json": continued}),
               "RMC, Nth Farthest, 6 objects of 4 features, farthest only, per seed")
    assert f"| seed 0: {rmc:.1f}% / {lstm:.1f}% (84 training min each; the 4-object task's best settings) |" in row


def test_the_equal_examples_row_reads_the_lstm_after_as_many_examples_as_the_rmc_trained(monkeypatch):
    committed = _seed_zero_only(report._load("nth_farthest_4objects.json"))
    rmc, lstm, arguments = committed["rmc_farthest"], committed["lstm_u256"], committed["args"]["lstm_u256"]
    # each of the LSTM's rounds trains steps_per_round batches: the round that ends on the RMC's count
    rounds = rmc["examples"] // (arguments["steps_per_round"] * arguments["batch_size"])
    row = _row(_summary_with(monkeypatch, {"nth_farthest_4objects.json": _seed_zero_only}),
               "RMC, Nth Farthest, 4 objects of 4 features, farthest only, equal examples, per seed")
    assert (f"| seed 0: {rmc['accuracy']:.1f}% / {lstm['curve'][rounds - 1]['test_accuracy']:.1f}% "
            f"({rmc['examples'] / 1e6:.2f} M examples, the RMC unfinished at 84 of 240 min) |") in row


def test_the_ptb_per_seed_rows_pair_the_seeds_of_each_recipe(monkeypatch):
    def seeds(results):
        results = _seed_zero_only(results)
        results["rmc_keep_best"].update(complete=True, best_perplexity=105.4, best_minutes=61.2, minutes=95.0)
        # a second seed of each recipe: the RMC's unfinished, the LSTM's recorded before --keep-best existed
        results["rmc_keep_best_seed1"] = {"complete": False, "val_perplexity": 120.04, "minutes": 40.2}
        results["args"]["rmc_keep_best_seed1"] = {**results["args"]["rmc_keep_best"], "seed": 1,
                                                  "name": "rmc_keep_best_seed1"}
        lstm = {k: v for k, v in results["args"]["lstm_zaremba_small"].items() if k != "keep_best"}
        results["lstm_zaremba_small_seed1"] = {**results["lstm_zaremba_small"], "perplexity": 113.04}
        results["args"]["lstm_zaremba_small_seed1"] = {**lstm, "seed": 1, "name": "lstm_zaremba_small_seed1"}
        # a third seed of the LSTM alone, and the RMC without early stopping (another recipe), which must not count
        results["lstm_zaremba_small_seed2"] = {**results["lstm_zaremba_small"], "perplexity": 111.96}
        results["args"]["lstm_zaremba_small_seed2"] = {**lstm, "seed": 2, "name": "lstm_zaremba_small_seed2"}
        results["rmc_seed3"] = {**results["rmc"]}
        results["args"]["rmc_seed3"] = {**results["args"]["rmc"], "seed": 3}
        return results

    committed = report._load("ptb_lm_fair.json")
    rmc, small, medium = (committed[name]["perplexity"]
                          for name in ("rmc", "lstm_zaremba_small", "lstm_zaremba_medium"))
    summary = _summary_with(monkeypatch, {"ptb_lm_fair.json": seeds})
    row = _row(summary, "RMC, PTB, with early stopping, per seed")
    assert (f"| seed 0: 105.4 (round of minute 61 of 95) / {small:.1f} / {medium:.1f}; seed 1: (unfinished: "
            "validation 120.0 after 40 min) / 113.0 / not run; seed 2: not run / 112.0 / not run |") in row
    # without early stopping the RMC's seeds are its own recipe's: seed 3 here, and none of --keep-best's
    row = _row(summary, "RMC, PTB, each model its own recipe, per seed")
    assert (f"| seed 0: {rmc:.1f} / {small:.1f} / {medium:.1f}; seed 1: not run / 113.0 / not run; "
            f"seed 2: not run / 112.0 / not run; seed 3: {rmc:.1f} / not run / not run |") in row


def test_a_per_seed_row_names_the_start_a_several_starts_run_went_on_with():
    # bench.memo_babi --starts records the chosen start counting from 0; the page counts from 1, as the log does
    assert report._chosen_start({"starts": {"chosen": 2}}) == " (start 3)"
    assert report._chosen_start({"args": {"seed": 0}}) == ""


def test_a_joint_seed_cell_gives_solved_error_spearman_and_the_budget_left():
    tasks = {"1": {"error": 0.0, "hops": 1.0}, "2": {"error": 9.0, "hops": 2.0}, "3": {"error": 40.0, "hops": 3.5}}
    run = {"args": {"seed": 1, "budget_minutes": 240.0}, "tasks": tasks, "solved": 1, "mean_error": 16.333,
           "supporting_facts": {"1": 1.0, "2": 2.0, "3": 3.0}, "minutes": 101.6, "complete": False,
           "starts": {"chosen": 0}}
    # hops ranked exactly as the supporting facts: Spearman 1
    assert report._joint_seed_cell(run) == "seed 1 (start 1): 1/20, 16.3%; 1.00 (102 training min of 240, unfinished)"
    run.update(complete=True, minutes=240.2, tasks={**tasks, "3": {"error": 40.0, "hops": 1.5}})
    del run["starts"]
    # hops 1, 2, 1.5 against facts 1, 2, 3: ranks 1, 3, 2 against 1, 2, 3, rho = 1 - 6 * 2 / (3 * 8) = 0.5
    assert report._joint_seed_cell(run) == "seed 1: 1/20, 16.3%; 0.50 (240 training min)"


def test_a_note_quotes_numbers_from_its_results_file():
    results = {"rmc": {"perplexity": 107.46, "curve": [{"minutes": 3.0}, {"minutes": 90.15}]}}
    note = "test {{rmc.perplexity:.1f}} at minute {{rmc.curve.-1.minutes:.0f}}; braces {kept} as they are"
    assert report.quote(note, results) == "test 107.5 at minute 90; braces {kept} as they are"


def test_a_note_quotes_a_ratio_of_two_numbers_or_of_a_number_and_a_constant():
    results = {"rmc": {"accuracy": 89.33, "examples": 4032000}, "lstm": {"accuracy": 65.73}}
    note = "{{rmc.accuracy / lstm.accuracy:.2f}} times, {{rmc.examples / 1e6:.1f}} million"
    # 89.33 / 65.73 = 1.359..., 4,032,000 / 1,000,000 = 4.032
    assert report.quote(note, results) == "1.36 times, 4.0 million"
    # A run named like a float is a run, not a number.
    assert report.quote("{{rmc.accuracy / nan.accuracy:.1f}}", {**results, "nan": {"accuracy": 44.665}}) == "2.0"


@pytest.mark.parametrize("expression,message", [
    ("rmc.accuracy / lstm.perplexity", "quotes 'lstm.perplexity'"),
    ("rmc.accuracy / 0", "cannot divide 89.33 by 0.0"),
    ("rmc.name / 2", "cannot divide 'x' by 2.0"),
])
def test_a_ratio_that_cannot_be_worked_out_is_an_error_naming_the_note(expression, message):
    results = {"rmc": {"accuracy": 89.33, "name": "x"}, "lstm": {"accuracy": 65.73}}
    with pytest.raises(ValueError, match=r"the note of x\.json: .*" + re.escape(message)):
        report.quote("{{" + expression + ":.1f}}", results, "the note of x.json")


@pytest.mark.parametrize("path", ["lstm.perplexity", "rmc.curve.5.minutes", "rmc.perplexity.value"])
def test_a_note_quoting_what_its_results_do_not_hold_is_an_error_naming_the_note(path):
    results = {"rmc": {"perplexity": 107.46, "curve": [{"minutes": 3.0}]}}
    with pytest.raises(ValueError, match=r"the note of x\.json: \{\{" + path.replace(".", r"\.")):
        report.quote("{{" + path + "}}", results, "the note of x.json")


def test_a_note_quoting_with_a_format_its_value_does_not_take_is_an_error_naming_the_note():
    with pytest.raises(ValueError, match=r"the note of x\.json: \{\{rmc\.perplexity:,d\}\} cannot format 107\.46"):
        report.quote("{{rmc.perplexity:,d}}", {"rmc": {"perplexity": 107.46}}, "the note of x.json")


def test_a_note_quotes_what_a_slice_of_a_curve_holds():
    curve = [{"round": 0, "errors": [4.0, 1.0], "solved": 17}, {"round": 1, "errors": [2.7, 0.0], "solved": 19},
             {"round": 2, "errors": [4.66, 0.0], "solved": 18}, {"round": 3, "errors": [3.1, 0.0], "solved": 19}]
    results = {"run": {"curve": curve}}
    # rounds 1-3: errors 2.7, 4.66, 3.1 -> lowest 2.7, highest 4.66 (4.7 at .1f), mean 10.46 / 3 = 3.4866...
    assert report.quote("{{run.curve.1..-1.errors.0:range .1f}}%", results) == "2.7-4.7%"
    assert report.quote("{{run.curve.1..3.errors.0:mean .2f}}", results) == "3.49"
    assert report.quote("{{run.curve.1..3.errors.0:min .1f}}-{{run.curve.1..3.errors.0:max}}", results) == "2.7-4.66"
    # solved 19, 18, 19 in rounds 1-3: two rounds of three with at least 19; all four rounds under 20
    assert report.quote("{{run.curve.1..3.solved:count>=19}} of {{run.curve.1..3.solved:len}}", results) == "2 of 3"
    assert report.quote("{{run.curve.0..-1.solved:count<20}}", results) == "4"
    # a range whose ends format alike is one number
    assert report.quote("{{run.curve.1..3.errors.1:range .1f}}", results) == "0.0"
    # items by name: the hops of tasks 2, 3 and 16 are 2.448, 4.803 and 3.948 -> 2.4-4.8
    hops = {"run": {"hops": {"1": 1.0, "2": 2.448, "3": 4.803, "16": 3.948}}}
    assert report.quote("{{run.hops.2|3|16:range .1f}}", hops) == "2.4-4.8"


@pytest.mark.parametrize("expression,message", [
    ("run.curve.0..4.solved:len", "slices '0..4' of a list of 4, which holds no such items"),
    ("run.curve.2..1.solved:len", "slices '2..1' of a list of 4"),
    ("run.curve.0..1.solved:.1f", "its format must say what of its values to quote"),
    ("run.curve.0..1.solved", "its format must say what of its values to quote"),
    ("run.curve.0..1.missing:len", "quotes 'run.curve.0..1.missing', which the results do not hold"),
    ("run.curve.0..1.solved:range ,s", "cannot format [17, 19]"),
    ("run.curve.0..1.errors.0|1:len", "takes items of items ('0|1'): a quote sums up one slice or one set of keys"),
])
def test_a_slice_that_leads_nowhere_or_is_not_summed_up_is_an_error_naming_the_note(expression, message):
    results = {"run": {"curve": [{"solved": 17, "errors": [1.0, 0.0]}, {"solved": 19, "errors": [2.0, 0.0]},
                                 {"solved": 18}, {"solved": 19}]}}
    with pytest.raises(ValueError, match=r"the note of x\.json: .*" + re.escape(message)):
        report.quote("{{" + expression + "}}", results, "the note of x.json")


def test_a_note_quotes_another_results_file_by_name():
    files = {"other.json": {"run": {"curve": [{"error": 5.04}, {"error": 6.96}]}}}
    note = "{{run.error:.1f}}% against {{other.json/run.curve.0..1.error:range .1f}}% there"
    assert report.quote(note, {"run": {"error": 3.6}}, load=files.__getitem__) == "3.6% against 5.0-7.0% there"

    def missing(name):
        raise FileNotFoundError(name)
    with pytest.raises(ValueError, match=r"the note of x\.json: \{\{gone\.json/run\.error\}\} quotes gone\.json, "
                                         r"which is not in bench/results"):
        report.quote("{{gone.json/run.error}}", {}, "the note of x.json", load=missing)


def test_a_run_short_of_its_budget_reads_the_same_on_every_machine(tmp_path, monkeypatch):
    # its workdir lives under the ignored runs/, so whether one is on this disk must not change the page
    run = {"minutes": 43.6, "complete": False}
    results = {"args": {"rmc": {"workdir": "runs/six", "budget_minutes": 240.0}}, "rmc": run}
    monkeypatch.setattr(report, "ROOT", tmp_path)
    assert report._not_finished(results, run) == "unfinished at 44 of 240 min"
    (tmp_path / "runs/six/rmc").mkdir(parents=True)
    assert report._not_finished(results, run) == "unfinished at 44 of 240 min"


def _anchors(text):
    """The anchors of a Markdown page's headings, as the pages' links write them."""
    return {report.Entry("", "", line.lstrip("#").strip()).anchor for line in text.splitlines()
            if line.startswith("#")}


def test_every_link_of_the_generated_pages_leads_somewhere():
    pages = {report.PAGE: report.page(), **report.archive_pages()}
    readme = report.readme(report.README.read_text())
    broken = []
    for path, text in [*pages.items(), (report.README, readme)]:
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith("http"):
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists() and resolved not in pages:
                broken.append(f"{path.name}: {target}")
            elif anchor and resolved.suffix == ".md":
                body = pages.get(resolved) or (readme if resolved == report.README else resolved.read_text())
                if anchor not in _anchors(body):
                    broken.append(f"{path.name}: {target}")
    assert not broken, broken[:20]


def test_notes_are_markdown_files_of_catalogued_results(tmp_path, monkeypatch):
    assert all(entry.note == report.note_path(entry.name).read_text().strip()
               for section in report.CATALOGUE for entry in section.entries if report.note_path(entry.name).is_file())
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "memo_babi.md").write_text("a note")
    (notes / "gone.md").write_text("a note of no file")
    monkeypatch.setattr(report, "NOTES_DIR", notes)
    assert report.check_catalogue() == [
        "bench/notes/gone.md is the note of no catalogued results file: rename or remove it"]


def test_a_compact_seed_entry_shows_the_comparison_with_its_seed_instead_of_its_own_table():
    full = report.render(report.Entry("memo_babi_seed1.json", "memo_babi", "seed 1", seed_of="memo_babi.json"))
    compact = report.render(report.Entry("memo_babi_seed1.json", "memo_babi", "seed 1", seed_of="memo_babi.json",
                                         compact=True))
    assert "| task | error % |" in full and "| task | error % |" not in compact
    assert "Per seed, at" in full and "Per seed, at" in compact
    assert len(compact.splitlines()) < len(full.splitlines()) - 20


def test_a_renamed_results_file_keeps_its_runs_day():
    # A run moved to a new name on a later day is dated by its run (its `date`), else by its file's first commit.
    undated = report.Entry(name="not_committed.json", bench="serving_latency", title="t")
    assert report.day(undated) == report.added_on("not_committed.json")
    assert report.day(report.Entry(name="x.json", bench="serving_latency", title="t", date="2020-01-02")) == \
        "2020-01-02"
