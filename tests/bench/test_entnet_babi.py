"""bench.entnet_babi's plumbing (it trains through tf.data, so TensorFlow only)."""

import json
import pathlib


def test_babi_entnet_writes_each_task_at_once_and_a_rerun_skips_it(tmp_path, capsys):
    from bench import entnet_babi

    argv = ["--tasks", "1", "--budget-minutes", "0.02", "--epochs", "1", "--no-jit-compile",
            "--results", str(tmp_path / "entnet.json"), "--workdir", str(tmp_path / "runs")]
    entnet_babi.main(argv)
    row = json.loads((tmp_path / "entnet.json").read_text())["tasks"]["1"]
    assert row["seed"] == 0 and row["epochs"] == 1 and 0 <= row["error"] <= 100 and "0" in row["runs"]
    progress = (tmp_path / "runs" / "task1_seed0.csv").read_text().splitlines()  # one row per epoch, kept
    assert progress[0].startswith("epoch,") and "val_loss" in progress[0] and len(progress) == 2
    entnet_babi.main(argv)
    assert "task  1 seed 0: done, skipped" in capsys.readouterr().out


def test_babi_entnet_seeds_trained_side_by_side_into_one_file_all_stay(tmp_path, monkeypatch):
    from bench import entnet_babi

    table = tmp_path / "entnet.json"

    def train_task(task, seed, args):
        # the other process (seed 3) finishes while this one (seed 2) trains
        entnet_babi.merge_result(table, ("tasks", "19"), {"error": 9.0, "validation_error": 9.0,
                                                          "runs": {"3": {"error": 9.0, "validation_error": 9.0}}}, {})
        return {"error": 2.0, "validation_error": 3.0, "epochs": 5, "minutes": 10.0}

    monkeypatch.setattr(entnet_babi, "train_task", train_task)
    monkeypatch.setattr(entnet_babi, "report", lambda args: None)
    entnet_babi.main(["--tasks", "19", "--seeds", "2", "--results", str(table)])
    row = json.loads(table.read_text())["tasks"]["19"]
    assert set(row["runs"]) == {"2", "3"} and (row["error"], row["validation_error"]) == (2.0, 3.0)
    # what one seed gives, beside the best: median of 2.0 and 9.0, the worst, 1 of 2 under 5%
    assert (row["median"], row["worst"], row["solved_seeds"], row["seeds"]) == (5.5, 9.0, 1, {"2": 2.0, "3": 9.0})


def _results(path, runs, **recipe):
    """A results file as the bench writes it: task 13 with `runs` ({seed: (validation %, test %)})."""
    rows = {str(seed): {"error": test, "validation_error": val, "epochs": 5, "minutes": 10.0, "seed": seed}
            for seed, (val, test) in runs.items()}
    best = min(rows.values(), key=lambda r: r["validation_error"])
    arguments = {"budget_minutes": 10.0, "epochs": 200, "schedule": "step", "patience": 3,
                 "learning_rate": 0.01, "tied_keys": False, "seeds": sorted(runs), **recipe}
    path.write_text(json.dumps({"tasks": {"13": {**best, "runs": rows}}, "args": {"tasks/13": arguments}}))
    return str(path)


def test_babi_entnet_merge_keeps_the_best_seed_by_validation_and_refuses_another_recipe(tmp_path, capsys):
    import pytest

    from bench import entnet_babi

    table = _results(tmp_path / "table.json", {0: (4.8, 5.6)})
    other = _results(tmp_path / "other.json", {0: (0.1, 0.1), 1: (0.8, 0.9)})
    entnet_babi.main(["--results", table, "--merge", other])
    merged = json.loads(pathlib.Path(table).read_text())
    row = merged["tasks"]["13"]
    # seed 0 was already there: kept (5.6%), not replaced by the other sitting's seed 0
    assert row["runs"]["0"]["error"] == 5.6 and set(row["runs"]) == {"0", "1"}
    assert (row["seed"], row["error"], row["validation_error"]) == (1, 0.9, 0.8)  # best by validation
    assert merged["args"]["tasks/13"]["seeds"] == [0, 1] and merged["args"]["tasks/13"]["merged_from"] == [other]
    assert "seed 0: already in" in capsys.readouterr().out
    tied = _results(tmp_path / "tied.json", {2: (0.0, 0.0)}, tied_keys=True)
    with pytest.raises(SystemExit, match="tied_keys=True, here False"):
        entnet_babi.main(["--results", table, "--merge", tied])
    assert json.loads(pathlib.Path(table).read_text()) == merged  # the table is untouched
    explicit = _results(tmp_path / "explicit.json", {3: (0.5, 0.6)}, clip="keras", story_mask_init="ones")
    entnet_babi.main(["--results", table, "--merge", explicit])  # older files lack these: their defaults
    assert set(json.loads(pathlib.Path(table).read_text())["tasks"]["13"]["runs"]) == {"0", "1", "3"}
    authors = _results(tmp_path / "authors.json", {4: (0.0, 0.0)}, clip="authors")
    with pytest.raises(SystemExit, match="clip='authors', here 'keras'"):
        entnet_babi.main(["--results", table, "--merge", authors])


def test_authors_clip_makes_entnet_lua_updates():
    """`--clip authors` against entnet.lua's optimisation, written from its Lua.

    EntNet-babi/entnet.lua: `model.loss.sizeAverage = false` (the batch's
    loss is summed), `gradnorm = paramdx:norm(); if gradnorm > maxgradnorm
    then paramdx:mul(maxgradnorm / gradnorm)` (one norm over all parameters,
    maxgradnorm 40), then torch/optim's adam.lua with its defaults (beta1 0.9,
    beta2 0.999, epsilon 1e-8): m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
    x -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon).
    The bench is given the batch-mean gradient, as Keras computes it.
    """
    import keras
    import numpy as np

    from bench import entnet_babi

    batch, lr = 32, 0.01
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(3, 4)), rng.normal(size=(5,))]
    # per-step summed gradients: a large one (clipped), then small ones (not), so the clip's effect shows
    summed = [[rng.normal(scale=s, size=w.shape) for w in start] for s in (30.0, 0.5, 4.0)]
    assert np.sqrt(sum((g ** 2).sum() for g in summed[0])) > 40 > np.sqrt(sum((g ** 2).sum() for g in summed[1]))

    x, m, v = [w.copy() for w in start], [np.zeros_like(w) for w in start], [np.zeros_like(w) for w in start]
    for t, grads in enumerate(summed, start=1):
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        if norm > 40:
            grads = [g * 40 / norm for g in grads]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g ** 2
            x[i] = x[i] - lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m[i] / (np.sqrt(v[i]) + 1e-8)

    variables = [keras.Variable(w.astype("float64"), dtype="float64") for w in start]
    optimizer = entnet_babi.optimizer(lr, "authors", batch_size=batch)
    for grads in summed:
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g / batch, "float64"), w)
                                   for g, w in zip(grads, variables)])
    for got, want in zip(variables, x):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=1e-5, atol=1e-7)  # the rate is a float32
    # Keras' per-variable clipnorm (the default `--clip keras`) does not make these updates
    variables = [keras.Variable(w.astype("float64"), dtype="float64") for w in start]
    optimizer = entnet_babi.optimizer(lr, "keras", batch_size=batch)
    for grads in summed:
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g / batch, "float64"), w)
                                   for g, w in zip(grads, variables)])
    assert np.abs(keras.ops.convert_to_numpy(variables[0]) - x[0]).max() > 1e-3


def test_weight_decay_makes_adamw_updates():
    """`--weight-decay` against AdamW written from its reference, Loshchilov & Hutter 2019 (Algorithm 2,
    line 12: the weight shrinks by its own multiple beside Adam's step, outside m and v), with the decay
    scaled by the learning rate as torch.optim.AdamW's documented algorithm does:
    theta <- theta - lr * wd * theta, then theta <- theta - lr * m_hat / (sqrt(v_hat) + eps), Keras' eps 1e-7.
    Gradients are small, so the per-variable clip at 40 does not act.
    """
    import keras
    import numpy as np

    from bench import entnet_babi

    lr, wd = 0.01, 0.02
    rng = np.random.default_rng(1)
    start = [rng.normal(size=(3, 4)), rng.normal(size=(5,))]
    steps = [[rng.normal(scale=0.3, size=w.shape) for w in start] for _ in range(3)]
    x, m, v = [w.copy() for w in start], [np.zeros_like(w) for w in start], [np.zeros_like(w) for w in start]
    for t, grads in enumerate(steps, start=1):
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g ** 2
            x[i] = x[i] * (1 - lr * wd) - lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m[i] / (np.sqrt(v[i]) + 1e-7)

    for decay, want in ((wd, x), (0.0, None)):
        variables = [keras.Variable(w.astype("float64"), dtype="float64") for w in start]
        optimizer = entnet_babi.optimizer(lr, "keras", weight_decay=decay)
        for grads in steps:
            optimizer.apply_gradients([(keras.ops.convert_to_tensor(g, "float64"), w)
                                       for g, w in zip(grads, variables)])
        got = [keras.ops.convert_to_numpy(w) for w in variables]
        if want is not None:
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
        else:  # no decay: plain Adam, measurably off the AdamW weights
            assert np.abs(got[0] - x[0]).max() > 1e-4


def test_decay_scope_matrices_leaves_masks_slopes_and_biases_to_plain_adam():
    """`--decay-scope matrices`: the weights that start at one or are biases take Adam's step alone
    (Loshchilov & Hutter 2019, Algorithm 2 without line 12's decay term); kernels and embeddings shrink."""
    import keras
    import numpy as np

    from bench import entnet_babi

    lr, wd, grad = 0.01, 0.5, 0.2
    # first Adam step as Keras writes it (the test above): lr * sqrt(1 - b2) / (1 - b1) * m / (sqrt(v) + eps)
    m, v = 0.1 * grad, 0.001 * grad ** 2
    adam = 1.0 - lr * np.sqrt(1 - 0.999) / (1 - 0.9) * m / (np.sqrt(v) + 1e-7)
    names = ("positional_mask", "alpha", "gate_bias", "bias", "kernel", "embeddings")
    variables = [keras.Variable(np.ones(2), dtype="float64", name=name) for name in names]
    optimizer = entnet_babi.optimizer(lr, "keras", weight_decay=wd, decay_scope="matrices")
    optimizer.apply_gradients([(keras.ops.convert_to_tensor(np.full(2, grad), "float64"), w) for w in variables])
    got = {name: float(keras.ops.convert_to_numpy(w)[0]) for name, w in zip(names, variables)}
    want = {name: adam - (lr * wd if name in ("kernel", "embeddings") else 0.0) for name in names}
    assert all(abs(got[name] - want[name]) < 1e-7 for name in names), (got, want)  # decay: lr * wd = 5e-3


def test_babi_entnet_merge_starts_a_new_table_and_refuses_another_weight_decay(tmp_path):
    import pytest

    from bench import entnet_babi

    table = tmp_path / "new.json"  # not there yet: a table can start from another sitting's file
    first = _results(tmp_path / "first.json", {0: (2.6, 2.4)}, weight_decay=0.02)
    entnet_babi.main(["--results", str(table), "--merge", first])
    row = json.loads(table.read_text())["tasks"]["13"]
    assert (row["seed"], row["error"]) == (0, 2.4)
    plain = _results(tmp_path / "plain.json", {1: (0.0, 0.0)})  # no weight_decay recorded: 0, the default
    with pytest.raises(SystemExit, match="weight_decay=0.0, here 0.02"):
        entnet_babi.main(["--results", str(table), "--merge", plain])


def test_babi_entnet_refuses_a_negative_weight_decay(capsys):
    import pytest

    from bench import entnet_babi

    with pytest.raises(SystemExit):
        entnet_babi.parse_args(["--weight-decay", "-0.1"])
    assert "--weight-decay must be >= 0; got -0.1" in capsys.readouterr().err
    assert entnet_babi.parse_args(["--weight-decay", "0.02"]).weight_decay == 0.02


def test_babi_entnet_recipe_flags_set_the_initial_weights(tmp_path):
    """--embedding-stddev redraws the embeddings (so the tied keys) from N(0, s); --gate-bias
    starts every block's write gate at that bias (the paper's gate has none: 0 keeps it)."""
    import keras
    import numpy as np

    from bench import entnet_babi
    from keras_relmem.data import load_babi
    from keras_relmem.tasks import babi

    data = load_babi(1, "en")

    def built(flags):
        args = entnet_babi.parse_args(flags)
        keras.utils.set_random_seed(0)
        model = babi.build_model(entnet_babi.task_config(1, 0, args), data)
        entnet_babi.adjust_model(args, 0)(model)
        return model

    model = built(["--tied-keys", "--embedding-stddev", "0.3", "--gate-bias", "-2"])
    embeddings = np.asarray(model.get_layer("embedding").embeddings)
    assert abs(embeddings.std() - 0.3) < 0.03  # the paper's 0.1 would fail this
    np.testing.assert_array_equal(np.asarray(model.get_layer("memory").cell.gate_bias), -2.0)
    default = built(["--tied-keys"])
    np.testing.assert_array_equal(np.asarray(default.get_layer("memory").cell.gate_bias), 0.0)
    assert abs(np.asarray(default.get_layer("embedding").embeddings).std() - 0.1) < 0.01


def test_the_bench_and_the_task_script_give_the_same_per_epoch_losses(tmp_path):
    """The EntNet bench trains through the library's code (`keras_relmem.tasks.babi.train_one`): the
    command it records, run as a user would, gives the same losses epoch by epoch (two epochs of five
    batches)."""
    from bench import entnet_babi
    from keras_relmem.commands import train as commands

    table = tmp_path / "entnet.json"
    entnet_babi.main(["--tasks", "1", "--epochs", "2", "--max-steps", "5", "--budget-minutes", "30", "--seeds", "1",
                      "--no-jit-compile", "--results", str(table), "--workdir", str(tmp_path / "bench")])
    run = json.loads(table.read_text())["tasks"]["1"]["runs"]["1"]
    command = run["command"].split()
    assert command[:3] == ["relmem-train-babi", "--recipe", "entnet_babi"]
    # only what differs from the default recipe: the paper's schedule, keys, decay and scale
    assert "--schedule step" in run["command"] and "--no-tied-keys" in run["command"]
    commands.babi([*command[1:], "--no-export", "--verbose", "0", "--workdir", str(tmp_path / "user")])
    epochs = json.loads((tmp_path / "user" / "qa1" / "metrics.json").read_text())["epochs"]
    assert [round(e["loss"], 4) for e in epochs] == run["loss_curve"]
    assert [round(e["val_loss"], 4) for e in epochs] == run["val_loss_curve"]
