"""bench.lm (PTB): the learning-rate schedule and one tiny resumable run with an LSTM recipe of its own."""

import json

import pytest

from bench import lm as ptb_lm
from keras_relmem.data import lm as lm_data


def test_zaremba_schedule_by_hand():
    # Zaremba et al. 2014, small model: rate 1 for 4 epochs, then halved after every epoch.
    rates = [ptb_lm.learning_rate_at(e, 1.0, 0.5, 4) for e in range(7)]
    assert rates == [1.0, 1.0, 1.0, 1.0, 0.5, 0.25, 0.125]
    assert ptb_lm.learning_rate_at(3.9, 1.0, 0.5, 4) == 1.0
    assert [ptb_lm.learning_rate_at(e, 1e-3, 1.0, 0) for e in range(3)] == [1e-3] * 3  # no decay


@pytest.mark.slow  # reads PTB and trains; the rate schedule and the table are tested without data here
def test_a_named_lstm_recipe_runs_and_lands_under_its_name(tmp_path):
    try:
        lm_data.load_corpus("ptb")
    except Exception as error:  # noqa: BLE001 - no local copy of PTB
        pytest.skip(f"PTB not available: {error}")
    results = tmp_path / "ptb.json"
    argv = ["--model", "lstm", "--name", "lstm_sgd", "--optimizer", "sgd", "--learning-rate", "1.0",
            "--lr-decay", "0.5", "--decay-after", "4", "--clipnorm", "0", "--global-clipnorm", "5",
            "--batch-size", "20", "--bptt", "20",
            "--units", "8", "--num-layers", "2", "--init-scale", "0.1", "--untied", "--budget-minutes", "0.01",
            "--batches-per-round", "2", "--workdir", str(tmp_path / "runs"),
            "--results", str(results), "--keep-best"]
    ptb_lm.main(argv)
    run = json.loads(results.read_text())["lstm_sgd"]
    # early stopping's model: the weights of the round with the lowest validation perplexity, tested
    best = min(run["curve"], key=lambda e: e["val_perplexity"])
    assert run["best_val_perplexity"] == best["val_perplexity"] and run["best_minutes"] == best["minutes"]
    assert 1 < run["best_perplexity"] < 20_000
    assert json.loads(results.read_text())["args"]["lstm_sgd"]["global_clipnorm"] == 5.0
    assert run["complete"] and run["curve"] and 1 < run["perplexity"] < 20_000
    assert "| LSTM_SGD | 0 | " in ptb_lm.markdown(json.loads(results.read_text()))
    with pytest.raises(SystemExit, match="LSTM settings"):
        ptb_lm.main(["--model", "rmc", "--units", "8", "--results", str(results)])


def test_the_table_gives_each_runs_lowest_validation_perplexity_and_its_minute():
    curve = [{"minutes": 1.0, "val_perplexity": 300.0}, {"minutes": 46.2, "val_perplexity": 112.34},
             {"minutes": 120.0, "val_perplexity": 155.16}]
    results = {"rmc": {"complete": True, "perplexity": 144.38, "val_perplexity": 155.16, "minutes": 120.0,
                       "epochs": 10.3, "tokens": 9_600_000, "curve": curve},
               "args": {"rmc": {"seed": 1}}}
    assert "| RMC | 1 | 144.4 | 155.2 | 112.3 (46.2) | 120.0 | 10.30 | 9,600,000 |" in ptb_lm.markdown(results)
