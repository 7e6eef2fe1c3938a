"""MEMO models saved by keras-relmem 1.1 load in 2.0, and 1.1's argument names say what to write now.

The `.keras` files in `data/` were written by 1.1.0 (`data/make_memo_1_1.py`, run at commit c1aef93), with
every halting argument MEMO took then, linear start and bag initialisation; `memo_1_1_outputs.npz` holds the
logits 1.1 computed on fixed inputs, so the weights, not only the shapes, must come back.
"""

import pathlib

import keras
import numpy as np
import pytest

from keras_relmem import MEMO, ACTHalting, HaltingPolicy
from keras_relmem.models.memo import MEMOClassifier
from tests.helpers import assert_close

DATA = pathlib.Path(__file__).parent / "data"
SAVED = np.load(DATA / "memo_1_1_outputs.npz")
X = {"facts": SAVED["facts"], "query": SAVED["query"]}


def load(name):
    return keras.saving.load_model(DATA / f"{name}.keras")


def test_a_reinforce_memo_of_1_1_loads_with_its_policy_and_weights(tmp_path):
    model = load("memo_reinforce_1_1")
    assert_close(model(X), SAVED["memo_reinforce_1_1"], atol=1e-5)
    policy = model.memo.policy
    assert type(policy) is HaltingPolicy
    assert (policy.max_hops, policy.gru_units, policy.mlp_units, policy.bias_init, policy.inputs) == (
        3, 4, 3, -1.0, "distance")
    # the REINFORCE settings 1.1 kept on the MEMOClassifier are the policy's now
    assert (policy.threshold, policy.gamma, policy.alpha, policy.beta, policy.n_step) == (0.4, 0.9, 0.2, 0.05, 2)
    assert model.memo.get_config()["kernel_initializer"] == "bags"  # 1.1's bag_init=True
    assert float(keras.ops.convert_to_numpy(model.memo.linear_phase)) == 1.0  # saved in its linear phase
    # saved again, it is a 2.0 file: the nested policy round-trips
    model.save(tmp_path / "again.keras")
    again = keras.saving.load_model(tmp_path / "again.keras")
    assert again.get_config() == model.get_config()
    assert_close(again(X), SAVED["memo_reinforce_1_1"], atol=1e-5)


def test_an_act_memo_of_1_1_loads_as_act_halting():
    model = load("memo_act_1_1")
    assert_close(model(X), SAVED["memo_act_1_1"], atol=1e-5)
    policy = model.memo.policy
    assert type(policy) is ACTHalting
    assert (policy.epsilon, policy.ponder_cost, policy.inputs) == (0.05, 0.02, "distance+entropy")
    assert not policy.value.trainable  # ACT has no baseline to train
    assert model.policy_variables() == []  # trained with the answers, not by REINFORCE


def test_a_memo_of_1_1_without_linear_start_loads_with_the_softmax():
    model = load("memo_fixed_1_1")  # halting=None, logit_scale and coverage_penalty: no linear_phase saved
    assert model.memo.policy is None
    assert float(keras.ops.convert_to_numpy(model.memo.linear_phase)) == 0.0
    assert (model.memo.logit_scale, model.memo.coverage_penalty) == (2.0, 1.0)
    assert_close(model(X), SAVED["memo_fixed_1_1"], atol=1e-5)


@pytest.mark.parametrize("name, value, new", [
    ("halting_gru_units", 8, "HaltingPolicy(gru_units=...)"),
    ("halting_mlp_units", 8, "HaltingPolicy(mlp_units=...)"),
    ("bias_init", -1.0, "HaltingPolicy(bias_init=...)"),
    ("halting_inputs", "distance", "HaltingPolicy(inputs=...)"),
    ("halting_threshold", 0.4, "HaltingPolicy(threshold=...)"),
    ("act_epsilon", 0.1, "ACTHalting(epsilon=...)"),
    ("bag_init", True, "kernel_initializer='bags'"),
    ("linear_start", True, "LinearStart"),
])
def test_1_1_arguments_of_memo_raise_a_type_error_naming_the_new_form(name, value, new):
    for make in (MEMO, MEMOClassifier):
        with pytest.raises(TypeError, match=f"{name}=.*{new.replace('(', '[(]').replace(')', '[)]')}"):
            make(2, **{name: value})


@pytest.mark.parametrize("name, policy", [("gamma", "HaltingPolicy"), ("alpha", "HaltingPolicy"),
                                          ("beta", "HaltingPolicy"), ("n_step", "HaltingPolicy"),
                                          ("ponder_cost", "ACTHalting")])
def test_1_1_training_arguments_of_the_classifier_name_the_policy_that_holds_them(name, policy):
    with pytest.raises(TypeError, match=f"halting={policy}[(]{name}=...[)]"):
        MEMOClassifier(2, **{name: 0.5})
    with pytest.raises(TypeError, match="inputs="):
        HaltingPolicy(num_inputs=2)


def test_a_policy_made_for_other_hops_is_refused_and_the_string_forms_build_the_defaults():
    with pytest.raises(ValueError, match="max_hops=4"):
        MEMO(2, max_hops=3, halting=HaltingPolicy(max_hops=4))
    assert type(MEMO(2, halting="reinforce").policy) is HaltingPolicy
    assert type(MEMO(2, halting="act").policy) is ACTHalting
    assert MEMO(2, halting="reinforce").policy.get_config()["inputs"] == "distance+entropy"
    with pytest.raises(ValueError, match="halting must be"):
        MEMO(2, halting="ponder")
