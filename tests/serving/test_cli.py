"""serving/server.py as users start it: tensorflow_model_server's flags, a config file, clean shutdown."""

import pathlib
import shutil
import signal
import subprocess
import sys

import pytest

from keras_relmem.serving import server as server_module
from keras_relmem.serving.client import ServingClient
from tests.serving.conftest import model_config_text

REPO = pathlib.Path(__file__).resolve().parents[2]


def _start(args):
    process = subprocess.Popen(
        [sys.executable, str(REPO / "serving" / "server.py"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = process.stdout.readline()
    if not line.startswith("SERVING"):
        process.kill()
        raise AssertionError(f"server did not start: {line!r} {process.stderr.read()[-2000:]}")
    ports = dict(part.split("=") for part in line.split()[1:])
    return process, int(ports["grpc"]), int(ports["rest"])


def test_server_command_line_with_a_model_config_file(exports, tmp_path):
    config = tmp_path / "models.config"
    config.write_text(model_config_text(exports.base))
    process, port, rest = _start(["--port", "0", "--rest_api_port", "0", "--model_config_file", str(config),
                                  "--file_system_poll_wait_seconds", "0"])
    try:
        client = ServingClient(f"127.0.0.1:{port}")
        assert len(client.answer("babi", ["Mary went to the kitchen."], "Where is Mary?")) == 3
        assert len(client.next_words("lm", "the")) == 3
        client.close()
        assert rest == 0  # --rest_api_port 0 turns REST off, as in tensorflow_model_server
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    assert "Successfully loaded servable version {name: babi version: 1}" in process.stderr.read()


def test_a_busy_port_is_an_error_not_a_shared_port(exports):
    from keras_relmem.serving.server import ModelServer
    from tests.serving.conftest import configs_for

    first = ModelServer(configs_for(exports.base, ["lm"]), port=0, poll_seconds=-1).start()
    try:
        with pytest.raises(OSError, match=f"127.0.0.1:{first.port}"):
            ModelServer(configs_for(exports.base, ["lm"]), port=first.port, poll_seconds=-1)
    finally:
        first.stop()


def test_server_command_line_single_model(exports, tmp_path):
    process, port, _ = _start(["--port", "0", "--model_name", "lm", "--model_base_path", str(exports.base / "lm")])
    try:
        client = ServingClient(f"127.0.0.1:{port}")
        assert client.status("lm")["model_version_status"][0]["state"] == "AVAILABLE"
        client.close()
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0


@pytest.mark.parametrize("text,message", [
    ("model_config_list { config { name: 'x' } }", "base_path"),
    ("model_config_list { config { nme: 'x' } }", "nme"),
    ("model_config_list { }", "model_config_list"),
    ("model_config_list { config { name: 'x' base_path: '/tmp' model_platform: 'pytorch' } }", "pytorch"),
])
def test_bad_model_config_files_are_named(text, message, tmp_path):
    path = tmp_path / "bad.config"
    path.write_text(text)
    args = server_module.build_parser().parse_args(["--model_config_file", str(path)])
    with pytest.raises(ValueError, match=message):
        server_module.model_configs(args)


def test_flags_that_cannot_work_together(tmp_path):
    parse = server_module.build_parser().parse_args
    with pytest.raises(ValueError, match="model_base_path"):
        server_module.model_configs(parse([]))
    with pytest.raises(ValueError, match="needs --enable_batching"):
        server_module.batching_options(parse(["--batching_parameters_file", "x"]))
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 8 } batch_timeout_micros { value: 100 }")
    assert server_module.batching_options(parse(["--enable_batching", "--batching_parameters_file", str(params)])) == {
        "max_batch_size": 8, "batch_timeout_micros": 100}


@pytest.mark.skipif(shutil.which("tensorflow_model_server") is None,
                    reason="tensorflow_model_server is not on PATH")
def test_official_tf_serving_runs_our_exports(exports, tmp_path):
    """The same client and exports against the real TF Serving binary."""
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "models.config"
    config.write_text(model_config_text(exports.base))
    process = subprocess.Popen(["tensorflow_model_server", f"--port={port}", f"--model_config_file={config}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = ServingClient(f"127.0.0.1:{port}")
        deadline = time.time() + 120
        while True:
            try:
                answers = client.answer("babi", ["Mary went to the kitchen."], "Where is Mary?")
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(1)
        assert len(answers) == 3
        assert len(client.next_words("lm", "the company")) == 3
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
