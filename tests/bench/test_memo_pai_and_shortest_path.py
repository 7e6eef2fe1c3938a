"""The MEMO benches' plumbing: query types, graph queries, the results file, resuming.

Each bench run here is one tiny round (seconds); the real runs are in bench/.
These benches use no TensorFlow, so they also run under `KERAS_BACKEND=jax`
(a machine with JAX or torch and no TensorFlow can run them).
"""

import json

import numpy as np
import pytest

from bench import common as bench_results
from bench import memo_pai, memo_shortest_path
from keras_relmem.data import synthetic
from keras_relmem.tasks import memo_options as memo_bench
from tests.helpers import sgdr_rate


def test_merge_result_nests_and_updates(tmp_path):
    path = tmp_path / "r.json"
    bench_results.merge_result(path, ("4", "EMN"), {"A-D": 50.0}, {"model": "emn"})
    bench_results.merge_result(path, "4", {"A-D": 97.0, "hops": {"A-D": 3.0}}, {"model": "memo"}, update=True)
    bench_results.merge_result(path, "4", {"A-D": 98.0}, {"model": "memo"}, update=True)
    results = json.loads(path.read_text())
    assert results["4"] == {"EMN": {"A-D": 50.0}, "A-D": 98.0, "hops": {"A-D": 3.0}}
    assert results["args"] == {"4/EMN": {"model": "emn"}, "4": {"model": "memo"}}
    bench_results.merge_result(path, ("rows", "a"), 1.0, None)  # no arguments: none recorded
    results = json.loads(path.read_text())
    assert results["rows"] == {"a": 1.0} and "rows/a" not in results["args"]


def test_pai_query_types_and_distances_by_hand():
    assert [memo_pai.query_name(k) for k in ("AB", "AC", "BE")] == ["A-B", "A-C", "B-E"]
    assert [memo_pai.distance(k) for k in ("AB", "DE", "AC", "BD", "AD", "AE")] == [0, 0, 1, 1, 2, 3]
    correct = np.array([1, 0, 1, 1, 1, 0], bool)
    hops = np.array([1, 2, 3, 4, 5, 6], "float32")
    kinds = np.array(["AB", "AB", "AC", "BD", "AD", "AD"])
    accuracy, mean_hops, by_distance = memo_pai.by_query_type(correct, hops, kinds)
    assert accuracy == {"A-B": 50.0, "A-C": 100.0, "B-D": 100.0, "A-D": 50.0}
    assert mean_hops == {"A-B": 1.5, "A-C": 3.0, "B-D": 4.0, "A-D": 5.5}
    assert by_distance == {"0": 1.5, "1": 3.5, "2": 5.5}
    stages = memo_pai.parse_curriculum("4:2,8:1,16:1")
    assert [memo_pai.sequences_at(stages, i) for i in range(6)] == [4, 4, 8, 16, 16, 16]


def test_pai_bench_writes_every_query_type_and_resumes(tmp_path):
    results = tmp_path / "pai.json"
    argv = ["--length", "4", "--episodes", "128", "--test", "120", "--curriculum", "2:1,3:1", "--max-hops", "2",
            "--halting-warmup", "1", "--workdir", str(tmp_path / "runs"), "--results", str(results)]
    memo_pai.main(argv + ["--budget-minutes", "0.001"])
    first = json.loads(results.read_text())["4"]
    assert {"A-B", "B-C", "C-D", "A-C", "B-D", "A-D"} <= set(first)
    assert set(first["hops"]) == {"A-B", "B-C", "C-D", "A-C", "B-D", "A-D"}
    assert first["hops_by_distance"].keys() == {"0", "1", "2"} and first["rounds"] == 1
    memo_pai.main(argv + ["--budget-minutes", str(first["minutes"] + 0.001)])  # a rerun continues
    second = json.loads(results.read_text())["4"]
    assert second["rounds"] == 2 and second["sequences"] == 3 and second["complete"]
    assert [e["learning_rate"] for e in second["curve"]] == pytest.approx([1e-3, 1e-3])  # constant by default


@pytest.mark.slow  # two bench sittings; the cosine itself is checked by hand above
def test_pai_bench_anneals_the_rate_across_a_resume(tmp_path):
    results = tmp_path / "pai.json"
    argv = ["--length", "3", "--episodes", "64", "--test", "30", "--curriculum", "2:1", "--max-hops", "2",
            "--final-learning-rate", "1e-4", "--workdir", str(tmp_path / "runs"), "--results", str(results)]
    memo_pai.main(argv + ["--budget-minutes", "0.001"])
    spent = json.loads(results.read_text())["3"]["minutes"]
    memo_pai.main(argv + ["--budget-minutes", str(2 * spent)])  # the second round starts half-way
    curve = json.loads(results.read_text())["3"]["curve"]
    assert curve[0]["learning_rate"] == pytest.approx(1e-3, rel=1e-6)
    assert curve[1]["learning_rate"] == pytest.approx(sgdr_rate(1e-3, 1e-4, spent, 2 * spent), rel=1e-4)


def test_shortest_path_queries_walk_the_true_path():
    data = synthetic.shortest_path(30, num_nodes=12, num_neighbours=3, min_path_length=3, max_path_length=3, seed=2)
    x, y = memo_shortest_path.training_examples(data, 3)
    assert len(y) == 60  # two intermediate nodes per graph
    for k in range(60):
        graph = k % 30
        edges = {tuple(e) for e in x["facts"][k] if e[0] > 0}  # word ids: node + 1, 0 = padding
        current, dest = x["query"][k]
        assert (current, y[k] + 1) in edges, "the answer is a neighbour of the query's current node"
        assert dest == data["path"][graph, 3] + 1
        assert y[k] == data["path"][graph, 1 + k // 30]


def test_shortest_path_bench_writes_the_papers_figures(tmp_path):
    results = tmp_path / "sp.json"
    memo_shortest_path.main(["--setting", "10/2/2", "--model", "emn", "--graphs", "64", "--test", "50",
                             "--budget-minutes", "0.001", "--workdir", str(tmp_path / "runs"),
                             "--results", str(results)])
    entry = json.loads(results.read_text())["10/2/2"]["EMN"]
    assert set(entry["hops"]) == {"first_node"} and entry["hops"]["first_node"] == 1.0
    assert 0 <= entry["first_node"] <= 100 and "second_node" not in entry and entry["complete"]


def test_memo_benches_default_to_the_policy_settings_that_did_not_collapse():
    # answer_loss="visited" with gamma=0.9 halted at hop 1 on bAbI and on PAI length 4
    # (README); the benches train every hop's answer and discount nothing by default.
    for module, argv in ((memo_pai, ["--length", "4", "--num-items", "20"]),
                         (memo_shortest_path, ["--setting", "10/2/2"])):
        model = module.build(module.parse_args(argv))
        assert (model.answer_loss, model.memo.policy.gamma) == ("all", 1.0)
        model = module.build(module.parse_args(argv + ["--answer-loss", "visited", "--gamma", "0.9"]))
        assert (model.answer_loss, model.memo.policy.gamma) == ("visited", 0.9)


def test_a_resumed_memo_takes_the_runs_halting_flags(tmp_path):
    # A saved model comes back with the gamma it was saved with; --gamma on the
    # resuming run must win (the flag's help says so).
    argv = ["--length", "3", "--num-items", "20", "--max-hops", "2"]
    model = memo_pai.build(memo_pai.parse_args(argv))
    model.save(tmp_path / "m.keras")
    import keras

    resumed = keras.saving.load_model(tmp_path / "m.keras")
    policy = resumed.memo.policy
    assert (resumed.answer_loss, policy.gamma, policy.beta) == ("all", 1.0, 0.01)
    flags = ["--answer-loss", "visited", "--gamma", "0.9", "--beta", "0"]
    memo_bench.apply_halting_arguments(resumed, memo_pai.parse_args(argv + flags))
    assert (resumed.answer_loss, policy.gamma, policy.beta) == ("visited", 0.9, 0.0)
    assert memo_pai.build(memo_pai.parse_args(argv + ["--beta", "0.5"])).memo.policy.beta == 0.5
    emn = memo_pai.build(memo_pai.parse_args(argv + ["--model", "emn"]))
    memo_bench.apply_halting_arguments(emn, memo_pai.parse_args(argv + ["--answer-loss", "visited"]))
    assert emn.answer_loss != "visited", "a model without a halting policy is left alone"
    # --halting-inputs sizes the policy's weights: it builds a model, and a resumed one must match it.
    distance = memo_pai.build(memo_pai.parse_args(argv + ["--halting-inputs", "distance"]))
    assert distance.memo.policy.inputs == "distance" and policy.inputs == "distance+entropy"
    with pytest.raises(ValueError, match="use a new workdir"):
        memo_bench.apply_halting_arguments(resumed, memo_pai.parse_args(argv + ["--halting-inputs", "distance"]))


def test_warm_start_copies_memo_and_leaves_a_fresh_halting_network(tmp_path):
    # --warm-start: the saved MEMO's answers at every hop, a new policy (here with other inputs).
    argv = ["--length", "3", "--num-items", "20", "--max-hops", "3"]
    source = memo_pai.build(memo_pai.parse_args(argv + ["--seed", "1", "--halting-inputs", "distance"]))
    x = memo_pai.inputs(memo_pai.episodes(4, 4, memo_pai.parse_args(argv), seed=5))
    source(x)
    source.save(tmp_path / "m.keras")
    flags = ["--warm-start", str(tmp_path / "m.keras"), "--halting-inputs", "distance+entropy"]
    model = memo_pai.build(memo_pai.parse_args(argv + flags))
    answers = [m.training_outputs(x, training=False)["answer_logits"] for m in (source, model)]
    np.testing.assert_allclose(np.asarray(answers[0]), np.asarray(answers[1]), atol=1e-5)
    assert model.memo.policy.gru.kernel.shape[0] == source.memo.policy.gru.kernel.shape[0] + 1
    with pytest.raises(ValueError, match="same architecture"):
        memo_pai.build(memo_pai.parse_args(["--length", "3", "--num-items", "30", "--max-hops", "3"] + flags))


def test_hop_profile_last_hop_is_what_inference_answers_when_it_never_halts(capsys):
    # --hop-profile's per-hop accuracy, checked against the bench's own test pass
    # when the policy is forced to run all N hops (halting logit bias -30).
    args = memo_pai.parse_args(["--length", "3", "--num-items", "20", "--max-hops", "3", "--test", "60",
                                "--curriculum", "2:1", "--halting-inputs", "distance+entropy"])
    model = memo_pai.build(args)
    data = memo_pai.episodes(args.test, 2, args, seed=10_000 + 2)  # the bench's test set at 2 sequences
    model(memo_pai.inputs(data))
    model.memo.policy.halt.bias.assign([-30.0])
    profile = memo_pai.hop_profile(args, model)
    correct, hops = memo_pai.test_pass(model, data, args.answer)
    assert set(hops) == {3}
    for kind in set(data["query_type"]):
        expected = round(100 * float(correct[data["query_type"] == kind].mean()), 1)
        assert profile["accuracy"][memo_pai.query_name(kind)][-1] == expected
        assert max(profile["p_halt"][memo_pai.query_name(kind)]) < 1e-6
    assert "entropy of the hop's answer" in capsys.readouterr().out
