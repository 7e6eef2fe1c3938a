"""What the equal-wall-clock benchmarks add to `keras_relmem.training.train_in_rounds`: unfinished runs
recorded as they go, and every model's curve in one picture.
"""

import pathlib

from bench.results import merge_result


def record_unfinished(path, key, summary, arguments, budget_minutes):
    """An `on_round` for `keras_relmem.training.train_in_rounds`: while the budget is not spent, `{"complete": False,
    **summary(curve)}` goes into `results[key]` of the file at `path`, so a stopped run shows its progress."""
    def record(curve):
        if curve[-1]["minutes"] < budget_minutes:
            merge_result(path, key, {"complete": False, **summary(curve)}, arguments)

    return record


def run_names(results):
    """The runs of a results file by name (not its "args"): the RMC's first, then the others by name."""
    return sorted((n for n in results if n != "args"), key=lambda n: (not n.startswith("rmc"), n))


def draw_model_curves(results, metric, label, title, results_path, dashed=None, **kwargs):
    """Every run's curve of `metric` (the RMC's, the LSTM's, ...) against training minutes, beside the results
    file (PNG); `dashed={run name: (metric, legend suffix)}` adds a second metric of those runs, dashed."""
    from keras_relmem.viz import budget_curves

    return budget_curves({name.upper(): results[name]["curve"] for name in run_names(results)
                          if "curve" in results[name]},
                         metric, label, title, pathlib.Path(results_path).with_suffix(".png"),
                         dashed={name.upper(): d for name, d in (dashed or {}).items()}, **kwargs)
