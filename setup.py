"""keras-relmem: relational and episodic memory layers for Keras 3."""

import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "keras_relmem" / "__init__.py").read_text()
).group(1)

EXTRAS = {
    # jax: the layer and model tests also run on Keras' JAX backend (CPU wheel).
    "test": ["pytest>=7", "pytest-timeout>=2", "pytest-xdist>=3", "jax>=0.4.30", "ruff>=0.5"],
    # aiohttp: the REST front end's HTTP server; prometheus_client: --monitoring_config_file.
    "serving": ["tensorflow-serving-api>=2.21", "grpcio-health-checking>=1.60", "aiohttp>=3.9",
                "prometheus_client>=0.17"],
    "tuning": ["keras-tuner>=1.4"],
    "viz": ["matplotlib>=3.7"],
    # scipy: the benches' statistics (rank correlations).
    "bench": ["scipy>=1.10"],
}
EXTRAS["all"] = sorted({req for reqs in EXTRAS.values() for req in reqs})

setup(
    name="keras-relmem",
    version=VERSION,
    description=(
        "Relational Memory Core, Recurrent Entity Network and MEMO as Keras 3 layers"
    ),
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_relmem", "keras_relmem.*"]),
    install_requires=[
        # The majors we test; keras_relmem/_keras_internals.py reaches into Keras 3.
        "tensorflow>=2.21,<3",
        "keras>=3,<4",
        "numpy",
        "tensorflow-datasets>=4.9",
        # tensorflow-datasets imports it at build time without requiring it.
        "importlib_resources",
        "tqdm",
        # --logdir, and KerasTuner's per-trial logs, need it; TF no longer pulls it in.
        "tensorboard",
    ],
    extras_require=EXTRAS,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
