"""What the equal-wall-clock benchmarks share when they report: their runs by name, and every model's curve in
one picture."""

import pathlib


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
