"""Benchmarks and reproduction runs, each a command: `python -m bench.<name> --help`.

Every bench prints a table next to the paper's figures and writes the same as
JSON under `bench/results/`; `python -m bench.report` turns those files into
`docs/results.md` and the README's results summary. Long runs are resumable.

The benches that measure a library recipe train it with `kr.train` (a config of
`keras_relmem.configs`, flags parsed as its `relmem-...` command parses them) and
keep only their tables, pictures and extra measurements. Shared pieces:
`bench.cli` (flags, thread limits, the command dispatch, `kr.train` with the
result recorded as it goes), `bench.results` (reading and merging results
files), `bench.budget` (runs by name and curve pictures) and `bench.timing`
(steady-state step timing).
"""
