"""tf.distribute strategies: mirrored matches a single device; two workers agree."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from keras_relmem import distribute

REPO = pathlib.Path(__file__).resolve().parents[2]

MIRRORED_SCRIPT = r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np
import keras_relmem as kr
from keras_relmem import distribute

x = np.random.default_rng(0).normal(size=(16, 5, 8)).astype("float32")
y = np.random.default_rng(1).integers(3, size=16)

def first_step_loss(strategy):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((5, 8)), keras.layers.RNN(kr.RelationalMemoryCell(2, 4, num_heads=2)), keras.layers.Dense(3)]
        )
        model.compile(keras.optimizers.Adam(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    history = model.fit(ds, epochs=2, verbose=0)
    return history.history["loss"]

mirrored = distribute.get_strategy("mirrored")
assert mirrored.num_replicas_in_sync == 2, mirrored.num_replicas_in_sync
single = first_step_loss(distribute.get_strategy("default"))
both = first_step_loss(mirrored)
print(single, both)
np.testing.assert_allclose(both, single, rtol=1e-5)
print("OK")
"""


def test_mirrored_over_two_cpus_matches_no_strategy():
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr[-3000:]


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")
def test_two_workers_train_and_agree(tmp_path):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    command = [
        sys.executable, str(REPO / "tasks" / "train_babi.py"), "--strategy", "multiworker",
        "--task", "1", "--epochs", "2", "--max-steps", "4", "--batch-size", "16",
        "--embedding-dim", "16", "--workdir", str(tmp_path), "--no-export", "--verbose", "0",
    ]
    procs = []
    for index in range(2):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    chief = json.loads((tmp_path / "qa1" / "metrics.json").read_text())["epochs"]
    worker = json.loads((tmp_path / "qa1" / "worker_1" / "metrics.json").read_text())["epochs"]
    assert len(chief) == len(worker) == 2
    for a, b in zip(chief, worker):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    assert (tmp_path / "results.json").is_file()  # the chief reports


def test_strategy_names():
    assert distribute.get_strategy("default").num_replicas_in_sync == 1
    with pytest.raises(ValueError, match="strategy must be one of"):
        distribute.get_strategy("gpu")


def test_is_chief(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert distribute.is_chief()
    cluster = {"worker": ["a:1", "b:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
    assert not distribute.is_chief()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    assert distribute.is_chief()
