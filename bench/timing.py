"""Steady-state step timing for the benchmarks."""

import time

import keras
import numpy as np


class StepTimer(keras.callbacks.Callback):
    """Records the wall time of every training batch."""

    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter() - self._start)


def seconds_per_step(model, x, y, batch_size, warmup=2):
    """Median seconds of a training step, after `warmup` steps (tracing, XLA)."""
    timer = StepTimer()
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
    steady = timer.times[warmup:]
    if not steady:
        raise ValueError("Give more batches than warm-up steps.")
    return float(np.median(steady))


def seconds_for_steps(model, dataset, steps, settle=3):
    """Wall seconds of `steps` training batches of `dataset` (repeated), after `settle` untimed batches.

    Trace or compile every batch shape first (one batch of each through
    `fit`): the settling batches only take up the steady state, so no
    tracing or XLA compilation lands in the timed steps.
    """
    model.fit(dataset, steps_per_epoch=settle, epochs=1, verbose=0, shuffle=False)
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    return time.perf_counter() - start
