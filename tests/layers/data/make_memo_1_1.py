"""Writes the MEMO models saved by keras-relmem 1.1 that tests/layers/test_memo_compat.py loads.

Run with keras-relmem 1.1.0 installed (commit c1aef93), from this folder:

    python make_memo_1_1.py

Each `.keras` file is a small `MEMOClassifier` in the 1.1 argument names; `memo_1_1_outputs.npz` holds
the inputs and the logits 1.1 computed, so a test can check that the weights, not only the shapes, come back.
"""

import keras
import numpy as np

from keras_relmem.models.memo import MEMOClassifier

MODELS = {
    # REINFORCE with every halting argument MEMO took in 1.1, linear start and bag initialisation
    "memo_reinforce_1_1": dict(halting="reinforce", halting_gru_units=4, halting_mlp_units=3, bias_init=-1.0,
                               halting_threshold=0.4, halting_inputs="distance", linear_start=True, bag_init=True,
                               gamma=0.9, alpha=0.2, beta=0.05, n_step=2),
    "memo_act_1_1": dict(halting="act", halting_gru_units=4, halting_mlp_units=3, act_epsilon=0.05, ponder_cost=0.02),
    "memo_fixed_1_1": dict(halting=None, logit_scale=2.0, coverage_penalty=1.0),
}

rng = np.random.default_rng(0)
facts = rng.integers(1, 12, size=(3, 5, 4)).astype("int32")
facts[0, 3:] = 0  # a padded story
query = rng.integers(1, 12, size=(3, 3)).astype("int32")
outputs = {"facts": facts, "query": query}
for name, settings in MODELS.items():
    keras.utils.set_random_seed(1)
    model = MEMOClassifier(3, vocab_size=12, embedding_dim=4, key_size=4, num_heads=2, max_hops=3, answer_units=5,
                           max_time=5, seed=1, **settings)
    model.build({"facts": (None, 5, 4), "query": (None, 3)})
    model.save(f"{name}.keras")
    outputs[name] = keras.ops.convert_to_numpy(model({"facts": facts, "query": query}))
np.savez("memo_1_1_outputs.npz", **outputs)

# Keras stores the weights file uncompressed; deflated, each file is a few KB.
import zipfile  # noqa: E402

for name in MODELS:
    with zipfile.ZipFile(f"{name}.keras") as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    with zipfile.ZipFile(f"{name}.keras", "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for filename, data in members.items():
            archive.writestr(filename, data)
