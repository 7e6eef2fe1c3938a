"""Builds `keras_relmem_native._grpc_front_end` against the system's gRPC C++ library, found with pkg-config.

Debian/Ubuntu: `apt-get install libgrpc++-dev pkg-config`, then `pip install ./native`.
"""

import shlex
import subprocess

from pybind11.setup_helpers import Pybind11Extension
from setuptools import setup


def pkg_config(*args):
    try:
        return shlex.split(subprocess.run(["pkg-config", *args, "grpc++"], capture_output=True, text=True,
                                          check=True).stdout)
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(
            "keras-relmem-native needs the gRPC C++ library and pkg-config "
            "(Debian/Ubuntu: apt-get install libgrpc++-dev pkg-config)") from error


extension = Pybind11Extension(
    "keras_relmem_native._grpc_front_end",
    ["src/grpc_front_end.cc"],
    cxx_std=17,
    extra_compile_args=pkg_config("--cflags"),
    extra_link_args=pkg_config("--libs"),
)
setup(ext_modules=[extension])
