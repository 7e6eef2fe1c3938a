"""MEMO's halting settings, and batched inference with each example's hops.

Shared by the MEMO trainers and the benches that measure them: the halting
policy a config's REINFORCE settings (`gamma`, `beta`, `halting_inputs`)
describe (`halting_policy`), what they and `answer_loss` set on a resumed
MEMOClassifier (`apply_halting_arguments`), and `predict_with_hops` for
evaluation (Banino et al. 2020, §2.3: the halting policy and its training).
"""

import keras
import numpy as np


def halting_policy(args, **settings):
    """The `HaltingPolicy` of a config's (or a bench's flags') halting fields: `gamma`, `beta` and
    `halting_inputs` (its `inputs`); `settings` are more of its arguments."""
    from keras_relmem.layers.halting import HaltingPolicy

    return HaltingPolicy(gamma=float(args.gamma), beta=float(args.beta), inputs=args.halting_inputs, **settings)

def apply_halting_arguments(model, args):
    """Give a (resumed) MEMO the run's answer_loss, gamma and beta (and check halting_inputs).

    A `.keras` file brings back the settings it was saved with; the config says
    how training goes on from here (e.g. a run resumed with another gamma).
    Both are read when the training step is traced, so call this before the
    first `fit` of a sitting. Models without a halting policy are left alone.
    """
    from keras_relmem.layers.halting import HaltingPolicy

    policy = getattr(getattr(model, "memo", None), "policy", None)
    if isinstance(policy, HaltingPolicy):
        if policy.inputs != args.halting_inputs:  # the policy's input size is fixed by its weights
            raise ValueError(f"halting_inputs {args.halting_inputs!r}: the saved MEMO in this workdir was built "
                             f"with {policy.inputs!r}; use a new workdir for another halting input.")
        model.answer_loss = args.answer_loss
        policy.gamma, policy.beta = float(args.gamma), float(args.beta)
    return model


# The two models of the MEMO tasks: MEMO itself, and the end-to-end memory network style baseline of the paper's
# tables (one hop, no halting network, a fact's items summed so that facts are no longer separate).
VARIANTS = {"memo": {"label": "MEMO", "halting": "reinforce", "summed_facts": False},
            "emn": {"label": "EMN", "halting": None, "summed_facts": True}}


def build_classifier(config, num_answers, **settings):
    """A compiled `MEMOClassifier` for a config whose `model` is one of `VARIANTS`: "memo" (REINFORCE halting,
    `config.hops`) or "emn" (one hop, no halting network), seeded with `config.seed`, trained with Adam at its
    learning rate; `settings` are more MEMOClassifier arguments."""
    from keras_relmem.models.memo import MEMOClassifier

    keras.utils.set_random_seed(config.seed)
    halting = VARIANTS[config.model]["halting"]
    reinforce = {"answer_loss": config.answer_loss, "halting": halting_policy(config)} if halting else {"halting": None}
    model = MEMOClassifier(num_answers, max_hops=config.hops if halting else 1, seed=config.seed, **settings,
                           **reinforce)
    model.compile(keras.optimizers.Adam(config.learning_rate))
    return model


def check_warm_start(path):
    """`path` (None: no warm start) is a .keras file that can be read; else a FileNotFoundError or ValueError
    naming it."""
    import pathlib
    import zipfile

    if path is None:
        return
    if not pathlib.Path(path).is_file():
        raise FileNotFoundError(f"warm_start {path}: no such file; name a MEMO saved as .keras by an earlier run "
                                "(its workdir's model.keras)")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"warm_start {path} is not a readable .keras file (truncated or another format)")


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
    policy = {id(v) for v in model.memo.policy.weights} if model.memo.policy is not None else set()
    for variable in model.weights:
        if id(variable) in policy:
            continue
        if variable.path not in saved or tuple(saved[variable.path].shape) != tuple(variable.shape):
            raise ValueError(f"warm_start {path}: no weight {variable.path} of shape {tuple(variable.shape)} "
                             "there; start from a model with the same architecture settings.")
        variable.assign(saved[variable.path])
        copied += 1
    return copied


def label(model_name):
    """The table name of a model: "MEMO", or "EMN" for the single-hop baseline."""
    return VARIANTS[model_name]["label"]


# id(model) -> compiled forward; the function holds its model, so an id is never reused
# (a bench evaluates one or two models per process)
_HOPS_FORWARD = {}


def hops_forward(model):
    """`model(x, return_hops=True)` on a dict of NumPy batches, compiled once per model on TensorFlow.

    TensorFlow gets a `tf.function` (eager MEMO is slow there), traced once per
    model rather than once per evaluation round; JAX and torch call the model
    eagerly, so the evaluation runs where no TensorFlow is installed.
    """
    if keras.backend.backend() != "tensorflow":
        return lambda x: model(x, return_hops=True)
    if id(model) not in _HOPS_FORWARD:
        import tensorflow as tf

        forward = tf.function(lambda x: model(x, return_hops=True), reduce_retracing=True)
        _HOPS_FORWARD[id(model)] = lambda x: forward({k: tf.constant(v) for k, v in x.items()})
    return _HOPS_FORWARD[id(model)]


def predict_with_hops(model, x, batch_size=256):
    """`(logits, hops)` of `model(x, return_hops=True)` over a dict of NumPy arrays, in batches."""
    forward = hops_forward(model)
    logits, hops = [], []
    for start in range(0, len(next(iter(x.values()))), batch_size):
        out = forward({k: v[start:start + batch_size] for k, v in x.items()})
        logits.append(np.asarray(out["logits"]))
        hops.append(np.asarray(out["hops"], "float32"))
    return np.concatenate(logits), np.concatenate(hops)
