"""The studies: one folder per question the project measures, each a command (`python -m bench.<study>`).

A study's folder holds its runner (a thin call of the library's training API, `kr.train`, with the study's
recipes, seeds and budgets; other commands as modules beside it), `catalogue.toml` (its question, its claims
on the README's table, an entry per results file), `results/`, `notes/` and its generated page, `README.md`.
`bench.common` holds what the runners share (flags, results files, timing) and `bench.report` writes the
pages from the JSON. `python -m bench` lists the studies; `python -m bench <study> ...` runs one.
"""

# The studies in the order of the README's results table and the results page.
STUDIES = ("entnet_babi", "memo_babi", "memo_pai", "memo_shortest_path", "nth_farthest", "lte", "lm", "serving")
