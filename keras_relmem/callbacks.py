"""Training controls as Keras callbacks: what made our MEMO recipes train, and a wall-clock budget.

Each acts at the start of an epoch (with `fit(initial_epoch=k, epochs=k + 1)`
per round, a round is an epoch), and each changes something the compiled
training step really reads: a variable (a learning rate, MEMO's linear-start
phase), or, for the answer loss, which is a Python choice fixed when the step
is traced, the training step itself, rebuilt explicitly. Setting such an
attribute from outside without a rebuild would silently do nothing.

- `HaltingWarmup`: the halting network learns from epoch `epochs` on.
- `AnswerLossWarmup`: another answer loss for the first epochs.
- `LinearStart`: MEMO reads with linear attention for the first epochs.
- `TimeBudget`: stops training after a number of minutes (any model).

Learning rates that change at given epochs need nothing of ours: Keras'
`LearningRateScheduler` with `keras_relmem.callbacks.piecewise_rate`.

Example:

```python
>>> import keras, numpy as np
>>> from keras_relmem.models.memo import MEMOClassifier
>>> rng = np.random.default_rng(0)
>>> x = {"facts": rng.integers(1, 20, (8, 6, 4)), "query": rng.integers(1, 20, (8, 3))}
>>> y = rng.integers(0, 2, (8,))
>>> model = MEMOClassifier(2, vocab_size=20, embedding_dim=16, key_size=8, max_hops=3,
...                        halting="reinforce", answer_loss="all")
>>> model.compile(keras.optimizers.Adam(1e-3))
>>> controls = [HaltingWarmup(1), AnswerLossWarmup("last", 1)]
>>> _ = model.fit(x, y, epochs=2, verbose=0, callbacks=controls)
>>> model.answer_loss  # "last" in epoch 0, the model's own from epoch 1
'all'

```

Reference: Banino et al. 2020 (MEMO, arXiv:2001.10913, appendix D: the
halting network's own optimizer); Sukhbaatar et al. 2015 (end-to-end memory
networks, §4.2: linear start).
"""

import time

import keras

from keras_relmem.models.memo import ANSWER_LOSSES


def piecewise_rate(rates):
    """An `epoch -> learning rate` function for `keras.callbacks.LearningRateScheduler`.

    Args:
        rates: `{first epoch: rate}`; must name epoch 0. Each rate holds from
            its epoch until the next named one.

    Example:

    ```python
    >>> schedule = piecewise_rate({0: 3e-4, 65: 1e-4})
    >>> schedule(0), schedule(64), schedule(65), schedule(200)
    (0.0003, 0.0003, 0.0001, 0.0001)

    ```
    """
    rates = {int(epoch): float(rate) for epoch, rate in rates.items()}
    if 0 not in rates:
        raise ValueError(f"piecewise_rate needs the rate of epoch 0; got epochs {sorted(rates)}")
    bad = {epoch: rate for epoch, rate in rates.items() if epoch < 0 or rate <= 0}
    if bad:
        raise ValueError(f"piecewise_rate takes epochs >= 0 and rates > 0; got {bad}")
    starts = sorted(rates)

    def schedule(epoch, current=None):
        return rates[max(start for start in starts if start <= epoch)]

    return schedule


def _check_epochs(name, epochs):
    if not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"{name}: epochs must be an int >= 0; got {epochs!r}")
    return epochs


class HaltingWarmup(keras.callbacks.Callback):
    """MEMO's halting network learns only from epoch `epochs` on (its rate is 0 before).

    Until MEMO can answer, no number of hops earns a reward and the hop cost
    alone teaches the policy to stop after the first hop (on joint bAbI and
    on paired associative inference it did: docs/results.md). Sets the
    learning-rate variable of `model.halting_optimizer` each epoch, to 0 or
    to `model.halting_learning_rate`, so a resumed run is in the phase its
    epoch says. A model without a REINFORCE halting network is left alone.

    Args:
        epochs: int, epochs before the halting network learns.

    Example: see the module docstring.
    """

    def __init__(self, epochs):
        super().__init__()
        self.epochs = _check_epochs("HaltingWarmup", epochs)

    def on_epoch_begin(self, epoch, logs=None):
        optimizer = getattr(self.model, "halting_optimizer", None)
        if optimizer is not None:
            optimizer.learning_rate.assign(0.0 if epoch < self.epochs else self.model.halting_learning_rate)


class AnswerLossWarmup(keras.callbacks.Callback):
    """Train the first `epochs` epochs with the answer loss `warmup_loss`, then with `loss`.

    On bAbI's chains of facts (task 16) the chain is found only while no
    early hop is trained to answer ("last"), and an early hop must then be
    trained to answer ("all") before the policy can learn to stop there.
    `MEMOClassifier.answer_loss` is read when the training step is traced,
    so a change rebuilds the step (`make_train_function(force=True)`).

    Args:
        warmup_loss: one of `keras_relmem.models.memo.ANSWER_LOSSES`.
        epochs: int, epochs trained with `warmup_loss`.
        loss: the answer loss afterwards (default: the model's own when
            training begins).

    Example: see the module docstring.
    """

    def __init__(self, warmup_loss, epochs, loss=None):
        super().__init__()
        for name, value in (("warmup_loss", warmup_loss), ("loss", loss)):
            if value is not None and value not in ANSWER_LOSSES:
                raise ValueError(f"AnswerLossWarmup: {name} must be one of {ANSWER_LOSSES}; got {value!r}")
        self.warmup_loss, self.loss = warmup_loss, loss
        self.epochs = _check_epochs("AnswerLossWarmup", epochs)
        self._after = loss

    def on_train_begin(self, logs=None):
        if not hasattr(self.model, "answer_loss"):
            raise ValueError(f"AnswerLossWarmup needs a MEMOClassifier (a model with answer_loss); "
                             f"got {type(self.model).__name__}")
        if self._after is None:
            self._after = self.model.answer_loss

    def on_epoch_begin(self, epoch, logs=None):
        wanted = self.warmup_loss if epoch < self.epochs else self._after
        if self.model.answer_loss != wanted:
            self.model.answer_loss = wanted
            self.model.make_train_function(force=True)  # the traced step read the old loss


class LinearStart(keras.callbacks.Callback):
    """MEMO reads with linear attention (no softmax) for the first `epochs` epochs, then with the softmax.

    End-to-end memory networks' linear start (Sukhbaatar et al. 2015, §4.2).
    Sets the non-trainable `linear_phase` variable of the MEMO each epoch: 1
    (linear) for the first `epochs`, then 0 (a model not built yet is built by
    its first training step, and the phase is set after it).

    Args:
        epochs: int, epochs of linear attention.
        layer: the `MEMO` layer (default: the model's `memo` attribute).

    Example:

    ```python
    >>> import keras, numpy as np
    >>> from keras_relmem.models.memo import MEMOClassifier
    >>> rng = np.random.default_rng(0)
    >>> x = {"facts": rng.integers(1, 20, (8, 6, 4)), "query": rng.integers(1, 20, (8, 3))}
    >>> model = MEMOClassifier(2, vocab_size=20, embedding_dim=16, key_size=8)
    >>> model.compile(keras.optimizers.Adam(1e-3))
    >>> _ = model.fit(x, rng.integers(0, 2, (8,)), epochs=2, verbose=0, callbacks=[LinearStart(1)])
    >>> float(keras.ops.convert_to_numpy(model.memo.linear_phase))
    0.0

    ```
    """

    def __init__(self, epochs, layer=None):
        super().__init__()
        self.epochs = _check_epochs("LinearStart", epochs)
        self.layer = layer

    def on_epoch_begin(self, epoch, logs=None):
        layer = self.layer or getattr(self.model, "memo", None)
        if layer is None:
            raise ValueError("LinearStart needs a MEMO: the model's `memo`, or pass layer=")
        phase = 1.0 if epoch < self.epochs else 0.0
        if hasattr(layer, "linear_phase"):
            layer.linear_phase.assign(phase)
        else:  # built by the first training step; set after it
            self._pending = (layer, phase)

    def on_train_batch_end(self, batch, logs=None):
        pending = getattr(self, "_pending", None)
        if pending is not None and hasattr(pending[0], "linear_phase"):
            pending[0].linear_phase.assign(pending[1])
            self._pending = None


class TimeBudget(keras.callbacks.Callback):
    """Stops `fit` once `minutes` of training have passed (checked after every batch).

    A wall-clock budget instead of a number of epochs, e.g. to compare
    recipes at equal training time; `epochs` counts the epochs finished.
    The clock starts with each `fit` call (a resumed run gets its budget
    again), and validation at an epoch's end is counted with it.

    Args:
        minutes: float > 0, the budget.

    Example:

    ```python
    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", "mse")
    >>> budget = TimeBudget(0.0001)  # 6 ms: the first batch already spends it
    >>> _ = model.fit(np.ones((64, 3)), np.ones((64, 1)), batch_size=8, epochs=50,
    ...               verbose=0, callbacks=[budget])
    >>> budget.epochs < 50
    True

    ```
    """

    def __init__(self, minutes):
        super().__init__()
        if not minutes > 0:
            raise ValueError(f"TimeBudget needs minutes > 0; got {minutes!r}")
        self.seconds, self.epochs = 60.0 * minutes, 0

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs = epoch + 1

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True
