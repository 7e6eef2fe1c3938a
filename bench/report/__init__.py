"""The results pages, generated from the studies' catalogues and JSON files: reading them (`catalogue`),
quoting their numbers in notes and claims (`quote`) and writing the pages (`pages`). `python -m bench.report`
rewrites the pages; `--check` fails when one is out of date."""
