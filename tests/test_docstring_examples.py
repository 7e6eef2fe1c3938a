"""Every docstring example of the package runs and prints what it shows.

The examples are doctests inside the Markdown fences of the docstrings. The
layer and model modules are backend-agnostic and run on every Keras backend;
the rest (tf.data, SavedModel export, tf.distribute, TFDS) on tensorflow.
"""

import doctest
import importlib
import os
import pkgutil

import keras
import pytest

import keras_relmem

BACKEND_AGNOSTIC = (
    "keras_relmem.layers",
    "keras_relmem.models",
    "keras_relmem.optimizers",
    "keras_relmem.data.vocab",
    "keras_relmem.data.synthetic",
)
NEEDS_DATA = ("keras_relmem.data.lm", "keras_relmem.data.tfds_builders", "keras_relmem.export")


def _modules():
    names = [keras_relmem.__name__] + [
        info.name for info in pkgutil.walk_packages(keras_relmem.__path__, "keras_relmem.")
    ]
    return sorted(names)


def _params():
    for name in _modules():
        agnostic = name.startswith(BACKEND_AGNOSTIC)
        marks = []
        if not agnostic and keras.backend.backend() != "tensorflow":
            marks.append(pytest.mark.skip(reason="TensorFlow-specific module"))
        if name.startswith(NEEDS_DATA) and not os.environ.get("KERAS_RELMEM_DATA"):
            marks.append(pytest.mark.skip(reason="needs KERAS_RELMEM_DATA"))
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("module_name", _params())
def test_docstring_examples_run(module_name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes files writes here
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, module_name, globs=dict(vars(module))):
        if test.examples:
            runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} docstring example(s) of {module_name} failed"
