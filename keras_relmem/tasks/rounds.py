"""What the trainers that run in rounds under a wall-clock budget share: their results file, written as the
rounds go (an unfinished budget shows its progress; the complete result is written by the run lifecycle,
`keras_relmem.runs`), and the run's `on_round` hook."""

from keras_relmem.training import write_json


def recorder(config, run, summary):
    """An `on_round` for `keras_relmem.training.train_in_rounds`: while the budget is not spent, the results
    file gets `{"complete": False, **summary(curve), "args": ...}` and `run.on_round` (if any) is called with
    that result."""
    args = run.recorded(config)

    def on_round(curve):
        if curve[-1]["minutes"] < config.budget_minutes:
            result = {"complete": False, **summary(curve)}
            write_json(run.results_path, {**result, "args": args})
            if run.on_round:
                run.on_round(result)

    return on_round
