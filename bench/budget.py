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
import sys
import time

import keras

from keras_relmem.training import write_json


def limit_threads(threads):
    """Run TensorFlow on `threads` cores (inter- and intra-op pools), e.g. one
    core per model so that two models can be timed side by side."""
    if threads and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_inter_op_parallelism_threads(threads)
        tf.config.threading.set_intra_op_parallelism_threads(threads)


# id(model) -> compiled forward; the function holds its model, so an id is never reused
# (a bench evaluates one or two models per process)
_HOPS_FORWARD = {}


def hops_forward(model):
    """`model(x, return_hops=True)` on a dict of NumPy batches, compiled once per model on TensorFlow.

    TensorFlow gets a `tf.function` (eager MEMO is slow there), traced once per
    model rather than once per evaluation round; JAX and torch call the model
    eagerly, so the evaluation runs where no TensorFlow is installed.
    """
    if keras.backend.backend() != "tensorflow":
        return lambda x: model(x, return_hops=True)
    if id(model) not in _HOPS_FORWARD:
        import tensorflow as tf

        forward = tf.function(lambda x: model(x, return_hops=True), reduce_retracing=True)
        _HOPS_FORWARD[id(model)] = lambda x: forward({k: tf.constant(v) for k, v in x.items()})
    return _HOPS_FORWARD[id(model)]


def add_run_arguments(parser, workdir, results, report_help="print the table from the JSON"):
    """The options every budgeted bench shares: --threads, --seed, --workdir, --results, --report."""
    parser.add_argument("--threads", type=int, default=0, help="cores for TensorFlow (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=workdir, help="saved models and curves, one folder per run")
    parser.add_argument("--results", default=str(results))
    parser.add_argument("--report", action="store_true", help=report_help)
    return parser


def add_halting_arguments(parser):
    """MEMO's REINFORCE options the benches share: --answer-loss, --gamma, --beta, --halting-inputs.

    The defaults are the ones that kept the halting policy from collapsing to
    one hop on joint bAbI and on PAI (MEMOClassifier's own defaults,
    "visited" and 0.9, did collapse it: README, "MEMO on joint bAbI").
    """
    parser.add_argument("--answer-loss", choices=("all", "visited"), default="all",
                        help="hops whose answers the cross-entropy trains (MEMOClassifier's answer_loss); "
                             "'visited' let the policy collapse to one hop")
    parser.add_argument("--gamma", type=float, default=1.0,
                        help="REINFORCE discount (MEMOClassifier's default 0.9 is a 10%%-per-hop cost that made "
                             "one hop pay on the easy queries); set on a resumed model too")
    parser.add_argument("--beta", type=float, default=0.01,
                        help="weight of the expected-hops loss (MEMOClassifier's default 0.01): a cost of 0.01 a "
                             "hop on every query, which can outweigh a hard query type's gain when the policy "
                             "cannot tell the types apart; set on a resumed model too")
    parser.add_argument("--halting-inputs", choices=("distance", "distance+entropy"), default="distance",
                        help="what the halting network reads each hop with the hop index (MEMO's halting_inputs): "
                             "the paper's attention distance, or that and the entropy of the hop's answer; "
                             "fixed when the model is built")
    return parser


def halting_settings(args):
    """The MEMOClassifier settings the halting flags give, for building a MEMO or resuming one."""
    return {"answer_loss": args.answer_loss, "gamma": float(args.gamma), "beta": float(args.beta),
            "halting_inputs": args.halting_inputs}


def apply_halting_arguments(model, args):
    """Give a (resumed) MEMO the run's --answer-loss, --gamma and --beta (and check --halting-inputs).

    A `.keras` file brings back the settings it was saved with; the flags say
    how training goes on from here (e.g. a run resumed with another gamma).
    Both are read when the training step is traced, so call this before the
    first `fit` of a sitting. Models without a halting policy are left alone.
    """
    memo = getattr(model, "memo", None)
    if getattr(memo, "halting", None) == "reinforce":
        settings = halting_settings(args)
        inputs = settings.pop("halting_inputs")
        if memo.halting_inputs != inputs:  # the policy's input size is fixed by its weights
            raise SystemExit(f"--halting-inputs {inputs}: the saved MEMO in this --workdir was built with "
                             f"{memo.halting_inputs!r}; use a new --workdir for another halting input.")
        for name, value in settings.items():
            setattr(model, name, value)
    return model


def hold_halting_until(model, index, warmup_rounds):
    """MEMO's halting network learns from round `warmup_rounds` on (rate 0 before, its own rate after).

    Until MEMO can answer, no number of hops earns a reward and the hop cost
    alone would teach the policy to stop after the first hop. A no-op for
    models without a REINFORCE halting network.
    """
    if getattr(model, "halting_optimizer", None) is not None:
        rate = 0.0 if index < warmup_rounds else model.halting_learning_rate
        model.halting_optimizer.learning_rate.assign(rate)


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


def warm_start_memo(model, path):
    """Copy every weight but the halting network's from the saved MEMOClassifier at `path` into `model`.

    A trained MEMO with a fresh halting policy, e.g. to try other halting
    inputs on a model whose answers are already learned. Both models must be
    built; weights are matched by path (`.../memo/keys/kernel`) and shape.
    Returns the number of weights copied.
    """
    source = keras.saving.load_model(path)
    saved = {v.path: v for v in source.weights}
    copied = 0
    for variable in model.weights:
        if "halting_policy" in variable.path:
            continue
        if variable.path not in saved or tuple(saved[variable.path].shape) != tuple(variable.shape):
            raise SystemExit(f"--warm-start {path}: no weight {variable.path} of shape {tuple(variable.shape)} "
                             "there; start from a model with the same architecture flags.")
        variable.assign(saved[variable.path])
        copied += 1
    return copied


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


def _atomic_save(model, path):
    tmp = path.with_name("tmp_" + path.name)
    model.save(tmp)
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
):
    """Train in rounds until `budget_minutes` of training time are spent.

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

    Returns:
        The curve: a list of dicts with `round`, `minutes` (cumulative
        training minutes) and the metrics of `train_round` and `evaluate`.
    """
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    model_path, curve_path = workdir / "model.keras", workdir / "curve.json"
    curve = json.loads(curve_path.read_text()) if curve_path.exists() else []
    if curve and model_path.exists():
        model = keras.saving.load_model(model_path)
        if on_resume:
            on_resume(model)
        print(f"resumed {workdir} after round {curve[-1]['round']} "
              f"({curve[-1]['minutes']:.1f} training minutes)", flush=True)
    else:
        curve, model = [], build()
    minutes = curve[-1]["minutes"] if curve else 0.0
    while minutes < budget_minutes:
        index = len(curve)
        if before_round:
            before_round(model, minutes)
        start = time.perf_counter()
        metrics = train_round(model, index)
        minutes += (time.perf_counter() - start) / 60
        entry = {"round": index, "minutes": round(minutes, 3), **metrics, **evaluate(model)}
        _atomic_save(model, model_path)
        curve.append(entry)
        write_json(curve_path, curve)
        print(describe(entry) if describe else json.dumps(entry), flush=True)
        if on_round:
            on_round(curve)
    return curve, model


def merge_result(path, key, value, arguments, update=False):
    """Set `results[key] = value` in the JSON file at `path` (atomically), keeping
    the other keys, and record the arguments used under `args[key]`.

    `key` may be a tuple naming a nested entry: `("4", "EMN")` sets
    `results["4"]["EMN"]` and records the arguments under `args["4/EMN"]`.
    With `update`, a dict `value` updates the entry's keys instead of replacing
    it (so `results["4"]` can hold one model's figures and another's entry).
    A callable `value` is given the entry as the file holds it now (or None)
    and returns the new one: runs of the same table finishing side by side
    then add to each other's work instead of overwriting it."""
    import fcntl

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Two models timed side by side may finish together: one writer at a time.
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(path.read_text()) if path.exists() else {}
        keys = (key,) if isinstance(key, str) else tuple(key)
        entry = results
        for name in keys[:-1]:
            entry = entry.setdefault(name, {})
        if callable(value):
            entry[keys[-1]] = value(entry.get(keys[-1]))
        elif update:
            entry.setdefault(keys[-1], {}).update(value)
        else:
            entry[keys[-1]] = value
        results.setdefault("args", {})["/".join(keys)] = arguments
        write_json(path, results)
    return results
