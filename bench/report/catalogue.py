"""The studies' catalogues and results files: what `bench/<study>/catalogue.toml` lists, read and checked.

Each study folder holds its runner, `catalogue.toml` (the study's question, its section of the results page,
its claims on the README's table and an entry per results file), `results/` (JSON and pictures) and `notes/`
(an entry's story, Markdown, `notes/<file without .json>.md`). A results file no catalogue lists, or a listed
file that is missing, is an error, so the pages and the folders cannot drift apart.
"""

import dataclasses
import functools
import json
import pathlib
import re

import tomllib

from bench import STUDIES

BENCH = pathlib.Path(__file__).parents[1]
ROOT = BENCH.parent
STATUSES = ("reproduced", "close", "not reproduced on this hardware", "unfinished")


@dataclasses.dataclass
class Entry:
    """One results file: `name` in its study's results/, the module that wrote it, what it shows and why."""

    name: str
    study: str
    title: str
    bench: str = ""  # the module that wrote it, relative to bench/ (default: the study's runner)
    note: str = ""
    render: str = "markdown"  # the module's function that turns the JSON into a table
    command: str = ""  # for files that do not record their arguments
    headline: bool = False
    picture: str = ""
    seed_of: str = ""  # the results file of the same recipe with another seed: compared at equal examples
    compact: bool = False  # with seed_of: the comparison with that seed only, not this run's own table
    date: str = ""  # the day of the run, for a file whose first commit under its name is not (one renamed)

    def __post_init__(self):
        self.bench = self.bench or self.study

    @property
    def anchor(self):
        return anchor(self.title)

    @property
    def path(self):
        """The results file, relative to the repository."""
        return f"bench/{self.study}/results/{self.name}"


@dataclasses.dataclass
class Claim:
    """One row of the README's results table: a paper's claim, its figure, ours (a quote of the results
    files, median over the seeds it names), the seeds counted, a status, and the results file whose table
    holds the details."""

    claim: str
    paper: str
    ours: str
    seeds: str
    status: str  # one of STATUSES
    entry: str


@dataclasses.dataclass
class Study:
    """A study's catalogue: the question it answers, its section of the results page (the paper), the
    section's introduction (given once per section), the static archive page of its earlier experiments,
    its claims and its entries."""

    name: str
    question: str
    section: str
    archive: str
    claims: list
    entries: list
    intro: str = ""

    @property
    def folder(self):
        return BENCH / self.name


def anchor(title):
    # GitHub's rule: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def note_path(entry):
    """Where the note of `entry` is kept: `bench/<study>/notes/<name without .json>.md`."""
    return BENCH / entry.study / "notes" / f"{entry.name.removesuffix('.json')}.md"


def load_study(name, folder=None):
    """`bench/<name>/catalogue.toml` as a `Study`, each entry with its note."""
    path = (folder or BENCH / name) / "catalogue.toml"
    fields = tomllib.loads(path.read_text())
    claims = [Claim(**claim) for claim in fields.pop("claim", [])]
    for claim in claims:
        if claim.status not in STATUSES:
            raise ValueError(f"{path.relative_to(ROOT)}: the claim {claim.claim!r} has status {claim.status!r}, "
                             f"not one of {STATUSES}")
    entries = []
    for entry in fields.pop("entry", []):
        entry = Entry(study=name, **entry)
        note = note_path(entry)
        if not entry.note and note.is_file():
            entry.note = note.read_text().strip()
        entries.append(entry)
    return Study(name=name, claims=claims, entries=entries, **fields)


@functools.cache
def studies():
    """Every study's catalogue, in `bench.STUDIES`' order (the README's table and the results page's)."""
    return [load_study(name) for name in STUDIES]


def entries():
    return [entry for study in studies() for entry in study.entries]


def claims():
    return [claim for study in studies() for claim in study.claims]


def entry(name):
    """The catalogue entry of results file `name` (names are unique across the studies)."""
    found = [e for e in entries() if e.name == name]
    if not found:
        raise FileNotFoundError(f"no study's catalogue lists {name}")
    return found[0]


def load(name):
    """The JSON of results file `name`, wherever its study keeps it."""
    return json.loads((ROOT / entry(name).path).read_text())


def check():
    """Every results file is catalogued, every catalogued file exists and every note has its entry: the
    errors, or []."""
    errors = []
    for study in studies():
        results, where = study.folder / "results", f"bench/{study.name}"
        listed = {e.name for e in study.entries} | {e.picture for e in study.entries if e.picture}
        present = {p.name for p in results.iterdir() if p.suffix in (".json", ".png")} if results.is_dir() else set()
        errors += [f"{where}/results/{name} is in no table: add it to {where}/catalogue.toml or remove it"
                   for name in sorted(present - listed)]
        errors += [f"{where}/catalogue.toml lists {where}/results/{name}, which does not exist"
                   for name in sorted(listed - present)]
        notes = {note_path(e).name for e in study.entries}
        errors += [f"{where}/notes/{path.name} is the note of no catalogued results file: rename or remove it"
                   for path in sorted((study.folder / "notes").glob("*.md")) if path.name not in notes]
    names = [e.name for e in entries()]
    errors += [f"{name} is in more than one study's catalogue" for name in sorted({n for n in names
                                                                                   if names.count(n) > 1})]
    return errors
