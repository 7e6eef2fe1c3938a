"""Shared pytest set-up: quiet TensorFlow, point data loaders at ../shared/data.

Under `KERAS_BACKEND=jax` or `torch` only the backend-agnostic tests are
collected (the layers, the models and their docstring examples); the rest test TensorFlow-specific code
(tf.data pipelines, SavedModel export, serving, tf.distribute, the task
scripts) and run under the default tensorflow backend.
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if "KERAS_RELMEM_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["KERAS_RELMEM_DATA"] = str(SHARED_DATA)


BACKEND_AGNOSTIC = ("layers", "models", "test_docstring_examples.py")
if keras.backend.backend() != "tensorflow":
    collect_ignore_glob = [
        path.name
        for path in pathlib.Path(__file__).parent.iterdir()
        if path.name not in BACKEND_AGNOSTIC and (path.is_dir() or path.name.startswith("test_"))
        and path.name != "__pycache__"
    ]


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32 and a fresh name scope."""
    keras.config.set_dtype_policy("float32")
    keras.utils.clear_session()
    yield
    keras.config.set_dtype_policy("float32")

