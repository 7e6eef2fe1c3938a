"""The halting policy's sampling (Banino et al. 2020, §2.3: hop t halts with probability sigmoid(halting logit t),
the run is forced to stop at N) and ACT's cumulative halting (Graves 2016, eqs. 5-6; MEMO appendix F), checked
against the distributions they must draw from, not against our code's reading of them."""

import math

import keras
import numpy as np

from keras_relmem.layers.halting import act_weights, sample_halting


def _sample(logits, seed=0):
    return keras.ops.convert_to_numpy(sample_halting(np.asarray(logits, "float32"), seed=seed))


def test_certain_logits_halt_where_they_must():
    rows, hops = 64, 4
    assert (_sample(np.full((rows, hops), -30.0)) == hops).all()  # never halts early: runs to N
    assert (_sample(np.full((rows, hops), 30.0)) == 1).all()  # halts at the first hop
    # certain to go on for two hops, then certain to halt
    assert (_sample(np.tile([-30.0, -30.0, 30.0, -30.0], (rows, 1))) == 3).all()


def test_the_share_halting_at_each_hop_is_the_policys_probability():
    """Over 6,000 seeded draws the halting hop follows P(1) = s1, P(2) = (1 - s1) s2, P(3) = the rest, with
    s_t = sigmoid(logit_t), each within 4 standard errors."""
    logits = [0.4, -0.3, 0.0]
    s = [1 / (1 + math.exp(-v)) for v in logits]
    expected = [s[0], (1 - s[0]) * s[1], (1 - s[0]) * (1 - s[1])]
    n = 6000
    hops = _sample(np.tile(logits, (n, 1)), seed=7)
    for hop, p in enumerate(expected, start=1):
        share = float(np.mean(hops == hop))
        assert abs(share - p) < 4 * math.sqrt(p * (1 - p) / n), (hop, share, p)


def test_act_halts_where_the_cumulative_probability_reaches_one_minus_epsilon():
    """ACT: the first hop n with p_1 + ... + p_n >= 1 - epsilon (else N); hops before n weigh p_t, hop n the
    remainder R, and the ponder cost is n + R."""
    epsilon = 0.01
    p = np.array([[0.3, 0.5, 0.4, 0.9],      # 0.3, 0.8, 1.2: stops at hop 3 with R = 0.2
                  [0.995, 0.5, 0.5, 0.5],    # 0.995 >= 0.99 at once: hop 1, R = 1
                  [0.1, 0.1, 0.1, 0.1]],     # never reaches 0.99: forced at N = 4, R = 0.7
                 "float32")
    logits = np.log(p / (1 - p))
    weights, ponder, stop = (keras.ops.convert_to_numpy(t) for t in act_weights(logits, epsilon))
    np.testing.assert_array_equal(stop, [3, 1, 4])
    np.testing.assert_allclose(weights, [[0.3, 0.5, 0.2, 0.0], [1.0, 0, 0, 0], [0.1, 0.1, 0.1, 0.7]], atol=1e-5)
    np.testing.assert_allclose(ponder, [3.2, 2.0, 4.7], atol=1e-5)
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-5)
