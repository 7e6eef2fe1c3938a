"""`--strategy NAME` -> a `tf.distribute` strategy (shared by tasks/ and tuning/)."""

import json
import os

STRATEGIES = ("auto", "default", "mirrored", "multiworker", "tpu")


def get_strategy(name="auto", tpu_address=None):
    """Create the distribution strategy called `name`.

    Args:
        name: `"auto"` (a TPU if one is configured, else `MirroredStrategy`
            over several GPUs, else the default strategy), `"default"` (no
            distribution), `"mirrored"` (all local GPUs, or the CPU),
            `"multiworker"` (`MultiWorkerMirroredStrategy`, cluster from
            `TF_CONFIG`) or `"tpu"` (`TPUStrategy`; `tpu_address` or the
            environment's TPU).
        tpu_address: optional TPU name or `grpc://` address.

    Returns:
        A `tf.distribute.Strategy`. Build the model and optimizer inside its
        `scope()`; batch sizes given to the tasks are global and are split
        across `strategy.num_replicas_in_sync` replicas.

    Example:

    ```python
    >>> import keras
    >>> strategy = get_strategy("mirrored")  # the CPU when there is no GPU
    >>> with strategy.scope():
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.compile("adam", "mse")
    >>> strategy.num_replicas_in_sync >= 1
    True

    ```
    """
    import tensorflow as tf

    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}; received {name!r}.")
    if name == "auto":
        if tpu_address or os.environ.get("TPU_NAME"):
            return get_strategy("tpu", tpu_address)
        if len(tf.config.list_logical_devices("GPU")) > 1:
            return tf.distribute.MirroredStrategy()
        return tf.distribute.get_strategy()
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multiworker":
        if "TF_CONFIG" in os.environ:
            json.loads(os.environ["TF_CONFIG"])  # a clear JSON error before TF's
        return _reduce_nested_values(tf.distribute.MultiWorkerMirroredStrategy())
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _reduce_nested_values(strategy):
    """Make `strategy.reduce` work the way Keras 3's `fit` calls it.

    Two Keras 3 / multi-worker incompatibilities (tensorflow#72388): `fit`
    reduces a whole `(features, labels)` batch in one call, which this
    strategy only accepts for single tensors, and it reduces scalar metrics
    with `axis=0`, which fails on a 0-d value. Reducing leaf by leaf, over
    the replicas only for scalars, gives the intended results.
    """
    import tensorflow as tf

    reduce = strategy.reduce

    def reduce_leaf(reduce_op, leaf, axis):
        if axis is not None and strategy.experimental_local_results(leaf)[0].shape.rank == 0:
            axis = None
        return reduce(reduce_op, leaf, axis)

    def nested_reduce(reduce_op, value, axis=None):
        return tf.nest.map_structure(lambda leaf: reduce_leaf(reduce_op, leaf, axis), value)

    strategy.reduce = nested_reduce
    return strategy


def is_chief():
    """True on the chief (or only) worker of a `TF_CONFIG` cluster."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    task = config.get("task", {})
    if not task:
        return True
    return task.get("type") == "chief" or (
        task.get("type") == "worker"
        and task.get("index", 0) == 0
        and "chief" not in config.get("cluster", {})
    )


def needs_static_batches(strategy):
    """TPUs and several replicas want `drop_remainder=True` (static shapes)."""
    import tensorflow as tf

    return strategy.num_replicas_in_sync > 1 or isinstance(strategy, tf.distribute.TPUStrategy)
