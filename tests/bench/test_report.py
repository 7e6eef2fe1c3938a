"""The results pages and the README's results table are what the studies' JSON files give
(bench/<study>/results/), and every results file is catalogued by its study."""

import re

import pytest

from bench import STUDIES
from bench.report import catalogue, pages
from bench.report.quote import quote


def test_every_results_file_is_catalogued_and_every_entry_exists():
    assert catalogue.check() == []
    assert [study.name for study in catalogue.studies()] == list(STUDIES)


@pytest.mark.results
def test_committed_pages_match_the_json():
    """Fails when a results file changed (or a page was edited by hand) without `python -m bench.report`."""
    for path, text in pages.wanted().items():
        assert path.exists() and path.read_text() == text, f"{path} is stale: run python -m bench.report"


def _study(tmp_path, monkeypatch, files=("a.json", "a.png"), notes=("a.md",)):
    """A study folder `toy` under a stand-in bench/: one entry, a.json with its picture, and its note."""
    folder = tmp_path / "toy"
    (folder / "results").mkdir(parents=True)
    (folder / "notes").mkdir()
    (folder / "catalogue.toml").write_text(
        'question = "Q?"\nsection = "S"\narchive = "docs/archive/s.md"\n\n'
        '[[entry]]\nname = "a.json"\ntitle = "A"\npicture = "a.png"\n')
    for name in files:
        (folder / "results" / name).write_text("{}")
    for name in notes:
        (folder / "notes" / name).write_text("the story of a")
    monkeypatch.setattr(catalogue, "BENCH", tmp_path)
    monkeypatch.setattr(catalogue, "ROOT", tmp_path.parent)
    study = catalogue.load_study("toy")
    monkeypatch.setattr(catalogue, "studies", lambda: [study])
    return study


def test_a_study_reads_its_entries_and_their_notes(tmp_path, monkeypatch):
    study = _study(tmp_path, monkeypatch)
    (entry,) = study.entries
    assert (study.question, study.section, entry.bench, entry.note) == ("Q?", "S", "toy", "the story of a")
    assert entry.path == "bench/toy/results/a.json" and catalogue.check() == []


def test_an_uncatalogued_or_missing_file_and_a_stray_note_are_errors(tmp_path, monkeypatch):
    _study(tmp_path, monkeypatch, files=("a.json", "orphan.json"), notes=("a.md", "gone.md"))
    assert catalogue.check() == [
        "bench/toy/results/orphan.json is in no table: add it to bench/toy/catalogue.toml or remove it",
        "bench/toy/catalogue.toml lists bench/toy/results/a.png, which does not exist",
        "bench/toy/notes/gone.md is the note of no catalogued results file: rename or remove it"]


def test_a_claim_with_an_unknown_status_is_an_error_naming_its_catalogue(tmp_path, monkeypatch):
    _study(tmp_path, monkeypatch)
    path = tmp_path / "toy" / "catalogue.toml"
    path.write_text(path.read_text() + '\n[[claim]]\nclaim = "c"\npaper = "p"\nours = "o"\nseeds = "1"\n'
                    'status = "great"\nentry = "a.json"\n')
    with pytest.raises(ValueError, match=r"toy/catalogue.toml: the claim 'c' has status 'great'"):
        catalogue.load_study("toy")


@pytest.mark.parametrize("entry", catalogue.entries(),
                         ids=lambda e: e.name)
def test_each_command_parses_back_to_the_recorded_arguments(entry):
    """The page's command, run through its bench's parser, gives the arguments the file recorded."""
    import importlib

    module = importlib.import_module(f"bench.{entry.bench}")
    if entry.command:
        pytest.skip("a file that records no arguments names its command in the catalogue")
    results = catalogue.load(entry.name)
    recorded_args = results["args"]
    runs = recorded_args.values() if all(isinstance(v, dict) for v in recorded_args.values()) else [recorded_args]
    for recorded in runs:
        if "command" in recorded:  # written by the task script: its own command, parsed as it parses it
            parsed = _task_script_arguments(recorded["command"])
        else:
            command = pages.command_for(entry.bench, recorded).split()[3:]  # after `python -m bench.x`
            parsed = vars(module.parse_args(command))
        for key, value in recorded.items():
            if key in pages.not_in_command(entry.bench) or key not in parsed:
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
    assert pages.command_for("entnet_babi", recorded) == (
        "python -m bench.entnet_babi --schedule cyclic --tied-keys --weight-decay 0.02 --no-jit-compile --threads 1")
    # MEMO's --tasks is what one model trains on, not which units of a table ran: its command keeps it
    assert pages.command_for("memo_babi", {"tasks": [16], "budget_minutes": 20.0, "workdir": "runs/x"}) == (
        "python -m bench.memo_babi --tasks 16 --budget-minutes 20")


def test_runs_that_differ_only_in_seed_or_task_are_one_loop_on_the_page():
    from types import SimpleNamespace

    entry = SimpleNamespace(command="", bench="lte", path="x.json")
    runs = {f"r{i}": {"task": task, "model": "rmc", "seed": seed, "budget_minutes": minutes}
            for i, (task, seed, minutes) in enumerate([("program", 2, 45.0), ("program", 0, 45.0), ("program", 1, 45.0),
                                                       ("copy", 0, 6.0), ("reverse", 0, 6.0), ("add", 0, 50.0)])}
    assert pages.commands(entry, {"args": runs}) == [
        # seed 0 is the default, absent from its command; the seeds in order, whichever ran first
        "for seed in 0 1 2; do python -m bench.lte --seed $seed --budget-minutes 45 --results x.json; done",
        "for task in copy reverse; do python -m bench.lte --task $task --budget-minutes 6 --results x.json; done",
        "python -m bench.lte --task add --budget-minutes 50 --results x.json"]


def test_a_note_quotes_numbers_from_its_results_file():
    results = {"rmc": {"perplexity": 107.46, "curve": [{"minutes": 3.0}, {"minutes": 90.15}]}}
    note = "test {{rmc.perplexity:.1f}} at minute {{rmc.curve.-1.minutes:.0f}}; braces {kept} as they are"
    assert quote(note, results) == "test 107.5 at minute 90; braces {kept} as they are"


def test_a_note_quotes_a_ratio_of_two_numbers_or_of_a_number_and_a_constant():
    results = {"rmc": {"accuracy": 89.33, "examples": 4032000}, "lstm": {"accuracy": 65.73}}
    note = "{{rmc.accuracy / lstm.accuracy:.2f}} times, {{rmc.examples / 1e6:.1f}} million"
    # 89.33 / 65.73 = 1.359..., 4,032,000 / 1,000,000 = 4.032
    assert quote(note, results) == "1.36 times, 4.0 million"
    # A run named like a float is a run, not a number.
    assert quote("{{rmc.accuracy / nan.accuracy:.1f}}", {**results, "nan": {"accuracy": 44.665}}) == "2.0"


@pytest.mark.parametrize("expression,message", [
    ("rmc.accuracy / lstm.perplexity", "quotes 'lstm.perplexity'"),
    ("rmc.accuracy / 0", "cannot divide 89.33 by 0.0"),
    ("rmc.name / 2", "cannot divide 'x' by 2.0"),
])
def test_a_ratio_that_cannot_be_worked_out_is_an_error_naming_the_note(expression, message):
    results = {"rmc": {"accuracy": 89.33, "name": "x"}, "lstm": {"accuracy": 65.73}}
    with pytest.raises(ValueError, match=r"the note of x\.json: .*" + re.escape(message)):
        quote("{{" + expression + ":.1f}}", results, "the note of x.json")


@pytest.mark.parametrize("path", ["lstm.perplexity", "rmc.curve.5.minutes", "rmc.perplexity.value"])
def test_a_note_quoting_what_its_results_do_not_hold_is_an_error_naming_the_note(path):
    results = {"rmc": {"perplexity": 107.46, "curve": [{"minutes": 3.0}]}}
    with pytest.raises(ValueError, match=r"the note of x\.json: \{\{" + path.replace(".", r"\.")):
        quote("{{" + path + "}}", results, "the note of x.json")


def test_a_note_quoting_with_a_format_its_value_does_not_take_is_an_error_naming_the_note():
    with pytest.raises(ValueError, match=r"the note of x\.json: \{\{rmc\.perplexity:,d\}\} cannot format 107\.46"):
        quote("{{rmc.perplexity:,d}}", {"rmc": {"perplexity": 107.46}}, "the note of x.json")


def test_a_note_quotes_what_a_slice_of_a_curve_holds():
    curve = [{"round": 0, "errors": [4.0, 1.0], "solved": 17}, {"round": 1, "errors": [2.7, 0.0], "solved": 19},
             {"round": 2, "errors": [4.66, 0.0], "solved": 18}, {"round": 3, "errors": [3.1, 0.0], "solved": 19}]
    results = {"run": {"curve": curve}}
    # rounds 1-3: errors 2.7, 4.66, 3.1 -> lowest 2.7, highest 4.66 (4.7 at .1f), mean 10.46 / 3 = 3.4866...
    assert quote("{{run.curve.1..-1.errors.0:range .1f}}%", results) == "2.7-4.7%"
    assert quote("{{run.curve.1..3.errors.0:mean .2f}}", results) == "3.49"
    assert quote("{{run.curve.1..3.errors.0:min .1f}}-{{run.curve.1..3.errors.0:max}}", results) == "2.7-4.66"
    # solved 19, 18, 19 in rounds 1-3: two rounds of three with at least 19; all four rounds under 20
    assert quote("{{run.curve.1..3.solved:count>=19}} of {{run.curve.1..3.solved:len}}", results) == "2 of 3"
    assert quote("{{run.curve.0..-1.solved:count<20}}", results) == "4"
    # a range whose ends format alike is one number
    assert quote("{{run.curve.1..3.errors.1:range .1f}}", results) == "0.0"
    # items by name: the hops of tasks 2, 3 and 16 are 2.448, 4.803 and 3.948 -> 2.4-4.8
    hops = {"run": {"hops": {"1": 1.0, "2": 2.448, "3": 4.803, "16": 3.948}}}
    assert quote("{{run.hops.2|3|16:range .1f}}", hops) == "2.4-4.8"


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
        quote("{{" + expression + "}}", results, "the note of x.json")


def test_a_note_quotes_another_results_file_by_name():
    files = {"other.json": {"run": {"curve": [{"error": 5.04}, {"error": 6.96}]}}}
    note = "{{run.error:.1f}}% against {{other.json/run.curve.0..1.error:range .1f}}% there"
    assert quote(note, {"run": {"error": 3.6}}, load=files.__getitem__) == "3.6% against 5.0-7.0% there"

    def missing(name):
        raise FileNotFoundError(name)
    with pytest.raises(ValueError, match=r"the note of x\.json: \{\{gone\.json/run\.error\}\} quotes gone\.json, "
                                         r"which is in no study's results"):
        quote("{{gone.json/run.error}}", {}, "the note of x.json", load=missing)


def _anchors(text):
    """The anchors of a Markdown page's headings, as the pages' links write them."""
    return {catalogue.anchor(line.lstrip("#").strip()) for line in text.splitlines() if line.startswith("#")}


def test_every_link_of_the_generated_pages_leads_somewhere():
    generated = pages.wanted()
    broken = []
    for path, text in generated.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith("http"):
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists() and resolved not in generated:
                broken.append(f"{path.name}: {target}")
            elif anchor and resolved.suffix == ".md":
                body = generated.get(resolved) or resolved.read_text()
                if anchor not in _anchors(body):
                    broken.append(f"{path.name}: {target}")
    assert not broken, broken[:20]


def test_a_study_page_lists_every_entry_marked_and_links_its_archive():
    study = next(s for s in catalogue.studies() if s.name == "nth_farthest")
    page = pages.study_page(study)
    assert page.startswith(f"# nth_farthest: {study.question}")
    for entry in study.entries:
        assert f"[{entry.title}](#{entry.anchor})" in page and f"](results/{entry.name})" in page
    assert "- " in page and ", headline: [Nth Farthest](#nth-farthest)" in page
    assert "](../../docs/archive/relational-memory-core-santoro-et-al-2018.md)" in page


def test_a_compact_seed_entry_shows_the_comparison_with_its_seed_instead_of_its_own_table():
    seed1 = dict(name="memo_babi_seed1.json", study="memo_babi", title="seed 1", seed_of="memo_babi.json")
    full, compact = (pages.render(catalogue.Entry(**seed1, compact=c)) for c in (False, True))
    assert "| task | error % |" in full and "| task | error % |" not in compact
    assert "Per seed, at" in full and "Per seed, at" in compact
    assert len(compact.splitlines()) < len(full.splitlines()) - 20


def test_a_results_file_is_dated_by_its_first_commit_under_any_name():
    # the studies' files were moved into their folders on a later day than their runs: git follows the move
    entry = catalogue.entry("memo_babi.json")
    assert pages.day(entry) < "2026-12-06"
    assert pages.day(catalogue.Entry(name="x.json", study="lte", title="t", date="2020-01-02")) == "2020-01-02"
