"""Checkpoints survive a kill at any moment: the next run resumes from the last complete save."""

import json

import keras
import numpy as np
import pytest

from keras_relmem import training
from tests.helpers import sgdr_rate


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    return model


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 2)).astype("float32")


def _killed_after_writing(partial):
    """A stand-in for `Model.save`/`save_weights` killed mid-write: half a file, then the kill."""

    def dying_save(self, filepath, overwrite=True, **kwargs):
        with open(filepath, "wb") as handle:
            handle.write(partial)
        raise KeyboardInterrupt("killed")

    return dying_save


def _train_data():
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(_data()).batch(4)


def test_round_log_killed_mid_save_keeps_the_last_complete_round(tmp_path, monkeypatch):
    model = _model()
    log = training.RoundLog(tmp_path)
    log.record(model, {"loss": 1.0}, seconds=6.0)
    good = (tmp_path / "model.keras").read_bytes()
    monkeypatch.setattr(keras.Model, "save", _killed_after_writing(b"PK half a zip"))
    with pytest.raises(KeyboardInterrupt):
        log.record(model, {"loss": 0.5}, seconds=6.0)
    monkeypatch.undo()
    reopened = training.RoundLog(tmp_path)
    assert [e["round"] for e in reopened.curve] == [0] and reopened.next_round == 1 and reopened.minutes == 0.1
    assert (tmp_path / "model.keras").read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.json", "model.keras"]  # the half file is gone


def test_round_log_killed_after_its_commit_finishes_the_move(tmp_path, monkeypatch):
    """A kill after the curve took the round but before the model file was moved into place: reopening
    moves it, so the model and the curve are of the same round."""
    model = _model()
    log = training.RoundLog(tmp_path)
    log.record(model, {}, seconds=1.0)
    model.layers[0].kernel.assign(np.full((3, 2), 7.0, "float32"))
    real_replace = training.os.replace

    def die_on_model_move(src, dst):
        if str(dst).endswith("model.keras"):
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(training.os, "replace", die_on_model_move)
    with pytest.raises(KeyboardInterrupt):
        log.record(model, {}, seconds=1.0)
    monkeypatch.undo()
    reopened = training.RoundLog(tmp_path)
    assert reopened.next_round == 2
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_array_equal(loaded.layers[0].kernel.numpy(), np.full((3, 2), 7.0))


def test_run_fit_resumes_weights_optimizer_and_epoch_into_the_callers_model(tmp_path):
    """Two epochs, then a new sitting for the third, equal the three epochs of one sitting: the weights, the
    optimizer's moments and its step count come back from checkpoint.keras into a newly built model."""
    keras.utils.set_random_seed(1)
    straight = _model()
    initial = [w.copy() for w in straight.get_weights()]
    training.run_fit(straight, _train_data(), None, tmp_path / "straight", epochs=3, verbose=0)

    first = _model()
    first.set_weights(initial)
    training.run_fit(first, _train_data(), None, tmp_path / "resumed", epochs=2, verbose=0)
    second = _model()  # another process's model: fresh weights, an unbuilt optimizer
    record = training.run_fit(second, _train_data(), None, tmp_path / "resumed", epochs=3, resume=True, verbose=0)
    assert [e["epoch"] for e in record["epochs"]] == [0, 1, 2] and record["starts"] == [0, 2]
    assert int(second.optimizer.iterations) == int(straight.optimizer.iterations) == 12
    for got, want in zip(second.get_weights(), straight.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    for got, want in zip(second.optimizer.variables, straight.optimizer.variables):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want), rtol=1e-6)
    # without --resume the same workdir starts over
    record = training.run_fit(_model(), _train_data(), None, tmp_path / "resumed", epochs=1, verbose=0)
    assert [e["epoch"] for e in record["epochs"]] == [0]
    assert [e["round"] for e in training.saved_curve(tmp_path / "resumed")] == [0]


def test_run_fit_budget_counts_every_sitting(tmp_path):
    """A budget already spent ends the run after the epoch that spent it, and a resumed sitting trains no more."""
    seen = []
    spy = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: seen.append(epoch))
    training.run_fit(_model(), _train_data(), None, tmp_path, epochs=50, budget_minutes=1e-9, callbacks=[spy],
                     verbose=0)
    training.run_fit(_model(), _train_data(), None, tmp_path, epochs=50, budget_minutes=1e-9, callbacks=[spy],
                     verbose=0, resume=True)
    assert seen == [0] and len(training.saved_curve(tmp_path)) == 1


def test_model_checkpoint_is_replaced_whole(tmp_path, monkeypatch):
    x, y = _data()
    path = tmp_path / "checkpoint.keras"
    model = _model()
    model.fit(x, y, epochs=1, verbose=0, callbacks=[training.AtomicModelCheckpoint(path)])
    good = path.read_bytes()

    monkeypatch.setattr(keras.Model, "save", _killed_after_writing(b"PK half a zip"))
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[training.AtomicModelCheckpoint(path)])
    monkeypatch.undo()
    assert path.read_bytes() == good
    keras.saving.load_model(path)


def _smith_triangular(iteration, base_lr, max_lr, stepsize):
    """Smith 2017 (arXiv:1506.01186), §3.1, the triangular policy as the paper writes it."""
    cycle = np.floor(1 + iteration / (2 * stepsize))
    x = np.abs(iteration / stepsize - 2 * cycle + 1)
    return base_lr + (max_lr - base_lr) * np.maximum(0, 1 - x)


def test_triangular_cyclic_rate_follows_smith_and_drives_adam():
    rate = training.TriangularCyclicRate(2e-4, 1e-2, step_size=7)
    steps = np.arange(0, 60)
    got = np.array([float(keras.ops.convert_to_numpy(rate(t))) for t in steps])
    np.testing.assert_allclose(got, _smith_triangular(steps, 2e-4, 1e-2, 7), rtol=1e-5, atol=1e-9)
    assert got[0] == pytest.approx(2e-4) and got[7] == pytest.approx(1e-2) and got[14] == pytest.approx(2e-4)
    again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(rate))
    assert isinstance(again, training.TriangularCyclicRate) and again.get_config() == rate.get_config()
    # the optimizer reads it per step: after 3 updates its rate is lr(3)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.Adam(rate), "mse")
    x, y = _data()
    model.fit(x, y, batch_size=4, epochs=1, steps_per_epoch=3, verbose=0)
    assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == pytest.approx(
        _smith_triangular(3, 2e-4, 1e-2, 7), rel=1e-5)


def test_learning_rate_schedule_by_name():
    rate, callbacks = training.learning_rate_schedule("step", 0.01, halve_every=25)
    assert rate == 0.01 and callbacks[0].schedule(50) == pytest.approx(0.0025)
    rate, callbacks = training.learning_rate_schedule("plateau", 0.01, patience=4)
    assert isinstance(callbacks[0], keras.callbacks.ReduceLROnPlateau) and callbacks[0].patience == 4
    rate, callbacks = training.learning_rate_schedule("cyclic", 0.01, steps_per_epoch=30, half_cycle_epochs=2)
    assert (rate.minimum, rate.maximum, rate.step_size, callbacks) == (2e-4, 0.01, 60.0, [])
    with pytest.raises(ValueError, match="steps_per_epoch"):
        training.learning_rate_schedule("cyclic", 0.01)
    with pytest.raises(ValueError, match="schedule must be one of"):
        training.learning_rate_schedule("cosine", 0.01)
    with pytest.raises(ValueError, match="minimum <= maximum"):
        training.TriangularCyclicRate(0.1, 0.01, 10)


def test_noisy_adam_adds_the_annealed_noise_of_neelakantan_et_al(monkeypatch):
    """Neelakantan et al. 2015, eq. 1: g_t <- g_t + N(0, sigma_t^2), sigma_t^2 = eta / (1 + t)^0.55.
    The gradients Adam receives are recorded: zero-mean noise of that variance about the true ones."""
    seen = []
    monkeypatch.setattr(keras.optimizers.Adam, "apply",
                        lambda self, grads, variables=None: seen.append([keras.ops.convert_to_numpy(g) for g in grads]))
    eta, true = 0.04, np.full(40_000, 0.5, "float32")
    weights = keras.Variable(np.zeros(40_000, "float32"))
    optimizer = training.adam(0.01, gradient_noise=eta, noise_seed=3)
    assert isinstance(optimizer, training.NoisyAdam) and optimizer.get_config()["gradient_noise"] == eta
    optimizer.build([weights])
    for step in (0, 99):
        optimizer.iterations.assign(step)
        optimizer.apply([keras.ops.convert_to_tensor(true)], [weights])
        noise = seen[-1][0] - true
        sigma = np.sqrt(eta / (1 + step) ** 0.55)  # 0.2 at the first step, 0.056 at step 99
        assert abs(noise.mean()) < 4 * sigma / 200 and abs(noise.std() / sigma - 1) < 0.02, (step, noise.std())
    assert not isinstance(training.adam(0.01), training.NoisyAdam)  # no noise: Keras' own Adam


@pytest.mark.parametrize("noise", [0.0, 0.01])
def test_matrices_only_decay_survives_a_keras_file(tmp_path, noise):
    """A model saved with `adam(decay_scope="matrices")` and loaded again (a resumed run) still leaves its
    biases out of the decay. Loshchilov & Hutter 2019, Algorithm 2: with a zero gradient Adam's step is 0,
    so a decayed weight becomes w * (1 - lr * wd) and an excluded one stays w."""
    lr, wd = 0.1, 0.5
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, bias_initializer="ones")])
    model.compile(training.adam(lr, weight_decay=wd, decay_scope="matrices", gradient_noise=noise), loss="mse")
    model.optimizer.build(model.trainable_variables)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in loaded.trainable_variables)
    if noise:  # the noise is the only gradient: take the step on a copy to see Adam's part
        loaded.optimizer.gradient_noise = 0.0
    loaded.optimizer.apply([keras.ops.zeros_like(w) for w in loaded.trainable_variables], loaded.trainable_variables)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded.trainable_variables[0]), kernel * (1 - lr * wd),
                               rtol=1e-6)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded.trainable_variables[1]), bias)


# --- training in rounds on a budget (train_in_rounds and its helpers) ---


def test_anneal_learning_rate_is_a_cosine_on_the_budget_minutes():
    import keras

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    for spent in (0.0, 15.0, 30.0, 52.5, 60.0, 75.0):  # past the budget it stays at the final rate
        rate = training.anneal_learning_rate(model, spent, 60.0, 1e-3, 1e-4)
        assert rate == pytest.approx(sgdr_rate(1e-3, 1e-4, spent, 60.0), rel=1e-4)
        assert float(np.asarray(model.optimizer.learning_rate)) == pytest.approx(rate, rel=1e-6)


def test_max_rounds_stops_a_budget_early_and_a_rerun_does_not_go_past_it(tmp_path, capsys):
    import keras

    def build():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.1), "mse")
        return model

    indices = []

    def train_round(model, index):
        indices.append(index)
        return {}

    for _ in range(2):  # the second sitting finds 3 rounds and trains none
        curve, _ = training.train_in_rounds(build, train_round, lambda model: {}, tmp_path, 1e9, max_rounds=3)
    assert indices == [0, 1, 2] and [entry["round"] for entry in curve] == [0, 1, 2]
    # each sitting says where it looked: the first found nothing there, the second resumed from it
    out = capsys.readouterr().out
    assert f"no saved run in {tmp_path} (model.keras and curve.json): starting at round 0" in out
    assert f"resumed {tmp_path} after round 2" in out


def test_kept_best_is_the_curves_best_round_or_nothing(tmp_path):
    curve = [{"round": 0, "v": 5.0}, {"round": 1, "v": 3.0}, {"round": 2, "v": 4.0}]
    assert training.kept_best(tmp_path, curve, "v", "min") is None  # nothing kept
    (tmp_path / training.BEST_WEIGHTS).write_bytes(b"")
    (tmp_path / "best.json").write_text(json.dumps({"round": 1, "v": 3.0}))
    assert training.kept_best(tmp_path, curve, "v", "min")["round"] == 1
    assert training.kept_best(tmp_path, curve, "v", "max") is None  # round 0 is the best by "max"
    # a run that began keeping after its best round: the kept round is not the curve's best
    (tmp_path / "best.json").write_text(json.dumps({"round": 2, "v": 4.0}))
    assert training.kept_best(tmp_path, curve, "v", "min") is None


def test_a_fresh_round_log_forgets_the_old_runs_kept_best(tmp_path):
    """A run started over in the same workdir must not report the old run's best round as its own: an old
    best of loss 0.1 would otherwise match a new curve that reaches 0.1 by chance."""
    model = _model()
    old = training.RoundLog(tmp_path)
    old.record(model, {"loss": 0.1}, seconds=1.0, keep_best=("loss", "min"))
    assert training.kept_best(tmp_path, old.curve, "loss", "min")["round"] == 0
    new = training.RoundLog(tmp_path, fresh=True)
    assert new.curve == [] and sorted(p.name for p in tmp_path.iterdir()) == []
    new.record(model, {"loss": 0.5}, seconds=1.0)  # not kept
    new.record(model, {"loss": 0.1}, seconds=1.0)  # round 1 ties the old best: nothing was kept for it
    assert training.kept_best(tmp_path, new.curve, "loss", "min") is None


def test_best_entry_is_the_whole_round_with_the_lowest_or_highest_value():
    curve = [{"round": 0, "v": 5.0}, {"round": 1, "v": 3.0}, {"round": 2, "v": 6.0}]
    assert training.best_entry(curve, "v") == {"round": 1, "v": 3.0}
    assert training.best_entry(curve, "v", "max")["round"] == 2
    assert training.best_entry([], "v") is None


def test_a_workdir_of_the_earlier_format_is_refused_and_kept(tmp_path):
    """1.0's run_fit left backup/ and checkpoint.keras, no curve or config: the run lifecycle refuses it."""
    import keras_relmem as kr
    from keras_relmem import configs, runs

    (tmp_path / "backup").mkdir()
    (tmp_path / "checkpoint.keras").write_bytes(b"an earlier run's")
    with pytest.raises(runs.RunRefused, match="holds a run without config.json"):
        kr.train(configs.NthFarthestConfig(model="mlp", epochs=1), workdir=tmp_path, resume=True)
    assert (tmp_path / "checkpoint.keras").read_bytes() == b"an earlier run's"

