"""Resumable, time-budgeted training for the equal-wall-clock benchmarks.

`train_within_budget` trains a compiled Keras model in rounds of a fixed
number of steps until the training wall-clock (evaluation excluded) reaches a
budget. After every round it evaluates, then saves the model (with its
optimizer state) as `.keras` and the curve as JSON, both atomically; a rerun
with the same workdir loads them and continues where the last completed round
ended, so a budget of an hour can be spent over several sittings.

The clock counts only time spent in `model.fit`: evaluation and saving are
excluded, and so is any time between sittings.
"""

import json
import os
import pathlib
import time

import keras

from bench.results import merge_result
from keras_relmem.training import write_json


def anneal_learning_rate(model, minutes, budget_minutes, initial, final):
    """Set the optimizer's rate on a cosine from `initial` (0 minutes) to `final` (the budget's end).

    The benches' budget is wall-clock, so the schedule runs on training
    minutes rather than steps (Keras' `CosineDecay` evaluated at the spent
    fraction of the budget). Called before each round, it also sets the rate
    of a resumed model. Returns the rate set.
    """
    steps = 10_000
    schedule = keras.optimizers.schedules.CosineDecay(initial, decay_steps=steps, alpha=final / initial)
    rate = float(schedule(int(steps * min(minutes / budget_minutes, 1.0))))
    model.optimizer.learning_rate.assign(rate)
    return rate


def saved_curve(workdir):
    """The curve `train_within_budget` has saved in `workdir` so far: [] for a run not yet started."""
    path = pathlib.Path(workdir) / "curve.json"
    return json.loads(path.read_text()) if path.exists() else []


def _atomic_save(save, path):
    """`save(path)` through a temporary file, so a kill mid-write leaves the last complete file."""
    tmp = path.with_name("tmp_" + path.name)
    save(tmp)
    os.replace(tmp, path)


def train_within_budget(
    build,
    train_round,
    evaluate,
    workdir,
    budget_minutes,
    describe=None,
    on_resume=None,
    on_round=None,
    before_round=None,
    keep_best=None,
    max_rounds=None,
):
    """Train in rounds until `budget_minutes` of training time are spent (or `max_rounds` rounds run).

    Args:
        build: `() -> compiled keras.Model`, used when no saved model exists.
        train_round: `(model, round_index) -> dict` of training metrics; runs
            one round of `model.fit`.
        evaluate: `(model) -> dict` of metrics recorded after each round.
        workdir: folder for `model.keras` and `curve.json`.
        budget_minutes: float, training minutes to reach (over all sittings).
        describe: optional `(entry) -> str` printed after each round.
        on_resume: optional `(model) -> None` called after a saved model is
            loaded (e.g. to reset recurrent state).
        on_round: optional `(curve) -> None` called after each saved round
            (e.g. to record the partial result of an unfinished budget).
        before_round: optional `(model, minutes) -> None` called before each
            round with the training minutes spent so far (e.g. to anneal the
            learning rate on the budget's clock).
        keep_best: optional `(metric, "min" | "max")`: after each round
            whose `metric` is the best of the curve so far, its weights are
            saved as `best.weights.h5` (early stopping's model; read them
            back with `kept_best`).
        max_rounds: optional int, the most rounds the curve may hold (e.g.
            a trial of a few rounds whatever the budget).

    Returns:
        The curve: a list of dicts with `round`, `minutes` (cumulative
        training minutes) and the metrics of `train_round` and `evaluate`.
    """
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    model_path, curve_path = workdir / "model.keras", workdir / "curve.json"
    curve = saved_curve(workdir)
    if curve and model_path.exists():
        model = keras.saving.load_model(model_path)
        if on_resume:
            on_resume(model)
        print(f"resumed {workdir} after round {curve[-1]['round']} "
              f"({curve[-1]['minutes']:.1f} training minutes)", flush=True)
    else:
        # Say where a rerun looks, so that a workdir left on another machine is not silently started over.
        print(f"no saved run in {workdir} (model.keras and curve.json): starting at round 0", flush=True)
        curve, model = [], build()
    minutes = curve[-1]["minutes"] if curve else 0.0
    while minutes < budget_minutes and (max_rounds is None or len(curve) < max_rounds):
        index = len(curve)
        if before_round:
            before_round(model, minutes)
        start = time.perf_counter()
        metrics = train_round(model, index)
        minutes += (time.perf_counter() - start) / 60
        entry = {"round": index, "minutes": round(minutes, 3), **metrics, **evaluate(model)}
        _atomic_save(model.save, model_path)
        curve.append(entry)
        write_json(curve_path, curve)
        if keep_best and entry[keep_best[0]] == _best_value(curve, *keep_best):
            _atomic_save(model.save_weights, workdir / BEST_WEIGHTS)
            write_json(workdir / "best.json", {"round": index, keep_best[0]: entry[keep_best[0]]})
        print(describe(entry) if describe else json.dumps(entry), flush=True)
        if on_round:
            on_round(curve)
    return curve, model


BEST_WEIGHTS = "best.weights.h5"


def best_entry(curve, metric, mode="min"):
    """The entry of `curve` with the lowest (`mode="min"`) or highest (`"max"`) `metric`; None if it is empty."""
    return (min if mode == "min" else max)(curve, key=lambda entry: entry[metric], default=None)


def _best_value(curve, metric, mode):
    return best_entry(curve, metric, mode)[metric]


def kept_best(workdir, curve, metric, mode):
    """The curve entry whose weights `train_within_budget(keep_best=(metric, mode))` kept in `workdir`, or
    None when the curve's best round has none (e.g. a run that started keeping after its best round)."""
    path = pathlib.Path(workdir) / "best.json"
    if not path.exists() or not (pathlib.Path(workdir) / BEST_WEIGHTS).exists():
        return None
    kept = json.loads(path.read_text())["round"]
    entry = next((e for e in curve if e["round"] == kept), None)
    return entry if entry is not None and entry[metric] == _best_value(curve, metric, mode) else None


def record_unfinished(path, key, summary, arguments, budget_minutes):
    """An `on_round` for `train_within_budget`: while the budget is not spent, `{"complete": False,
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
