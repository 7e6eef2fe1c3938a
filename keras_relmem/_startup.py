"""Quiet start-up: TensorFlow's pre-logging noise filtered from stderr (standard library only).

TensorFlow 2.21 writes a few lines to the process's stderr before its logging
is set up ("All log messages before absl::InitializeLog()", the oneDNN note,
"Could not find cuda drivers", at the first device query "failed call to
cuInit", and at the first graph with a boolean op oneDNN would take, an `E0000` line saying that
"oneDNN supports DT_BOOL only on platforms with AVX-512"), whatever `TF_CPP_MIN_LOG_LEVEL` says.
On a CPU machine they read as errors. `quiet_tensorflow` drops exactly those lines and passes every other one
on; `TF_CPP_MIN_LOG_LEVEL=0` shows them all. This module imports nothing but
the standard library, so that `keras_relmem/__init__.py` can use it before
TensorFlow is imported.

Example:
    >>> from keras_relmem._startup import NOISE
    >>> bool(NOISE.search("I0000 00:00:17 12 cudart_stub.cc:31] Could not find cuda drivers"))
    True
    >>> bool(NOISE.search("E0000 00:00:17 12 some_kernel.cc:9] out of memory"))
    False
"""

import contextlib
import os
import re
import sys
import tempfile

COMMAND_PREFIX = "relmem-"  # the console scripts' names (pyproject.toml)


def quiet_commands():
    """In one of the package's commands (`relmem-train-babi`, ...), default TensorFlow's C++ log
    level to 2 (errors only), as the task scripts under `tasks/` do; a library import leaves it.

    The level is read when TensorFlow is imported, which `import keras_relmem` does before any of
    the commands' own code runs, so it is set here, from the name the process was started as.
    """
    if os.path.basename(sys.argv[0] if sys.argv else "").startswith(COMMAND_PREFIX):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# TensorFlow's start-up lines on a machine without a GPU: informational, and on
# a CPU machine they read as errors. Anything else TensorFlow prints is kept.
NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|port\.cc:\d+\] oneDNN custom operations are on"
    r"|cudart_stub\.cc:\d+\] Could not find cuda drivers"
    r"|cuda_platform\.cc:\d+\] failed call to cuInit"
    r"|cuda_executor\.cc:\d+\].*(CUDA|cuda)"
    r"|Unable to register cu(DNN|FFT|BLAS) factory"
    r"|computation placer already registered"
    r"|cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized"
    r"|^To enable the following instructions: .*rebuild TensorFlow"
    r"|util\.cc:\d+\] oneDNN supports DT_\w+ only on platforms with AVX-512"
)


@contextlib.contextmanager
def quiet_tensorflow():
    """Within the block (importing TensorFlow, a first device query), its start-up noise is filtered
    out of stderr.

    The lines go to the C-level stderr (file descriptor 2), below Python's
    `sys.stderr`, so the descriptor itself is redirected to a temporary file for
    the import, then restored; the lines that are not start-up noise are
    written back to stderr in order. A Python exception raised inside still
    propagates, after stderr is restored.
    """
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no descriptor 2 (a closed or replaced stderr)
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines(keepends=True):
                if not NOISE.search(line):
                    sys.stderr.write(line)
            sys.stderr.flush()
