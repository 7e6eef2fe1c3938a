"""Benchmarks and reproduction runs, each a command: `python -m bench.<name> --help`.

Every bench prints a table next to the paper's figures and writes the same as
JSON under `bench/results/`; `python -m bench.report` turns those files into
`docs/results.md` and the README's results summary. Long runs are resumable.

Shared pieces: `bench.cli` (flags, thread limits, the command dispatch),
`bench.results` (reading and merging results files), `bench.budget` (unfinished
runs and curve pictures over `keras_relmem.training.train_in_rounds`), `bench.memo` (MEMO's halting flags and batched
inference) and `bench.timing` (steady-state step timing).
"""
