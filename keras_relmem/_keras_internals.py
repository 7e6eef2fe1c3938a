"""The only place keras-relmem touches Keras internals, each because no public API does the job.

Keras 3 has no public name for these; pyproject.toml bounds Keras to the major
version we test, and `tests/test_keras_internals.py` fails as soon as a Keras
release moves or changes any of them, so a breakage shows in CI rather than
in a user's run.

- `DropoutRNNCell`: `keras.layers.RNN` resets a cell's per-sequence dropout
  mask only when the cell is an instance of this mixin (Keras' own
  `LSTMCell`/`GRUCell` inherit it); without it a mask would leak from one
  batch into the next. Our cell keeps its mask in the mixin's
  `_dropout_mask` attribute, which `reset_dropout_mask()` clears.
- `no_automatic_dependency_tracking`: an optimizer that wraps two others
  builds them inside its own `build`; Keras' `LossScaleOptimizer` does the
  same under this decorator, so that the inner optimizers' variables are not
  tracked twice.
- `optimizer_own_variables`, `optimizer_trainable_variables`: an optimizer
  that wraps two others reports its own variables (the iteration counter,
  the learning rate) beside theirs, and applies gradients to the variables it
  was built with when `apply` is given none; Keras keeps both lists in
  private members (`LossScaleOptimizer` reads them the same way).
- `cell_dropout_mask`, `set_cell_dropout_mask`: the per-sequence mask lives in
  `DropoutRNNCell`'s `_dropout_mask` member, which its
  `reset_dropout_mask()` clears between sequences.
"""

from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell
from keras.src.utils.tracking import no_automatic_dependency_tracking

__all__ = ["DropoutRNNCell", "cell_dropout_mask", "no_automatic_dependency_tracking",
           "optimizer_own_variables", "optimizer_trainable_variables", "set_cell_dropout_mask"]


def optimizer_own_variables(optimizer):
    """The variables `optimizer` itself created (iterations, learning rate), not its slots'."""
    return list(optimizer._variables)


def optimizer_trainable_variables(optimizer):
    """The model variables `optimizer` was built for, in the order `build` received them."""
    return list(optimizer._trainable_variables)


def cell_dropout_mask(cell):
    """A `DropoutRNNCell`'s mask for the current sequence, or None before the first step."""
    return getattr(cell, "_dropout_mask", None)


def set_cell_dropout_mask(cell, mask):
    """Keep `mask` as `cell`'s mask until `cell.reset_dropout_mask()` (which `keras.layers.RNN` calls)."""
    cell._dropout_mask = mask
