"""Each cell learns a small memory task well above chance, in seconds."""

import keras
import numpy as np

import keras_relmem as kr
from keras_relmem.data import toy


def compile_model(model, learning_rate):
    model.compile(
        keras.optimizers.Adam(learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


class StopAtAccuracy(keras.callbacks.Callback):
    """Ends training once the training accuracy reaches `target`.

    Each backend draws its initial weights from its own random stream, so the
    epoch a small model converges at differs (EntNet: 12 epochs on tensorflow,
    a few more on jax); the bar on test accuracy is the same for all.
    """

    def __init__(self, target):
        super().__init__()
        self.target = target

    def on_epoch_end(self, epoch, logs=None):
        if (logs or {}).get("accuracy", 0.0) >= self.target:
            self.model.stop_training = True


def test_rmc_learns_associative_recall():
    keras.utils.set_random_seed(0)
    x, y = toy.associative_recall(2000, seed=0)
    x_test, y_test = toy.associative_recall(500, seed=1)
    model = keras.Sequential(
        [
            keras.Input(x.shape[1:]),
            keras.layers.RNN(kr.RelationalMemoryCell(mem_slots=2, head_size=16, num_heads=2)),
            keras.layers.Dense(6),
        ]
    )
    compile_model(model, 1e-2).fit(x, y, epochs=10, batch_size=64, verbose=0)
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    assert accuracy > 0.5, accuracy  # chance is 1/6


def test_entnet_learns_world_state():
    keras.utils.set_random_seed(0)
    story, query, answer = toy.world_state(2000, seed=0)
    s_test, q_test, a_test = toy.world_state(500, seed=1)
    story_in = keras.Input(story.shape[1:], dtype="int32")
    query_in = keras.Input(query.shape[1:], dtype="int32")
    embed = keras.layers.Embedding(7, 16, mask_zero=True)
    memory = keras.layers.RNN(kr.EntNetCell(num_blocks=4, units=16))(
        kr.EntNetEncoder()(embed(story_in))
    )
    logits = kr.EntNetReadout(3)([memory, kr.EntNetEncoder()(embed(query_in))])
    model = compile_model(keras.Model([story_in, query_in], logits), 1e-2)
    model.fit([story, query], answer, epochs=30, batch_size=64, verbose=0,
              callbacks=[StopAtAccuracy(0.97)])
    _, accuracy = model.evaluate([s_test, q_test], a_test, verbose=0)
    assert accuracy > 0.9, accuracy  # chance is 1/3


def test_toy_answers_are_right():
    x, y = toy.associative_recall(50, seed=3)
    for n in range(50):
        key = np.argmax(x[n, -1, :6])
        pair = [t for t in range(3) if x[n, t, key] == 1][0]
        assert np.argmax(x[n, pair, 6:12]) == y[n]
    story, query, answer = toy.world_state(50, seed=3)
    for n in range(50):
        moves = [loc for who, loc in story[n] if who == query[n, 0]]
        assert moves[-1] - 4 == answer[n]
