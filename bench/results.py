"""Results files of the benches: read, and merged into atomically as runs finish."""

import fcntl
import json
import pathlib
import sys

from keras_relmem.training import write_json

RESULTS_DIR = pathlib.Path(__file__).parent / "results"


def read_results(path):
    """The results JSON at `path`, or exit with a message when the bench has not run."""
    path = pathlib.Path(path)
    if not path.exists():
        sys.exit(f"No results yet: {path}. Run the bench first.")
    return json.loads(path.read_text())


def record_model_result(path, key, model, result, arguments):
    """MEMO's figures into `results[key]` itself, the EMN-style baseline's into `results[key]["EMN"]`."""
    if model == "memo":
        merge_result(path, key, result, arguments, update=True)
    else:
        merge_result(path, (key, "EMN"), result, arguments)


def merge_result(path, key, value, arguments, update=False):
    """Set `results[key] = value` in the JSON file at `path` (atomically), keeping
    the other keys, and record the arguments used under `args[key]`.

    `key` may be a tuple naming a nested entry: `("4", "EMN")` sets
    `results["4"]["EMN"]` and records the arguments under `args["4/EMN"]`.
    With `update`, a dict `value` updates the entry's keys instead of replacing
    it (so `results["4"]` can hold one model's figures and another's entry).
    `arguments=None` records none (a file whose header holds its run's arguments).
    A callable `value` is given the entry as the file holds it now (or None)
    and returns the new one: runs of the same table finishing side by side
    then add to each other's work instead of overwriting it."""
    keys = (key,) if isinstance(key, str) else tuple(key)

    def merge(results):
        entry = results
        for name in keys[:-1]:
            entry = entry.setdefault(name, {})
        if callable(value):
            entry[keys[-1]] = value(entry.get(keys[-1]))
        elif update:
            entry.setdefault(keys[-1], {}).update(value)
        else:
            entry[keys[-1]] = value
        if arguments is not None:
            results.setdefault("args", {})["/".join(keys)] = arguments

    return update_results(path, merge)


def update_results(path, change):
    """Apply `change(results)` (which edits the dict in place) to the JSON file at `path`, atomically and
    one writer at a time, and return the new contents: for a file whose summary is computed from its runs."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Two models timed side by side may finish together: one writer at a time.
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(path.read_text()) if path.exists() else {}
        change(results)
        write_json(path, results)
    return results


def cell(value, spec=".2f"):
    """A table cell: `value` formatted by `spec`, or empty when there is none."""
    return "" if value is None else format(value, spec)
