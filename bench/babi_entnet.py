"""EntNet single-task bAbI under a fixed time budget per task, next to the paper.

Trains one EntNet per task with the paper's recipe (Adam 0.01 halved every 25
epochs, batch 32, clip 40, 20 blocks, d = 100) on en-10k for tasks 1, 2, 4,
15, 16, 19 and on en for task 3 (its en-10k train file is missing from our
data), stopping each when its time budget is spent, then prints test error
next to the EntNet paper's (Henaff et al. 2017, Table 2, 10k).

Usage:
    python bench/babi_entnet.py [--budget-minutes 10] [--tasks 1 2 3 4 15 16 19]
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_relmem.data import load_babi  # noqa: E402
from keras_relmem.data.babi import TASK_NAMES  # noqa: E402
from keras_relmem.models import build_babi_model  # noqa: E402
from keras_relmem.tasks.babi import RECIPES, per_task_accuracy  # noqa: E402
from keras_relmem.training import step_decay  # noqa: E402

PAPER_ERROR = {1: 0.0, 2: 0.1, 3: 4.1, 4: 0.0, 15: 0.0, 16: 0.2, 19: 2.3}


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` have passed (checked after every batch)."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.epochs = 0

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs = epoch + 1

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--tasks", type=int, nargs="+", default=sorted(PAPER_ERROR))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="also write the table here")
    args = parser.parse_args()
    recipe = RECIPES["entnet"]
    rows = []
    for task in args.tasks:
        data_name = "en" if task == 3 else "en-10k"
        keras.utils.set_random_seed(0)
        data = load_babi(task, data_name, data_dir=args.data_dir)
        model = build_babi_model(
            "entnet", len(data.vocab), len(data.answer_vocab),
            data.story_length, data.sentence_length, data.query_length,
        )
        model.compile(
            keras.optimizers.Adam(recipe["learning_rate"], clipnorm=recipe["clipnorm"]),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        budget = TimeBudget(args.budget_minutes * 60)
        model.fit(
            data.dataset("train", recipe["batch_size"]),
            validation_data=data.dataset("validation", 256),
            epochs=recipe["epochs"],
            callbacks=[budget, keras.callbacks.LearningRateScheduler(step_decay(recipe["learning_rate"]))],
            verbose=0,
            shuffle=False,
        )
        accuracy = per_task_accuracy(model, data)[task][0]
        rows.append({"task": task, "data": data_name, "epochs": budget.epochs,
                     "error": 100 * (1 - accuracy), "paper_error": PAPER_ERROR.get(task)})
        print(f"task {task:2d} ({TASK_NAMES[task]}, {data_name}): {budget.epochs} epochs, "
              f"test error {rows[-1]['error']:.1f}%", flush=True)
    print(f"\nEntNet, {args.budget_minutes:g} min per task on {os.cpu_count()} CPUs")
    print(f"{'task':>4}  {'name':24s} {'data':7s} {'epochs':>6s} {'error %':>8s} {'paper %':>8s}")
    for r in rows:
        paper = "" if r["paper_error"] is None else f"{r['paper_error']:.1f}"
        print(
            f"{r['task']:>4}  {TASK_NAMES[r['task']]:24s} {r['data']:7s} {r['epochs']:>6d} "
            f"{r['error']:8.1f} {paper:>8s}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
