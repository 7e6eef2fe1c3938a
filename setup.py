"""A setuptools shim: the package metadata lives in pyproject.toml (`pip install .` and `python -m build` read it).

Kept so that tools and users that look for `setup.py` find the usual entry point.
"""

from setuptools import setup

setup()
