"""What the PAI and shortest-path benches share about MEMO: a warm start from a trained MEMO, the table
name of a model, and a compiled classifier from their flags. The halting flags and batched inference with
hops are the library's (`keras_relmem.tasks.memo_options`), imported here for them.
"""

import keras

from keras_relmem.tasks.memo_options import (  # noqa: F401
    add_halting_arguments,
    apply_halting_arguments,
    halting_settings,
    predict_with_hops,
)


def warm_start_memo(model, path):
    """Copy every weight but the halting network's from the saved MEMOClassifier at `path` into `model`.

    A trained MEMO with a fresh halting policy, e.g. to try other halting
    inputs on a model whose answers are already learned. Both models must be
    built; weights are matched by path (`.../memo/keys/kernel`) and shape.
    Returns the number of weights copied.
    """
    source = keras.saving.load_model(path)
    saved = {v.path: v for v in source.weights}
    copied = 0
    for variable in model.weights:
        if "halting_policy" in variable.path:
            continue
        if variable.path not in saved or tuple(saved[variable.path].shape) != tuple(variable.shape):
            raise SystemExit(f"--warm-start {path}: no weight {variable.path} of shape {tuple(variable.shape)} "
                             "there; start from a model with the same architecture flags.")
        variable.assign(saved[variable.path])
        copied += 1
    return copied


def label(model_name):
    """The table name of `--model`: "MEMO", or "EMN" for the single-hop baseline."""
    return "MEMO" if model_name == "memo" else "EMN"


def build_classifier(args, num_answers, **settings):
    """A compiled `MEMOClassifier` for `--model memo` (REINFORCE halting, `--max-hops`) or `--model emn`
    (one hop, no halting network), seeded with `--seed`, trained with Adam at `--learning-rate`."""
    from keras_relmem.models.memo import MEMOClassifier

    keras.utils.set_random_seed(args.seed)
    memo = args.model == "memo"
    reinforce = halting_settings(args) if memo else {}
    model = MEMOClassifier(num_answers, max_hops=args.max_hops if memo else 1,
                           halting="reinforce" if memo else None, seed=args.seed, **settings, **reinforce)
    model.compile(keras.optimizers.Adam(args.learning_rate))
    return model


