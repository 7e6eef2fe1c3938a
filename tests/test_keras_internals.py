"""The Keras internals `keras_relmem._keras_internals` relies on are still there and still behave.

Each test names what a Keras release would have to change to break us, so a
failure here says which part of that module to rewrite.
"""

import keras
import numpy as np

from keras_relmem import _keras_internals as internals
from keras_relmem import layers


def test_rnn_resets_the_mask_of_dropout_rnn_cells_only():
    # Keras' own cells use the mixin: it is the class RNN checks for.
    assert isinstance(keras.layers.LSTMCell(2), internals.DropoutRNNCell)
    cell = layers.RelationalMemoryCell(mem_slots=2, head_size=4, num_heads=1, dropout=0.5, seed=1)
    assert isinstance(cell, internals.DropoutRNNCell)
    rnn = keras.layers.RNN(cell)
    x = np.ones((3, 4, 5), "float32")
    rnn(x, training=True)
    # RNN primed one mask for the sequence and cleared it after: the next batch gets a fresh one.
    assert internals.cell_dropout_mask(cell) is None
    first = keras.ops.convert_to_numpy(cell.get_dropout_mask(x[:, 0]))
    assert first.shape == (3, 1, 3, 3) and set(np.unique(first)) <= {0.0, 2.0}
    # the mask is kept where the mixin's reset looks for it, and reset clears it
    assert internals.cell_dropout_mask(cell) is cell._dropout_mask
    cell.reset_dropout_mask()
    assert internals.cell_dropout_mask(cell) is None
    internals.set_cell_dropout_mask(cell, keras.ops.ones((1,)))
    cell.reset_dropout_mask()
    assert internals.cell_dropout_mask(cell) is None


def test_optimizers_keep_their_own_and_their_built_variables_where_the_helpers_read_them():
    w, b = keras.Variable(np.ones((2, 2), "float32"), name="w"), keras.Variable(np.zeros(2, "float32"), name="b")
    optimizer = keras.optimizers.Adam(0.1)
    optimizer.build([w, b])
    own = internals.optimizer_own_variables(optimizer)
    assert optimizer.iterations in own and all(v is not w and v is not b for v in own)
    assert [v.name for v in internals.optimizer_trainable_variables(optimizer)] == ["w", "b"]
    # Keras' public `variables` is own + slots: the helpers' list is its head
    assert optimizer.variables[:len(own)] == own


def test_no_automatic_dependency_tracking_keeps_inner_optimizer_variables_out_of_the_tracker():
    from keras_relmem.optimizers import SplitOptimizer

    weights = [keras.Variable(np.ones(2, "float32"), name="a"), keras.Variable(np.ones(3, "float32"), name="b")]
    optimizer = SplitOptimizer("adam", "rmsprop", route=lambda v: v.name == "b")
    optimizer.build(weights)
    paths = [v.path for v in optimizer.variables]
    assert len(paths) == len(set(paths))  # each inner optimizer's slot once, not tracked a second time
    assert len(optimizer.first.variables) + len(optimizer.second.variables) + len(optimizer._variables) == len(paths)
