"""MEMO's halting options on the command line, and batched inference with each example's hops.

Shared by the MEMO task scripts and the benches that measure them: the
REINFORCE flags (`add_halting_arguments`), what they set on a MEMOClassifier
being built (`halting_settings`) or resumed (`apply_halting_arguments`), and
`predict_with_hops` for evaluation (Banino et al. 2020, §2.3: the halting
policy and its training).
"""

import keras
import numpy as np

from keras_relmem.models.memo import ANSWER_LOSSES, TRAINING_DEFAULTS


def add_halting_arguments(parser):
    """MEMO's REINFORCE options: --answer-loss, --gamma, --beta, --halting-inputs.

    The defaults are MEMOClassifier's, the ones that kept the halting policy
    from collapsing to one hop on joint bAbI and on PAI (its defaults before
    1.0, "visited" and 0.9, did collapse it: docs/results.md).
    """
    parser.add_argument("--answer-loss", choices=ANSWER_LOSSES, default=TRAINING_DEFAULTS["answer_loss"],
                        help="hops whose answers the cross-entropy trains (MEMOClassifier's answer_loss); "
                             "'visited' let the policy collapse to one hop; 'last' trains hop N's alone, "
                             "'halted' the sampled halting hop's, 'halted+last' both")
    parser.add_argument("--gamma", type=float, default=TRAINING_DEFAULTS["gamma"],
                        help="REINFORCE discount (0.9, MEMOClassifier's default before 1.0, is a 10%%-per-hop cost "
                             "that made one hop pay on the easy queries); set on a resumed model too")
    parser.add_argument("--beta", type=float, default=TRAINING_DEFAULTS["beta"],
                        help="weight of the expected-hops loss (MEMOClassifier's default 0.01): a cost of 0.01 a "
                             "hop on every query, which can outweigh a hard query type's gain when the policy "
                             "cannot tell the types apart; set on a resumed model too")
    parser.add_argument("--halting-inputs", choices=("distance", "distance+entropy"), default="distance+entropy",
                        help="what the halting network reads each hop with the hop index (MEMO's halting_inputs): "
                             "the attention distance and the entropy of the hop's answer (default, MEMO's), or the "
                             "paper's distance alone; fixed when the model is built")
    return parser

def halting_settings(args):
    """The MEMOClassifier settings the halting flags give, for building a MEMO or resuming one."""
    return {"answer_loss": args.answer_loss, "gamma": float(args.gamma), "beta": float(args.beta),
            "halting_inputs": args.halting_inputs}

def apply_halting_arguments(model, args):
    """Give a (resumed) MEMO the run's --answer-loss, --gamma and --beta (and check --halting-inputs).

    A `.keras` file brings back the settings it was saved with; the flags say
    how training goes on from here (e.g. a run resumed with another gamma).
    Both are read when the training step is traced, so call this before the
    first `fit` of a sitting. Models without a halting policy are left alone.
    """
    memo = getattr(model, "memo", None)
    if getattr(memo, "halting", None) == "reinforce":
        settings = halting_settings(args)
        inputs = settings.pop("halting_inputs")
        if memo.halting_inputs != inputs:  # the policy's input size is fixed by its weights
            raise SystemExit(f"--halting-inputs {inputs}: the saved MEMO in this --workdir was built with "
                             f"{memo.halting_inputs!r}; use a new --workdir for another halting input.")
        for name, value in settings.items():
            setattr(model, name, value)
    return model


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
