"""The joint MEMO trainer (`keras_relmem.tasks.babi_joint`, `relmem-train-babi --model memo --joint`):
its config's fields (given as the command's flags) and their checks, what they build, the curriculum, the
starts, and the analysis of a (small, briefly trained) MEMO: supporting facts per task, the hops' rank
correlation with them, per-task training error and per-hop error."""

import argparse

import numpy as np
import pytest

from bench import memo_babi
from keras_relmem.callbacks import AnswerLossWarmup, HaltingWarmup, LinearStart
from keras_relmem.data import load_babi
from keras_relmem.tasks import babi_joint


def parse_args(argv):
    """The joint trainer's config from flags over the class's own defaults, with its implied values filled
    in (`babi_joint.resolve`), as a run trains it."""
    from keras_relmem.commands import parse
    from keras_relmem.configs import BabiJointConfig

    config, _, _ = parse(argv, [BabiJointConfig], lambda given: BabiJointConfig(), "runs/test")
    return babi_joint.resolve(config)


# a MEMO small enough to build in a second
SMALL = ["--embedding-dim", "8", "--num-heads", "2", "--key-size", "4", "--max-hops", "2"]


@pytest.fixture(scope="module")
def data():
    try:
        return load_babi([1, 2, 3], "en", memory_size=50)
    except Exception as error:  # noqa: BLE001 - no local copy of bAbI
        pytest.skip(f"bAbI not available: {error}")


def test_supporting_facts_come_from_the_data(data):
    # Weston et al. 2015: tasks 1-3 are "single/two/three supporting facts".
    assert babi_joint.supporting_facts(data) == {"1": 1.0, "2": 2.0, "3": 3.0}


def test_spearman_by_hand():
    facts = {"1": 1.0, "2": 2.0, "3": 3.0, "4": 1.0}
    same_order = {"1": {"hops": 1.2}, "2": {"hops": 2.5}, "3": {"hops": 3.1}, "4": {"hops": 1.2}}
    assert babi_joint.hops_spearman(same_order, facts) == 1.0
    # ranks: hops 3, 2, 1, 4 against facts 1.5, 3, 4, 1.5 (ties share their mean rank);
    # Pearson of the ranks: -4.5 / sqrt(5 * 4.5) = -0.949
    mixed = {"1": {"hops": 2.0}, "2": {"hops": 1.5}, "3": {"hops": 1.0}, "4": {"hops": 2.5}}
    assert babi_joint.hops_spearman(mixed, facts) == pytest.approx(-0.949, abs=1e-3)


def test_spearman_needs_no_extra(monkeypatch):
    """The base install runs the joint recipe: its rank correlation needs no SciPy (the [bench] extra's, once)."""
    import sys

    monkeypatch.setitem(sys.modules, "scipy", None)  # `import scipy` now fails
    facts = {"1": 1.0, "2": 2.0, "3": 3.0, "4": 1.0}
    mixed = {"1": {"hops": 2.0}, "2": {"hops": 1.5}, "3": {"hops": 1.0}, "4": {"hops": 2.5}}
    assert babi_joint.hops_spearman(mixed, facts) == pytest.approx(-0.949, abs=1e-3)


def test_training_and_per_hop_errors_of_a_small_memo(data):
    args = parse_args(["--embedding-dim", "8", "--num-heads", "2", "--key-size", "4", "--max-hops", "3",
                                 "--batch-size", "16", "--test-limit", "40"])
    model = babi_joint.build(args, data)
    model.fit(babi_joint.train_dataset(data, args, seed=0), steps_per_epoch=3, epochs=1, verbose=0)
    train = babi_joint.train_errors(model, data, per_task_limit=30)
    assert sorted(train, key=int) == ["1", "2", "3"] and all(0 <= e <= 100 for e in train.values())
    hops = babi_joint.hop_errors(model, data, args)
    for row in hops.values():
        assert len(row["error_by_hop"]) == 3
        # a question wrong at every hop is wrong at each hop
        assert row["wrong_at_every_hop"] <= min(row["error_by_hop"]) + 1e-9
        assert len(row["attention_on_support_by_hop"]) == 3
    # the last hop's error is what a model that always runs N hops scores
    model.memo.policy.halt.bias.assign([-30.0])  # never halt early
    adaptive = babi_joint.per_task(model, data, args)
    for task, row in hops.items():
        assert row["error_by_hop"][-1] == pytest.approx(adaptive[task]["error"], abs=1e-6)
        assert adaptive[task]["hops"] == pytest.approx(3.0)
    assert np.isfinite(list(train.values())).all()


def test_attention_on_support_is_the_mass_on_the_supporting_facts(data):
    """Force every head to attend only to the first fact of each story: the mass on the supporting facts
    is then the share of questions whose first sentence is one of them (read from the data's ids)."""
    args = parse_args(["--embedding-dim", "8", "--num-heads", "2", "--key-size", "4", "--max-hops", "2",
                                 "--test-limit", "50"])
    model = babi_joint.build(args, data)
    original = model.memo.unrolled

    def first_fact_only(inputs, mask=None, training=False):
        out = dict(original(inputs, mask=mask, training=training))
        shape = np.asarray(out["attention"]).shape  # (b, N, H, I)
        out["attention"] = np.zeros(shape)
        out["attention"][..., 0] = 1.0
        return out

    model.memo.unrolled = first_fact_only
    hops = babi_joint.hop_errors(model, data, args)
    for task in data.tasks:
        questions = [e for e in data.examples["test"] if e.task == task][:50]
        # the first sentence MEMO sees: the oldest of the story's last memory_size (50) sentences
        first_is_support = np.mean([e.sentence_ids[-50:][0] in e.supporting_facts for e in questions])
        assert hops[str(task)]["attention_on_support_by_hop"] == [round(100 * first_is_support, 1)] * 2


def test_hops_spearman_is_none_where_undefined():
    facts = {"1": 1.0, "2": 2.0, "3": 3.0}
    assert babi_joint.hops_spearman({"16": {"hops": 4.0}}, {"16": 3.0}) is None  # one task
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # undefined is None, without SciPy's constant-input warning
        assert babi_joint.hops_spearman({t: {"hops": 3.0} for t in facts}, facts) is None  # every task the same hops
        assert babi_joint.hops_spearman({t: {"hops": h} for t, h in zip(facts, (1.0, 2.0, 3.0))},
                                       dict.fromkeys(facts, 1.0)) is None  # every task one fact
    assert babi_joint.hops_spearman({t: {"hops": h} for t, h in zip(facts, (1.0, 2.0, 3.0))}, facts) == 1.0


def test_regularisation_flags_reach_the_model(data):
    args = parse_args([*SMALL, "--weight-decay", "0.1", "--attention-dropout", "0.3", "--answer-dropout", "0.3"])
    model = babi_joint.build(args, data)
    adam = model.optimizer.first  # MEMO's; the halting network's RMSProp (`second`) never decays
    assert adam.weight_decay == 0.1 and "bias" in adam.decay_exclude
    assert model.optimizer.second.weight_decay is None
    assert model.memo.attention_dropout == model.memo.answer_dropout == 0.3


def test_embedding_stddev_draws_the_word_and_time_embeddings(data):
    default = babi_joint.build(parse_args([*SMALL, "--embedding-dim", "16"]), data)
    assert np.abs(default.embed.embeddings.numpy()).max() <= 0.05  # Keras' uniform initializer
    flags = [*SMALL, "--embedding-dim", "16", "--embedding-stddev", "0.5"]
    model = babi_joint.build(parse_args(flags), data)
    for table in (model.embed, model.time_embed):
        assert table.embeddings.numpy().std() == pytest.approx(0.5, rel=0.15)
    rows = min(len(model.embed.embeddings.numpy()), len(model.time_embed.embeddings.numpy()))
    # each table its own draw, not the same rows twice
    assert not np.allclose(model.embed.embeddings.numpy()[:rows], model.time_embed.embeddings.numpy()[:rows])


def test_bag_init_reaches_memo(data):
    model = babi_joint.build(parse_args([*SMALL, "--bag-init"]), data)
    assert model.memo.get_config()["kernel_initializer"] == "bags"
    assert np.allclose(model.memo.hop_projection.kernel.numpy(), np.eye(8))
    plain = babi_joint.build(parse_args(SMALL), data).memo
    assert plain.get_config()["kernel_initializer"]["class_name"] == "GlorotUniform"


def test_per_hop_logit_scale_and_summed_facts_reach_memo(data):
    model = babi_joint.build(parse_args([*SMALL, "--no-share-hop-weights"]), data)
    assert not model.memo.share_hop_weights and len(model.memo.hop_projections) == model.memo.max_hops
    assert babi_joint.build(parse_args(SMALL), data).memo.share_hop_weights
    assert babi_joint.build(parse_args([*SMALL, "--logit-scale", "3"]), data).memo.logit_scale == 3.0
    assert babi_joint.build(parse_args([*SMALL, "--coverage-penalty", "5"]), data).memo.coverage_penalty == 5
    summed = babi_joint.build(parse_args([*SMALL, "--sum-fact-items"]), data)
    assert summed.sum_fact_items and summed.memo.key_projection.kernel.shape[0] == 2 * 8  # words + time item


def test_no_time_builds_memo_without_the_time_item(data):
    timed = babi_joint.build(parse_args(SMALL), data)
    model = babi_joint.build(parse_args([*SMALL, "--no-time-encoding", "--embedding-stddev", "1"]), data)
    assert model.time_embed is None and timed.time_embed is not None
    # a fact is its words alone: one item (d_c = 8 inputs of the key projection) fewer
    assert model.memo.key_projection.kernel.shape[0] == timed.memo.key_projection.kernel.shape[0] - 8
    arrays = babi_joint.split_arrays(data, "test", 4)
    _, x = next(babi_joint.length_sorted_batches(arrays))
    assert model(x).shape == (len(x["story"]), len(data.answer_vocab))


def test_linear_start_rounds_then_the_softmax(data):
    args = parse_args([*SMALL, "--linear-start-rounds", "2"])
    model = babi_joint.build(args, data)
    linear = [c for c in babi_joint.training_controls(args) if isinstance(c, LinearStart)]
    assert [c.epochs for c in linear] == [2]
    linear[0].set_model(model)
    phases = []
    for index in (0, 1, 2, 3, 1):  # the last: a run resumed in its linear rounds goes back to them
        linear[0].on_epoch_begin(index)
        phases.append(float(model.memo.linear_phase.numpy()))
    assert phases == [1.0, 1.0, 0.0, 0.0, 1.0]
    # every MEMO can start linear, one saved without it too: its phase starts at 0 (the softmax)
    assert float(babi_joint.build(parse_args(SMALL), data).memo.linear_phase.numpy()) == 0.0


@pytest.mark.parametrize("flag, value", [("--weight-decay", "-0.1"), ("--attention-dropout", "1.0"),
                                         ("--time-noise", "-0.1"), ("--linear-start-rounds", "-1"),
                                         ("--embedding-stddev", "0"), ("--coverage-penalty", "-1")])
def test_bad_regularisation_flags_are_refused(flag, value, capsys):
    with pytest.raises(SystemExit):
        parse_args([flag, value])
    assert flag[2:].replace("-", "_") in capsys.readouterr().err


def test_time_noise_without_the_time_encoding_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--no-time-encoding", "--time-noise", "0.1"])
    err = capsys.readouterr().err
    assert "time_noise" in err and "time_encoding False" in err
    assert not parse_args(["--no-time-encoding"]).time_encoding  # alone, each is fine


def test_task_repeats_are_parsed_and_bad_items_refused(capsys):
    items = parse_args(["--task-repeats", "17=8", "19=4"]).task_repeats
    assert babi_joint.task_repeats(items) == {17: 8, 19: 4}
    assert babi_joint.task_repeats(parse_args([]).task_repeats) == {}
    for items in (["17"], ["x=2"], ["17=0"], ["17=2", "17=3"]):
        with pytest.raises(SystemExit):
            parse_args(["--task-repeats", *items])
        assert "task_repeats" in capsys.readouterr().err


def test_rename_words_knows_tasks_3_and_16(capsys):
    import numpy as np

    from keras_relmem.data import load_babi

    data = load_babi([16], "en")
    batches = [next(iter(babi_joint.train_dataset(data, parse_args(flags), seed=0)))
               for flags in ([], ["--rename-words", "16"])]
    plain, renamed = ((x["story"].numpy(), y.numpy()) for x, y in batches)
    assert plain[0].shape == renamed[0].shape and (plain[0] != renamed[0]).any() and (plain[1] != renamed[1]).any()
    np.testing.assert_array_equal(plain[0] == 0, renamed[0] == 0)  # the same questions, renamed
    with pytest.raises(SystemExit):
        parse_args(["--rename-words", "2"])
    assert "rename_words" in capsys.readouterr().err


def test_first_tasks_train_alone_for_the_curriculums_rounds_then_every_task(capsys):
    import numpy as np

    from keras_relmem.data import load_babi

    flags = ["--tasks", "1", "16", "--first-tasks", "16", "--first-tasks-rounds", "2", "--task-repeats", "16=3"]
    args = parse_args(flags)
    assert [babi_joint.repeats_for_round(args, [1, 16], i) for i in range(3)] == [{16: 3, 1: 0}] * 2 + [{16: 3}]
    data = load_babi([1, 16], "en")
    story_words = {task: set(np.unique(data.arrays("train")["story"][data.arrays("train")["task"] == task]))
                   for task in (1, 16)}
    only_16 = story_words[16] - story_words[1]  # words (swan, white, ...) no task 1 story has
    for index, want_task_1 in ((0, False), (1, False), (2, True)):
        ds = babi_joint.train_dataset(data, args, seed=0, index=index)
        with_task_1 = 0
        for x, _ in ds.take(40):
            with_task_1 += sum(not (set(np.unique(s)) & only_16) for s in x["story"].numpy())
        assert (with_task_1 > 0) == want_task_1, index  # task 1's questions only once the curriculum is over
    assert parse_args(["--first-tasks", "16"]).first_tasks_rounds == 1
    assert parse_args([]).first_tasks_rounds == 0
    # without --first-tasks there is no curriculum: its rounds and rate (a recipe's, say) go with it
    assert parse_args(["--first-tasks-rounds", "2", "--first-tasks-learning-rate", "1e-4"]).first_tasks_rounds == 0
    # a curriculum is kept to the trained tasks (a recipe's on fewer tasks), but one with none of them is refused
    assert parse_args(["--tasks", "1", "2", "--first-tasks", "2", "16"]).first_tasks == (2,)
    assert parse_args(["--tasks", "1", "--first-tasks"]).first_tasks_rounds == 0
    for bad, message in ((["--first-tasks", "16", "--first-tasks-rounds", "0"], "first_tasks_rounds must be >= 1"),
                         (["--tasks", "1", "2", "--first-tasks", "5"], "first_tasks [5]: none of them is trained")):
        with pytest.raises(SystemExit):
            parse_args(bad)
        assert message in capsys.readouterr().err


def test_a_resumed_model_takes_the_runs_supervision_flags(data, capsys):
    # Withdrawing the diagnostic's supervision: a model saved with it resumes without it when the flag says 0.
    supervised = parse_args([*SMALL, "--attention-supervision", "1", "--supervised-hops", "2"])
    model = babi_joint.build(supervised, data)
    assert (model.attention_supervision, model.supervised_hops) == (1.0, 2)
    babi_joint.apply_supervision_arguments(model, parse_args(SMALL))
    assert (model.attention_supervision, model.supervised_hops) == (0.0, 1)
    assert "attention supervision 1 on 2 hop(s) -> 0 on 1" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"supervised_hops must be an int in \[1, max_hops=2\]; got 3"):
        babi_joint.apply_supervision_arguments(model, argparse.Namespace(attention_supervision=1.0, supervised_hops=3))


def test_a_resumed_model_goes_on_at_the_runs_learning_rate(data, capsys):
    model = babi_joint.build(parse_args(SMALL), data)
    babi_joint.apply_learning_rate(model, 1e-4)
    assert "learning rate 0.001 -> 0.0001" in capsys.readouterr().out
    # MEMO's Adam moves; the halting network's RMSProp keeps its own rate
    assert np.isclose(float(model.optimizer.first.learning_rate.numpy()), 1e-4)
    assert np.isclose(float(model.halting_optimizer.learning_rate.numpy()), model.halting_learning_rate)
    babi_joint.apply_learning_rate(model, 1e-4)
    assert capsys.readouterr().out == ""


def test_the_curriculum_rounds_train_at_their_own_rate(capsys):
    args = parse_args([*SMALL, "--first-tasks", "1", "--first-tasks-rounds", "2",
                                 "--first-tasks-learning-rate", "3e-4", "--learning-rate", "1e-3"])
    assert [babi_joint.learning_rate_for_round(args, i) for i in range(4)] == [3e-4, 3e-4, 1e-3, 1e-3]
    plain = parse_args([*SMALL, "--first-tasks", "1", "--learning-rate", "5e-4"])
    assert [babi_joint.learning_rate_for_round(plain, i) for i in range(2)] == [5e-4, 5e-4]
    # without a curriculum its rate goes too
    assert parse_args([*SMALL, "--first-tasks-learning-rate", "3e-4"]).first_tasks_learning_rate is None


def test_the_rate_changes_at_the_rounds_given(capsys):
    args = parse_args([*SMALL, "--first-tasks", "1", "--first-tasks-rounds", "2",
                                 "--first-tasks-learning-rate", "3e-4", "--learning-rate", "5e-4",
                                 "--learning-rate-from", "6=1e-4", "4=1e-3"])
    rates = [babi_joint.learning_rate_for_round(args, i) for i in range(8)]
    assert rates == [3e-4] * 2 + [5e-4] * 2 + [1e-3] * 2 + [1e-4] * 2
    for bad in (["x=1e-3"], ["4=fast"], ["-1=1e-3"], ["4=0"], ["4=1e-3", "4=1e-4"]):
        with pytest.raises(SystemExit):
            parse_args([*SMALL, "--learning-rate-from", *bad])
        err = capsys.readouterr().err
        assert "learning_rate_from" in err or "-1=1e-3" in err  # argparse takes "-1=..." for an option
    # argparse takes "-1=..." for an option, so the round's own bound is checked on the parser itself
    with pytest.raises(ValueError, match="ROUND >= 0"):
        babi_joint.round_rates(["-1=1e-3"])


def test_the_warmup_answer_loss_holds_until_the_halting_network_learns(data):
    # --warmup-answer-loss last --answer-loss halted+last: hop N's answer alone while the policy waits,
    # then the halting hop's too (tests/test_callbacks.py shows the rebuilt step trains the new loss)
    args = parse_args([*SMALL, "--warmup-answer-loss", "last", "--answer-loss", "halted+last",
                                 "--halting-warmup-rounds", "2"])
    model = babi_joint.build(args, data)
    assert model.answer_loss == "halted+last"
    controls = babi_joint.training_controls(args)
    (warmup,) = [c for c in controls if isinstance(c, AnswerLossWarmup)]
    assert [c.epochs for c in controls if isinstance(c, HaltingWarmup)] == [2]
    warmup.set_model(model)
    seen = []
    for index in range(4):
        model.train_function = "traced"
        warmup.on_epoch_begin(index)
        seen.append((model.answer_loss, "traced" if model.train_function == "traced" else "retraced"))
    # each change builds the step again (make_train_function(force=True)): a new function, not the old one
    assert seen == [("last", "retraced"), ("last", "traced"), ("halted+last", "retraced"), ("halted+last", "traced")]
    # without the flag no answer-loss control: the run's loss holds throughout
    plain = parse_args([*SMALL, "--answer-loss", "last"])
    assert not [c for c in babi_joint.training_controls(plain) if isinstance(c, AnswerLossWarmup)]


def test_the_answer_warmup_can_end_before_the_halting_warmup(capsys):
    args = parse_args([*SMALL, "--warmup-answer-loss", "last", "--answer-loss", "all",
                                 "--halting-warmup-rounds", "8", "--answer-warmup-rounds", "4"])
    assert babi_joint.answer_warmup_rounds(args) == 4
    assert babi_joint.answer_warmup_rounds(parse_args([*SMALL, "--halting-warmup-rounds", "8"])) == 8
    # the rounds go with the warm-up's loss: without one, none (a recipe's rounds taken back with its loss)
    assert parse_args([*SMALL, "--answer-warmup-rounds", "4"]).answer_warmup_rounds is None
    with pytest.raises(SystemExit):
        parse_args([*SMALL, "--warmup-answer-loss", "last", "--answer-warmup-rounds", "-1"])
    assert "answer_warmup_rounds: expected an integer >= 0" in capsys.readouterr().err


def _fake_starts(train_errors, minutes=2.0):
    """A stand-in for run()'s `rounds`: start k's curve of two rounds, its last round's training errors
    `train_errors[k]` (per task), each round `minutes` long; records the calls."""
    import json

    calls = []

    def rounds(seed, workdir, max_rounds=None, on_round=None):
        start = seed // babi_joint.START_SEED_STRIDE
        calls.append((seed, workdir.name, max_rounds))
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "model.keras").write_text(f"model of seed {seed}")
        curve = [{"round": r, "minutes": minutes * (r + 1), "examples": 64 * (r + 1), "mean_error": 50.0 - r,
                  "solved": 0, "tasks": {t: {"error": 50.0, "train_error": e} for t, e in train_errors[start].items()}}
                 for r in range(max_rounds)]
        (workdir / "curve.json").write_text(json.dumps(curve))
        return curve, None

    return rounds, calls


def test_starts_go_on_with_the_lowest_training_error_and_count_every_starts_minutes(tmp_path, capsys):
    import json

    args = parse_args(["--starts", "3", "--start-rounds", "2", "--seed", "2"])
    # start 2 (seed 1002) has the lowest mean training error over the tasks: (10 + 2) / 2 = 6
    rounds, calls = _fake_starts([{"1": 1.0, "16": 50.0}, {"1": 10.0, "16": 2.0}, {"1": 30.0, "16": 40.0}])
    chosen = babi_joint.choose_start(args, tmp_path, rounds)
    assert calls == [(2, "start0", 2), (1002, "start1", 2), (2002, "start2", 2)]
    assert (chosen["chosen"], chosen["seed"]) == (1, 1002)
    assert [t["train_error"] for t in chosen["by_start"]] == [25.5, 6.0, 35.0]
    # the run goes on from the chosen start's model, its clock carrying the two other starts' 4 minutes each
    assert (tmp_path / "model.keras").read_text() == "model of seed 1002"
    assert [e["minutes"] for e in json.loads((tmp_path / "curve.json").read_text())] == [10.0, 12.0]
    assert chosen["minutes_of_other_starts"] == 8.0
    assert "chose start 2 (seed 1002)" in capsys.readouterr().out
    line = memo_babi.starts_markdown(chosen)
    assert "best of 3 starts" in line and "start 2 (seed 1002) went on" in line and "other starts' 8.0 minutes" in line
    # a rerun reads the choice back and trains no start again
    assert babi_joint.choose_start(args, tmp_path, _fake_starts([])[0]) == chosen
    # stopped after the copy but before the choice was written: the rerun chooses again, the same start
    (tmp_path / "starts.json").unlink()
    again, _ = _fake_starts([{"1": 1.0, "16": 50.0}, {"1": 10.0, "16": 2.0}, {"1": 30.0, "16": 40.0}])
    assert babi_joint.choose_start(args, tmp_path, again) == chosen
    # starts.json copied into a new workdir with the start folders but without the chosen model and curve:
    # the copy is made again, clock included, rather than the chosen seed trained afresh and its minutes lost
    for name in ("model.keras", "curve.json"):
        (tmp_path / name).unlink()
    assert babi_joint.choose_start(args, tmp_path, _fake_starts([])[0]) == chosen
    assert (tmp_path / "model.keras").read_text() == "model of seed 1002"
    assert [e["minutes"] for e in json.loads((tmp_path / "curve.json").read_text())] == [10.0, 12.0]
    # and without the start folder either, the rerun is refused
    for name in ("model.keras", "curve.json"):
        (tmp_path / name).unlink()
    (tmp_path / "start1" / "curve.json").unlink()
    with pytest.raises(ValueError, match="chose start 2, but neither"):
        babi_joint.choose_start(args, tmp_path, _fake_starts([])[0])


def test_start_zero_is_the_runs_own_seed():
    assert [babi_joint.start_seed(1, k) for k in range(3)] == [1, 1001, 2001]


def test_starts_refuse_a_workdir_of_another_choice_or_a_single_start_run(tmp_path, capsys):
    rounds, _ = _fake_starts([{"1": 1.0}, {"1": 2.0}])
    babi_joint.choose_start(parse_args(["--starts", "2"]), tmp_path / "a", rounds)
    with pytest.raises(ValueError, match="chose among 2 starts of 2 rounds"):
        babi_joint.choose_start(parse_args(["--starts", "3"]), tmp_path / "a", rounds)
    single = tmp_path / "b"
    single.mkdir()
    (single / "curve.json").write_text('[{"round": 0}]')
    with pytest.raises(ValueError, match="begun with one start"):
        babi_joint.choose_start(parse_args(["--starts", "2"]), single, rounds)
    for flags in (["--starts", "0"], ["--start-rounds", "0"]):
        with pytest.raises(SystemExit):
            parse_args(flags)
        assert "expected an integer >= 1" in capsys.readouterr().err


def test_starts_under_a_curriculum_are_chosen_on_the_tasks_their_rounds_train(tmp_path):
    # task 16 alone for the first two rounds: tasks 1 and 2 are untrained while the starts run, so their
    # errors (here 0 and 90) say nothing about a start and must not choose it
    argv = ["--tasks", "1", "2", "16", "--first-tasks", "16", "--first-tasks-rounds", "2", "--starts", "2"]
    args = parse_args(argv)
    assert babi_joint.start_trained_tasks(args, [1, 2, 16]) == ["16"]
    rounds, _ = _fake_starts([{"1": 0.0, "2": 0.0, "16": 50.0}, {"1": 90.0, "2": 90.0, "16": 1.0}])
    chosen = babi_joint.choose_start(args, tmp_path, rounds)
    assert chosen["chosen"] == 1 and chosen["chosen_on"] == ["16"]
    assert [t["train_error"] for t in chosen["by_start"]] == [50.0, 1.0]
    assert "by training error on task 16 after 2 rounds" in memo_babi.starts_markdown(chosen)
    # a curriculum shorter than the starts' rounds: every task is trained by the last start round only,
    # so the choice stays on the tasks trained throughout
    shorter = parse_args(argv[:-4] + ["--first-tasks-rounds", "1", "--starts", "2"])
    assert babi_joint.start_trained_tasks(shorter, [1, 2, 16]) == ["16"]
    assert babi_joint.start_trained_tasks(parse_args(["--starts", "2"]), [1, 2, 16]) == ["1", "2", "16"]
