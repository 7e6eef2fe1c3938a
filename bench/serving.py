"""What the serving benches share: an exported bAbI EntNet and our server started in its own process."""

import contextlib
import json
import os
import pathlib
import queue
import subprocess
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def export_babi_entnet(base, name="babi"):
    """Export an untrained bAbI EntNet (task 1 sizes: the weights do not change the cost) as `base/name/1`.

    Returns `(data, path)`: the task's `BabiData` (vocabularies and shapes) and the version folder.
    """
    from keras_relmem import export
    from keras_relmem.data import babi
    from keras_relmem.models import babi_qa

    data = babi.load_babi([1])
    model = babi_qa.build_babi_model("entnet", len(data.vocab), len(data.answer_vocab), data.story_length,
                                     data.sentence_length, data.query_length)
    return data, export.export_babi(model, data, base, name=name)


def free_port():
    """A port nobody listens on now, for `--rest_api_port` (whose 0 means no REST, not "pick one")."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(flags, log_path=None, python_options=(), timeout=600.0, script=None):
    """Start `serving/server.py --port 0 FLAGS...`; returns `(process, ports)` once it prints its ports.

    Args:
        flags: the server's other command-line flags, as `tensorflow_model_server` takes them.
        log_path: file for the server's stderr (its log), or None to drop it. A file, not a pipe: a pipe
            nobody reads blocks the server's logging once it holds 64 KiB.
        python_options: interpreter options before the script, e.g. `("-X", "faulthandler")` so that
            SIGABRT prints every thread's stack into the log.
        timeout: seconds to wait for the ports; a server still silent then is killed and reported.
        script: the server script to run (default this checkout's `serving/server.py`); another
            checkout's, to measure an old server beside the new one in one run.

    `ports` maps "grpc" and "rest" to the port numbers (0 for REST when it is off).

    Example:
        process, ports = start_server(["--model_name", "lm", "--model_base_path", "exports/lm"], "server.log")
    """
    # The file closes here once the child holds its own copy of it.
    with open(log_path, "w") if log_path is not None else contextlib.nullcontext(subprocess.DEVNULL) as log:
        process = subprocess.Popen(
            [sys.executable, *python_options, str(script or REPO / "serving" / "server.py"), "--port", "0", *flags],
            stdout=subprocess.PIPE, stderr=log, text=True, env=_env_for(script))
    # A reader thread, so that a server that hangs before printing cannot hang us; it goes on draining
    # stdout after the ports line, so the pipe never fills.
    lines = queue.Queue()
    threading.Thread(target=_drain, args=(process.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            problem = f"the server did not print its ports within {timeout:g} s"
            break
        if line is None:
            problem = "the server exited before it served"
            break
        if line.startswith("SERVING"):
            return process, {key: int(value) for key, value in (part.split("=") for part in line.split()[1:])}
    process.kill()
    process.wait()
    tail = pathlib.Path(log_path).read_text()[-2000:] if log_path is not None else "(its log was not kept)"
    raise RuntimeError(f"{problem}; its log ends:\n{tail}")


def _env_for(script):
    """The server's environment: another checkout's script imports that checkout's package, not ours."""
    if script is None:
        return None
    root = pathlib.Path(script).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}


def _drain(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def rotated(names, round_index):
    """`names` rotated by one each round, so that a drift of the machine touches each of them alike."""
    names = list(names)
    shift = round_index % len(names)
    return names[shift:] + names[:shift]


def alternated_rounds(result, out, rounds, measure_round, summarize):
    """Append `measure_round(index)` to `result["rounds"]` until it holds `rounds`, writing `result` (with
    `summarize(rounds)` as its summary) to `out` after each, so that a rerun goes on where this one stopped.

    Example:
        alternated_rounds(result, "runs/x.json", 6, lambda i: {name: measure(name) for name in rotated(NAMES, i)},
                          summarize)
    """
    out = pathlib.Path(out)
    while len(result["rounds"]) < rounds:
        index = len(result["rounds"])
        result["rounds"].append(measure_round(index))
        result["summary"] = summarize(result["rounds"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        print(f"round {index + 1}/{rounds} written to {out}", flush=True)
    return result


def save_and_report(result, out, markdown):
    """Write a serving bench's `result` as JSON to `out` and print its `markdown(result)`; returns 0."""
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(markdown(result))
    return 0
