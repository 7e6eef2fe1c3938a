"""The studies: one folder per question the project measures, each a command (`python -m bench.<study>`).

A study's folder holds its runner (a thin call of the library's training API, `kr.train`, with the study's
recipes, seeds and budgets; other commands as modules beside it), `catalogue.toml` (its question, its claims
on the README's table, an entry per results file), `results/`, `notes/` and its generated page, `README.md`.
`bench.common` holds what the runners share (flags, results files, timing) and `bench.report` writes the
pages from the JSON. `python -m bench` lists the studies; `python -m bench <study> ...` runs one.
"""

import pathlib

# The studies in the order of the README's results table and the results page.
STUDIES = ("entnet_babi", "memo_babi", "memo_pai", "memo_shortest_path", "nth_farthest", "lte", "lm", "serving")


def study_commands(study):
    """The study's commands: its runner, then each module beside it that has a `main`."""
    # read, not imported: a runner imports its backend, and listing its commands needs none
    folder = pathlib.Path(__file__).with_name(study)
    others = [path.stem for path in sorted(folder.glob("*.py"))
              if not path.stem.startswith("_") and "\ndef main(" in path.read_text()]
    return [f"python -m bench.{study}"] + [f"python -m bench.{study}.{name}" for name in others]
