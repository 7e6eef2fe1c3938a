"""Shared pytest set-up: quiet TensorFlow, point data loaders at ../shared/data.

Under `KERAS_BACKEND=jax` or `torch` only the backend-agnostic tests are
collected (the layers, the models and their docstring examples, less the
Keras-level checks run once on tensorflow); the rest test TensorFlow-specific code
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
elif os.environ.get("KERAS_RELMEM_DATA"):
    # The README exports a relative path (`../shared/data`); tests that run in a temporary
    # directory would read it from there, so it is resolved once, against where pytest started.
    os.environ["KERAS_RELMEM_DATA"] = os.path.abspath(os.environ["KERAS_RELMEM_DATA"])


BACKEND_AGNOSTIC = ("layers", "models", "test_docstring_examples.py")
# Checks that run once, on the default backend: the learning curves (minutes of training) go through the
# same keras.ops code on every backend, and on the others the suite already checks that code's numbers
# (NumPy references, gradients, masks, the layer harness's fit, .keras round trip and mixed precision,
# models fitted and reloaded, .keras files across backends). Skipping them there keeps CI within its time.
# Each entry is a test file or one test in it (`file::name`).
DEFAULT_BACKEND_ONLY = ("layers/test_learning.py",)
if keras.backend.backend() != "tensorflow":
    collect_ignore_glob = [
        path.name
        for path in pathlib.Path(__file__).parent.iterdir()
        if path.name not in BACKEND_AGNOSTIC and (path.is_dir() or path.name.startswith("test_"))
        and path.name != "__pycache__"
    ]


def pytest_collection_modifyitems(config, items):
    """Leave the default-backend-only tests out of the other backends' runs."""
    if keras.backend.backend() == "tensorflow":
        return
    tests_dir = pathlib.Path(__file__).parent
    skip = pytest.mark.skip(reason="a Keras-level check run once, on the tensorflow backend")
    for item in items:
        path = pathlib.Path(item.fspath).relative_to(tests_dir).as_posix()
        if path in DEFAULT_BACKEND_ONLY or f"{path}::{item.name}" in DEFAULT_BACKEND_ONLY:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32 and a fresh name scope."""
    keras.config.set_dtype_policy("float32")
    keras.utils.clear_session()
    yield
    keras.config.set_dtype_policy("float32")

