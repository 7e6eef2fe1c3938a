"""MEMO's remaining details against independent NumPy computations.

The paper's I x I logit mixing (eq. 11), the halting network's numbers, the
Bhattacharyya distance's pairing of hops, n-step bootstrapping, the ACT branch
of inference, and the checks on `bias_init` and `n_step`. Each reference is
written from the paper (Banino et al. 2020, arXiv:2001.10913) or, for the GRU,
from Cho et al. 2014 with Keras' documented `reset_after=True` variant, with
indices chosen so that an off-by-one changes the numbers.
"""

import warnings

import keras
import numpy as np
import pytest

from keras_relmem import MEMO
from keras_relmem.layers.halting import ACTHalting, HaltingPolicy, act_weights, reinforce_halting_loss
from keras_relmem.models.memo import MEMOClassifier
from tests.helpers import assert_close, randomize_weights, weights_by_name
from tests.layers.test_memo import DC, SQ, A, B, D, H, I, S, inputs, make_memo, np_layer_norm, np_softmax


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_facts_logit_mixing_is_the_papers_eq11():
    """Eq. 11: one W_h in R^{I x I}, shared by the heads, mixes the logits over facts."""
    memo = make_memo(halting=None, logit_mixing="facts")
    randomize_weights(memo, seed=4)
    w = weights_by_name(memo)
    assert w["W_h"].shape == (I, I)
    facts, query = inputs(1)
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
    keys, values, q0 = memo.memory(facts, query)
    q1, attention, _ = memo.hop(keys, values, q0, mask=mask)

    flat = facts.reshape(B, I, S * DC)
    query0 = query.reshape(B, -1) @ w["query0/kernel"]
    reads = []
    for h in range(H):
        k = flat @ w["keys/kernel"][:, h * D:(h + 1) * D]
        v = flat @ w["values/kernel"][:, h * D:(h + 1) * D]
        raw = np.einsum("bid,bd->bi", k, query0[:, h * D:(h + 1) * D]) / np.sqrt(D)
        raw = np.where(mask, raw, 0.0)  # a padded fact contributes nothing to the mixture
        mixed = np.einsum("ij,bj->bi", w["W_h"], raw)
        weights = np_softmax(np.where(mask, mixed, -1e9))
        assert_close(attention[:, h], weights, atol=1e-5)
        reads.append(np.einsum("bi,bid->bd", weights, v))
    read = np.concatenate(reads, -1)
    expected = np_layer_norm(read @ w["W_q/kernel"] + w["W_q/bias"] + query0,
                             w["query_norm/gamma"], w["query_norm/beta"])
    assert_close(q1, expected, atol=1e-4)


def test_facts_logit_mixing_config_and_fixed_fact_count():
    memo = make_memo(logit_mixing="facts")
    clone = MEMO.from_config(memo.get_config())
    assert clone.get_config()["logit_mixing"] == "facts"
    facts, query = inputs()
    with pytest.raises(ValueError, match="built for 5 facts"):
        memo([facts[:, :3], query])
    with pytest.raises(ValueError, match="fixed number of facts"):
        MEMO(A, logit_mixing="facts").build([(None, None, S, DC), (None, SQ, DC)])
    with pytest.raises(ValueError, match="logit_mixing"):
        MEMO(A, logit_mixing="per_fact")
    # The identity start makes both forms equal before training.
    heads = make_memo(halting=None)
    mixed = make_memo(halting=None, logit_mixing="facts")
    for a, b in zip(heads.weights, mixed.weights):
        if a.shape == b.shape:
            b.assign(a)
    assert_close(mixed([facts, query])[0], heads([facts, query])[0], atol=1e-5)


def np_gru_reset_after(x, h, kernel, recurrent, bias, units):
    """Cho et al. 2014's GRU, Keras' reset_after variant: r gates (U h + b_rec)."""
    xz, xr, xh = np.split(x @ kernel + bias[0], 3, axis=-1)
    hz, hr, hh = np.split(h @ recurrent + bias[1], 3, axis=-1)
    z = sigmoid(xz + hz)
    r = sigmoid(xr + hr)
    candidate = np.tanh(xh + r * hh)
    return z * h + (1 - z) * candidate


def test_halting_policy_numbers_match_numpy():
    """§2.3: a GRU over [Bhattacharyya distance, one-hot hop], then an MLP to P(halt) and V."""
    units, mlp, hops = 5, 4, 6
    policy = HaltingPolicy(max_hops=hops, gru_units=units, mlp_units=mlp, inputs="distance")
    policy.build()
    randomize_weights(policy, seed=7, scale=0.5)
    w = weights_by_name(policy)
    distance = np.array([0.3, 1.7], "float32")
    state = np.random.default_rng(2).normal(size=(2, units)).astype("float32")
    hop = 2
    logit, value, new_state = policy(distance, hop=hop, state=state)

    features = np.zeros((2, 1 + hops), "float32")
    features[:, 0] = distance
    features[:, 1 + hop] = 1.0  # hop index 2 (0-based): the third one-hot slot
    h = np_gru_reset_after(features, state, w["gru/kernel"], w["gru/recurrent_kernel"], w["gru/bias"], units)
    hidden = np.maximum(h @ w["mlp/kernel"] + w["mlp/bias"], 0.0)
    assert_close(new_state, h, atol=1e-5)
    assert_close(logit, (hidden @ w["halt/kernel"] + w["halt/bias"])[:, 0], atol=1e-5)
    assert_close(value, (hidden @ w["value/kernel"] + w["value/bias"])[:, 0], atol=1e-5)
    # Another hop index changes the input, so the numbers.
    other, _, _ = policy(distance, hop=hop + 1, state=state)
    assert np.abs(keras.ops.convert_to_numpy(other) - keras.ops.convert_to_numpy(logit)).max() > 1e-4


def np_bhattacharyya(p, q):
    return -np.log(np.sum(np.sqrt(p * q), axis=-1))


def test_distances_pair_each_hop_with_the_one_before():
    """The halting input at hop t compares w^t with w^(t-1); before hop 1, uniform over valid facts."""
    memo = make_memo(max_hops=4)
    randomize_weights(memo, seed=3)
    facts, query = inputs(2)
    mask = np.array([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    out = memo.unrolled([facts, query], mask=mask)
    attention = keras.ops.convert_to_numpy(out["attention"])  # (b, N, H, I)
    uniform = mask / mask.sum(-1, keepdims=True)
    expected = [np_bhattacharyya(attention[:, 0], uniform[:, None, :]).mean(-1)]
    for t in range(1, 4):
        expected.append(np_bhattacharyya(attention[:, t], attention[:, t - 1]).mean(-1))
    assert_close(out["distances"], np.stack(expected, 1), atol=1e-5)
    # The pairing matters: hop t against hop t-2 gives other numbers.
    shifted = np_bhattacharyya(attention[:, 3], attention[:, 1]).mean(-1)
    assert np.abs(shifted - expected[3]).max() > 1e-4


def np_n_step_losses(halt_logits, values, halt_hop, reward, gamma, n, alpha, beta):
    """A2C-style n-step returns with the episode's one reward at its halting hop T.

    R_t = sum_{k=0}^{n-1} gamma^k r_{t+k} + gamma^n V_{t+n} while t + n <= T,
    else the discounted rewards to the end (Sutton & Barto §7.1; MEMO §2.3).
    """
    N = halt_logits.shape[0]
    T = halt_hop
    r = np.zeros(N + 1)  # r[t], 1-based: the reward for the action at hop t
    r[T] = reward
    V = np.concatenate([[np.nan], values])  # 1-based
    p = sigmoid(halt_logits)
    policy = value = 0.0
    for t in range(1, T + 1):
        if t + n <= T:
            R = sum(gamma**k * r[t + k] for k in range(n)) + gamma**n * V[t + n]
        else:
            R = sum(gamma**k * r[t + k] for k in range(T - t + 1))
        if t < N:  # the stop at N is forced, not chosen
            log_pi = np.log(p[t - 1]) if t == T else np.log(1 - p[t - 1])
            policy -= log_pi * (R - V[t])
        value += 0.5 * (R - V[t]) ** 2
    first_halt = [p[t] * np.prod(1 - p[:t]) for t in range(N - 1)] + [np.prod(1 - p[:N - 1])]
    hops = sum((t + 1) * first_halt[t] for t in range(N))
    return policy, value, policy + alpha * value + beta * hops


@pytest.mark.parametrize("n_step, halt_hop", [(1, 4), (2, 4), (2, 5), (3, 2), (4, 5)])
def test_n_step_bootstrap_matches_numpy(n_step, halt_hop):
    halt_logits = np.array([[-1.0, 0.5, -0.3, 0.8, 0.1]], "float32")  # N = 5
    values = np.array([[0.11, 0.23, 0.37, 0.52, 0.71]], "float32")  # distinct: an index slip shows
    gamma, alpha, beta = 0.8, 0.1, 0.01
    out = reinforce_halting_loss(halt_logits, values, np.array([halt_hop]), np.array([1.0]),
                                 gamma, alpha, beta, n_step=n_step)
    policy, value, loss = np_n_step_losses(halt_logits[0], values[0], halt_hop, 1.0, gamma, n_step, alpha, beta)
    assert_close(out["policy"], policy, atol=1e-5)
    assert_close(out["value"], value, atol=1e-5)
    assert_close(out["loss"], loss, atol=1e-5)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_n_step_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="n_step"):
        reinforce_halting_loss(np.zeros((1, 3), "float32"), np.zeros((1, 3), "float32"),
                               np.array([2]), np.array([1.0]), n_step=bad)
    with pytest.raises(ValueError, match="n_step"):
        HaltingPolicy(n_step=bad)


def np_act(halt_logits, answer_logits, epsilon):
    """Graves 2016 ACT (MEMO appendix F): stop at the first n with sum p >= 1 - eps, remainder at n."""
    p = sigmoid(halt_logits)
    N = len(p)
    n = next((k for k in range(N) if p[:k + 1].sum() >= 1 - epsilon), N - 1)
    weights = np.zeros(N)
    weights[:n] = p[:n]
    weights[n] = 1 - p[:n].sum()
    mixture = sum(weights[t] * np_softmax(answer_logits[t]) for t in range(N))
    return np.log(mixture), n + 1, weights


def test_act_inference_matches_numpy_and_act_weights():
    memo = make_memo(halting="act", max_hops=5)
    randomize_weights(memo, seed=11)
    memo.policy.halt.bias.assign([-0.4])  # P(halt) near 0.4: runs stop after 2-4 hops
    facts, query = inputs(5)
    logits, hops = memo([facts, query])
    out = memo.unrolled([facts, query])
    halt = keras.ops.convert_to_numpy(out["halt_logits"])
    answers = keras.ops.convert_to_numpy(out["answer_logits"])
    weights, _, stop = (keras.ops.convert_to_numpy(t) for t in act_weights(halt, memo.policy.epsilon))
    for b in range(B):
        expected, n, expected_weights = np_act(halt[b], answers[b], memo.policy.epsilon)
        assert 1 < n < 5, "the test needs a run that stops before N and after hop 1"
        assert int(keras.ops.convert_to_numpy(hops)[b]) == n == int(stop[b])
        assert_close(logits[b], expected, atol=1e-5)
        assert_close(weights[b], expected_weights, atol=1e-6)


def test_bias_init_warns_when_halting_at_hop_one_is_near_certain():
    with pytest.warns(UserWarning, match="-2/-5/-10"):
        HaltingPolicy(bias_init=2.0)  # the paper's smallest value, with its sign
    with pytest.warns(UserWarning, match="P\\(halt\\)"):
        ACTHalting(max_hops=3, bias_init=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MEMO(A, halting=HaltingPolicy(bias_init=-3.0))
        MEMO(A, halting=HaltingPolicy(bias_init=1.0))  # P(halt) 0.73: not near certain


def np_cross_entropy(logits, label):
    return -np.log(np_softmax(logits)[label])


@pytest.mark.parametrize("answer_loss", ["visited", "all", "last", "halted", "halted+last"])
def test_answer_loss_trains_the_visited_or_all_hops(answer_loss):
    """The task loss on hop-t answers: mean over t <= T ("visited"), over all N hops ("all"), hop N's
    alone ("last"), the halting hop T's alone ("halted") or T's and N's ("halted+last", N once if T = N)."""
    rng = np.random.default_rng(5)
    model = MEMOClassifier(num_answers=3, answer_loss=answer_loss)
    logits = rng.normal(size=(4, 5, 3)).astype("float32")
    target = np.array([0, 2, 1, 1])
    halt_hop = np.array([1, 3, 5, 2], "int32")
    out = {"answer_logits": logits, "halt_logits": rng.normal(size=(4, 5)).astype("float32"),
           "values": rng.uniform(size=(4, 5)).astype("float32"), "halt_hop": halt_hop}
    losses = model.losses_from_outputs(out, target)
    per_example = []
    for b in range(4):
        hops = {"visited": range(halt_hop[b]), "all": range(5), "last": [4], "halted": [halt_hop[b] - 1],
                "halted+last": sorted({halt_hop[b] - 1, 4})}[answer_loss]
        per_example.append(np.mean([np_cross_entropy(logits[b, t], target[b]) for t in hops]))
    assert_close(losses["task"], np.mean(per_example), atol=1e-5)
    # Either way the episode answers (and is rewarded) at its halting hop.
    assert_close(losses["logits"], logits[np.arange(4), halt_hop - 1], atol=0)


def test_answer_loss_is_checked_and_round_trips():
    with pytest.raises(ValueError, match="answer_loss"):
        MEMOClassifier(2, answer_loss="final")
    assert MEMOClassifier.from_config(MEMOClassifier(2, answer_loss="all").get_config()).answer_loss == "all"


def test_attention_supervision_adds_the_nll_of_each_supervised_hops_fact():
    """Strong supervision (Weston et al. 2015, memory networks, eq. 5's supporting-fact targets): hop t is
    shown the t-th supporting fact; its loss is -log of the attention (mean over heads) there, averaged over
    the questions that have a t-th fact, then over the supervised hops, times the weight."""
    rng = np.random.default_rng(11)
    model = MEMOClassifier(num_answers=3, answer_loss="last", attention_supervision=0.5, supervised_hops=2,
                           max_hops=3)
    attention = rng.dirichlet(np.ones(4), size=(3, 3, 2)).astype("float32")  # (b, N, H, I)
    support = np.array([[0, 2, 0, 1], [1, 0, 0, 0], [0, 0, 1, 2]], "int32")  # question 1 has one fact
    logits = rng.normal(size=(3, 3, 3)).astype("float32")
    target = np.array([0, 2, 1])
    out = {"answer_logits": logits, "halt_logits": rng.normal(size=(3, 3)).astype("float32"),
           "values": rng.uniform(size=(3, 3)).astype("float32"), "halt_hop": np.array([1, 2, 3], "int32"),
           "attention": attention, "support": support}
    hop1 = np.mean([-np.log(attention[0, 0, :, 3].mean()), -np.log(attention[1, 0, :, 0].mean()),
                    -np.log(attention[2, 0, :, 2].mean())])
    hop2 = np.mean([-np.log(attention[0, 1, :, 1].mean()), -np.log(attention[2, 1, :, 3].mean())])
    answer = np.mean([np_cross_entropy(logits[b, 2], target[b]) for b in range(3)])
    assert_close(model.losses_from_outputs(out, target)["task"], answer + 0.5 * (hop1 + hop2) / 2, atol=1e-5)
    unsupervised = {k: v for k, v in out.items() if k not in ("attention", "support")}
    assert_close(model.losses_from_outputs(unsupervised, target)["task"], answer, atol=1e-5)


def test_attention_supervision_reads_the_support_input_and_round_trips():
    rng = np.random.default_rng(2)
    x = {"facts": rng.integers(1, 9, size=(4, 5, 3)), "query": rng.integers(1, 9, size=(4, 2)),
         "support": np.array([[0, 1, 0, 0, 0]] * 4, "int32")}
    y = rng.integers(0, 2, size=(4,))
    plain = MEMOClassifier(2, vocab_size=10, embedding_dim=8, key_size=4, max_hops=2)
    plain(x)
    assert "attention" not in plain.training_outputs(x)  # no weight: the support input is ignored
    model = MEMOClassifier(2, vocab_size=10, embedding_dim=8, key_size=4, max_hops=2, attention_supervision=1.0)
    model(x)
    out = model.training_outputs(x)
    assert tuple(out["attention"].shape) == (4, 2, 4, 5) and "support" in out
    model.compile(keras.optimizers.Adam(1e-3))
    model.fit(x, y, verbose=0)  # the support input goes through the standard fit
    config = MEMOClassifier.from_config(model.get_config()).get_config()
    assert (config["attention_supervision"], config["supervised_hops"]) == (1.0, 1)
    with pytest.raises(ValueError, match="attention_supervision"):
        MEMOClassifier(2, attention_supervision=-1.0)
    with pytest.raises(ValueError, match="supervised_hops"):
        MEMOClassifier(2, max_hops=2, supervised_hops=3)
    # a trained model can withdraw its supervision (read when the step is traced) with the same checks
    model.set_attention_supervision(0.0, 2)
    assert (model.get_config()["attention_supervision"], model.get_config()["supervised_hops"]) == (0.0, 2)
    with pytest.raises(ValueError, match="supervised_hops"):
        model.set_attention_supervision(1.0, 3)
    assert (model.attention_supervision, model.supervised_hops) == (0.0, 2)  # a refused setting changes nothing


def np_entropy(logits):
    """Shannon entropy (nats) of softmax(logits): -sum_a p_a log p_a."""
    p = np_softmax(logits)
    return -np.sum(p * np.log(p), axis=-1)


def test_halting_policy_reads_the_distance_and_the_answer_entropy():
    """halting_inputs="distance+entropy": hop t's GRU input is [D_t, H(softmax(answer_t)), one-hot t].

    Recomputed from §2.3's GRU-then-MLP halting network over the unrolled
    hops' attention distances and answer logits.
    """
    units, hops = 8, 4
    memo = make_memo(max_hops=hops, halting=HaltingPolicy(inputs="distance+entropy", gru_units=units, mlp_units=5))
    randomize_weights(memo, seed=21, scale=0.5)
    w = weights_by_name(memo.policy)
    assert w["gru/kernel"].shape[0] == 2 + hops
    facts, query = inputs(6)
    out = memo.unrolled([facts, query])
    distances = keras.ops.convert_to_numpy(out["distances"])
    answers = keras.ops.convert_to_numpy(out["answer_logits"])
    state = np.zeros((B, units), "float32")
    expected = []
    for t in range(hops):
        features = np.zeros((B, 2 + hops), "float32")
        features[:, 0] = distances[:, t]
        features[:, 1] = np_entropy(answers[:, t])
        features[:, 2 + t] = 1.0
        state = np_gru_reset_after(features, state, w["gru/kernel"], w["gru/recurrent_kernel"], w["gru/bias"],
                                   units)
        hidden = np.maximum(state @ w["mlp/kernel"] + w["mlp/bias"], 0.0)
        expected.append((hidden @ w["halt/kernel"] + w["halt/bias"])[:, 0])
    assert_close(out["halt_logits"], np.stack(expected, 1), atol=1e-5)
    # Inference halts where the unrolled logits first pass the threshold.
    _, taken = memo([facts, query])
    p_halt = sigmoid(np.stack(expected, 1))
    first = [next((t + 1 for t in range(hops) if p_halt[b, t] > 0.5), hops) for b in range(B)]
    assert list(keras.ops.convert_to_numpy(taken)) == first
    # The check above catches a zero or misplaced entropy column only if the entropies are not ~0.
    entropy = np.stack([np_entropy(answers[:, t]) for t in range(hops)], 1)
    assert entropy.min() > 1e-3, "the test needs a non-zero entropy column"


def test_halting_inputs_are_checked_and_round_trip(tmp_path):
    memo = make_memo(halting=HaltingPolicy(inputs="distance"))
    assert MEMO.from_config(memo.get_config()).policy.inputs == "distance"
    assert memo.policy.num_inputs == 1  # the paper's distance alone
    assert make_memo().policy.num_inputs == 2  # the default adds the answer's entropy (chosen by measurement)
    with pytest.raises(ValueError, match="inputs"):
        HaltingPolicy(inputs="entropy")
    policy = HaltingPolicy(max_hops=3, gru_units=4, mlp_units=2, inputs="distance+entropy")
    policy.build()
    with pytest.raises(ValueError, match="2 feature"):
        policy(np.zeros((2,), "float32"), hop=0, state=policy.initial_state(2))
    model = MEMOClassifier(2, embedding_dim=8, key_size=4, num_heads=2, max_hops=3,
                           halting=HaltingPolicy(inputs="distance+entropy"))
    facts = np.random.default_rng(0).normal(size=(4, 3, 2, 5)).astype("float32")
    query = np.random.default_rng(1).normal(size=(4, 2, 5)).astype("float32")
    model.compile(keras.optimizers.Adam(1e-3))
    model.fit({"facts": facts, "query": query}, np.array([0, 1, 0, 1]), verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert loaded.memo.policy.inputs == "distance+entropy"
    x = {"facts": facts, "query": query}
    assert_close(loaded(x), model(x), atol=1e-5)
