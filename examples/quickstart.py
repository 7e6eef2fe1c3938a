"""Train both memory cells on small generated tasks and print their accuracy.

A one-minute smoke test of an installation: the Relational Memory Core learns
associative recall (chance 17%) and the EntNet a miniature bAbI task 1
(chance 33%).

Usage:
    python examples/quickstart.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

import keras_relmem as kr  # noqa: E402
from keras_relmem.data import toy  # noqa: E402


def compiled(model):
    model.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main():
    keras.utils.set_random_seed(0)
    x, y = toy.associative_recall(4000, seed=0)
    x_test, y_test = toy.associative_recall(1000, seed=1)
    rmc = compiled(
        keras.Sequential(
            [
                keras.Input(x.shape[1:]),
                keras.layers.RNN(kr.RelationalMemoryCell(mem_slots=2, head_size=16, num_heads=2)),
                keras.layers.Dense(6),
            ]
        )
    )
    print("RelationalMemoryCell on associative recall")
    rmc.fit(x, y, epochs=15, batch_size=64, verbose=2)
    rmc_accuracy = rmc.evaluate(x_test, y_test, verbose=0)[1]

    story, query, answer = toy.world_state(4000, seed=0)
    s_test, q_test, a_test = toy.world_state(1000, seed=1)
    story_in = keras.Input(story.shape[1:], dtype="int32")
    query_in = keras.Input(query.shape[1:], dtype="int32")
    embed = keras.layers.Embedding(7, 16, mask_zero=True)
    memory = keras.layers.RNN(kr.EntNetCell(num_blocks=4, units=16))(
        kr.EntNetEncoder()(embed(story_in))
    )
    logits = kr.EntNetReadout(3)([memory, kr.EntNetEncoder()(embed(query_in))])
    entnet = compiled(keras.Model([story_in, query_in], logits))
    print("EntNet on a miniature bAbI task 1")
    entnet.fit([story, query], answer, epochs=10, batch_size=64, verbose=2)
    entnet_accuracy = entnet.evaluate([s_test, q_test], a_test, verbose=0)[1]

    print(f"\nRelationalMemoryCell, associative recall: test accuracy {rmc_accuracy:.1%} (chance 16.7%)")
    print(f"EntNet, where-is-the-entity:              test accuracy {entnet_accuracy:.1%} (chance 33.3%)")


if __name__ == "__main__":
    main()
