"""A TF-Serving-compatible model server: the same flags, gRPC services and REST API.

Run it as `python serving/server.py` with
`tensorflow_model_server`'s flags:

    python serving/server.py --port=8500 --rest_api_port=8501 \\
        --model_name=babi --model_base_path=$PWD/runs/babi/export/babi_entnet_qa1

It serves the latest version under the base path, loads new version
directories as they appear (every `--file_system_poll_wait_seconds`), and
keeps the previous version serving when a new one fails to load. One gRPC
server (grpc's asyncio server) and one REST server (aiohttp) run on one event
loop and share one Predict path (`core.ServingCore.predict`).
"""

import argparse
import asyncio
import concurrent.futures
import gc
import logging
import os
import pathlib
import signal
import sys
import threading
import time

import grpc
from google.protobuf import text_format
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

from keras_relmem.serving.batching import parse_batching_parameters
from keras_relmem.serving.core import ServingCore
from keras_relmem.serving.grpc_api import ModelService, PredictionService
from keras_relmem.serving.manager import ModelManager
from keras_relmem.serving.metrics import ServingMetrics, read_monitoring_config
from keras_relmem.serving.rest_api import RestServer
from keras_relmem.serving.servable import MAX_ROWS_PER_CALL

log = logging.getLogger("keras_relmem.serving")


def build_parser():
    parser = argparse.ArgumentParser(
        description="Serve SavedModels over TF Serving's gRPC and REST APIs (flags as tensorflow_model_server).",
    )
    parser.add_argument("--port", type=int, default=8500, help="gRPC port (default 8500; 0 picks a free one)")
    parser.add_argument("--rest_api_port", type=int, default=0, help="REST port; 0 (default) turns REST off")
    parser.add_argument("--model_name", default="default", help="name of the single model to serve")
    parser.add_argument("--model_base_path", help="folder holding the model's numeric version folders")
    parser.add_argument("--model_config_file", help="ModelServerConfig text proto (several models)")
    parser.add_argument(
        "--file_system_poll_wait_seconds", type=float, default=1.0,
        help="seconds between checks for new versions; 0 checks once, negative never (default 1)",
    )
    parser.add_argument("--enable_batching", action="store_true", help="merge concurrent requests into batches")
    parser.add_argument(
        "--batching_parameters_file", help="BatchingParameters text proto (max_batch_size, batch_timeout_micros)"
    )
    parser.add_argument("--max_batch_size", type=int, default=None, help="rows per merged batch (default 32)")
    parser.add_argument("--batch_timeout_micros", type=int, default=None, help="wait for company (default 2000)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 for all)")
    parser.add_argument(
        "--max_request_bytes", type=int, default=64 << 20,
        help="largest request accepted over gRPC and REST (default 64 MiB)",
    )
    parser.add_argument(
        "--max_rows_per_call", type=int, default=MAX_ROWS_PER_CALL,
        help="rows one model call takes at most: a larger request runs as slices of this many, so its memory "
             f"stays bounded (default {MAX_ROWS_PER_CALL}: the quick start's model then stays under about 1 GB)",
    )
    parser.add_argument(
        "--rest_api_timeout_in_ms", type=int, default=30000,
        help="REST: a request must arrive and be answered within this time (504/408 otherwise), and idle "
             "keep-alive connections close after it (default 30000)",
    )
    parser.add_argument("--rest_api_num_threads", type=int, default=None,
                        help="worker threads for model work, for both APIs (default 4 per CPU)")
    parser.add_argument("--rest_api_max_json_bytes", type=int, default=16 << 20,
                        help="largest REST JSON body; larger ones get 413 unread (default 16 MiB)")
    parser.add_argument("--rest_api_max_json_depth", type=int, default=64,
                        help="deepest JSON nesting accepted over REST; deeper gets 400 unparsed (default 64)")
    parser.add_argument(
        "--monitoring_config_file",
        help="MonitoringConfig text proto; prometheus_config { enable: true path: \"...\" } serves "
             "Prometheus metrics on the REST port at that path",
    )
    parser.add_argument(
        "--tensorflow_intra_op_parallelism", type=int, default=0,
        help="threads one op may use; 0 (default) lets TensorFlow choose (one per core)",
    )
    parser.add_argument(
        "--tensorflow_inter_op_parallelism", type=int, default=0,
        help="ops run at once; 0 (default) picks one a core less one, at least 1 (TensorFlow alone picks one a "
             "core): the server's own Python and gRPC threads need a core. With --enable_batching on a machine "
             "of few cores, 1 and 1 leave the cores to the batches (see docs/serving.md)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every REST request")
    return parser


def model_configs(args):
    """`ModelConfig` protos from `--model_config_file` or `--model_name/--model_base_path`."""
    if args.model_config_file and args.model_base_path:
        raise ValueError("give --model_config_file or --model_base_path, not both")
    if args.model_config_file:
        path = pathlib.Path(args.model_config_file)
        if not path.is_file():
            raise ValueError(f"--model_config_file {path} does not exist")
        config = model_server_config_pb2.ModelServerConfig()
        try:
            text_format.Parse(path.read_text(), config)
        except text_format.ParseError as error:
            raise ValueError(f"{path}: {error}") from error
        if config.WhichOneof("config") != "model_config_list" or not config.model_config_list.config:
            raise ValueError(f"{path}: expected model_config_list {{ config {{ name: ... base_path: ... }} }}")
        configs = list(config.model_config_list.config)
        for entry in configs:
            if not entry.name or not entry.base_path:
                raise ValueError(
                    f"{path}: every config needs a name and a base_path; "
                    f"got {text_format.MessageToString(entry, as_one_line=True)!r}"
                )
            if entry.model_platform and entry.model_platform != "tensorflow":
                raise ValueError(
                    f"{path}: model {entry.name}: model_platform {entry.model_platform!r} "
                    "is not served (only 'tensorflow')"
                )
        return configs
    if not args.model_base_path:
        raise ValueError("give --model_base_path (with --model_name) or --model_config_file")
    config = model_server_config_pb2.ModelConfig(
        name=args.model_name, base_path=os.path.abspath(args.model_base_path), model_platform="tensorflow"
    )
    return [config]


def batching_options(args):
    if not args.enable_batching:
        if args.batching_parameters_file:
            raise ValueError("--batching_parameters_file needs --enable_batching")
        return None
    options = {"max_batch_size": 32, "batch_timeout_micros": 2000}
    if args.batching_parameters_file:
        options.update(parse_batching_parameters(pathlib.Path(args.batching_parameters_file).read_text()))
    if args.max_batch_size is not None:
        options["max_batch_size"] = args.max_batch_size
    if args.batch_timeout_micros is not None:
        options["batch_timeout_micros"] = args.batch_timeout_micros
    if options["max_batch_size"] < 1 or options["batch_timeout_micros"] < 0:
        raise ValueError(f"batching: max_batch_size must be >= 1 and batch_timeout_micros >= 0; got {options}")
    return options


def rest_options_from(args):
    """`RestServer` keyword arguments from the `--rest_api_*` flags (ValueError naming a bad one)."""
    for flag in ("rest_api_timeout_in_ms", "rest_api_max_json_bytes", "rest_api_max_json_depth", "max_rows_per_call"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag} must be >= 1; got {getattr(args, flag)}")
    if args.rest_api_num_threads is not None and args.rest_api_num_threads < 1:
        raise ValueError(f"--rest_api_num_threads must be >= 1; got {args.rest_api_num_threads}")
    return {
        "timeout": args.rest_api_timeout_in_ms / 1000,
        "max_json_bytes": args.rest_api_max_json_bytes,
        "max_json_depth": args.rest_api_max_json_depth,
    }


class ModelServer:
    """The gRPC server (PredictionService, ModelService, health) and the optional REST server, on one event loop.

    Args:
        configs: `ModelConfig` protos.
        port: gRPC port (0 picks a free one; see `.port`).
        rest_api_port: REST port, 0 for none (-1 picks a free one; see `.rest_port`).
        host: address to bind.
        poll_seconds, batching, max_request_bytes, max_rows: as the flags
            (`--file_system_poll_wait_seconds`, ..., `--max_rows_per_call`).
        num_threads: worker threads for model work (`--rest_api_num_threads`).
        rest_options: keyword arguments for `RestServer` (`timeout`,
            `max_json_bytes`, `max_json_depth`).
        metrics_path: serve Prometheus metrics at this REST path (None: no
            metrics; as `--monitoring_config_file`). Needs a REST port.

    Example:

    ```python
    server = ModelServer(configs, port=0, rest_api_port=-1).start()
    print(server.port, server.rest_port)
    server.stop()
    ```
    """

    def __init__(self, configs, port=8500, rest_api_port=0, host="127.0.0.1", poll_seconds=1.0,
                 batching=None, max_request_bytes=64 << 20, max_rows=MAX_ROWS_PER_CALL, num_threads=None,
                 rest_options=None, metrics_path=None):
        if metrics_path and not rest_api_port:
            raise ValueError("Prometheus metrics are served on the REST port: give --rest_api_port too")
        self.host = host
        self.manager = ModelManager(configs, poll_seconds, max_rows=max_rows)
        self.core = ServingCore(self.manager, batching, num_threads=num_threads)
        self.core.metrics = ServingMetrics() if metrics_path else None
        self.health = health.HealthServicer()  # synchronous: runs on gRPC's thread pool for such handlers
        self._health_statuses = {}  # what `health` was last told, per service
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="serving-loop", daemon=True)
        self._thread.start()
        options = [
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.max_send_message_length", -1),
            # gRPC sets SO_REUSEPORT by default, so a second server on a busy
            # port would silently share its traffic (and port 0 may pick a port
            # another server holds): a busy port must be an error instead.
            ("grpc.so_reuseport", 0),
        ]
        self._health_pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="grpc-health")
        self._grpc = self._on_loop(self._create_grpc(options))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(self.core), self._grpc)
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(self.core), self._grpc)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._grpc)
        try:
            self.port = self._on_loop(self._bind(f"{host}:{port}"))
        except RuntimeError as error:  # grpc raises RuntimeError("Failed to bind ...")
            self._close_loop()
            raise OSError(f"cannot bind gRPC to {host}:{port}: {error}") from error
        if self.port == 0:
            self._close_loop()
            raise OSError(f"cannot bind gRPC to {host}:{port}")
        self._rest = None
        self.rest_port = None
        if rest_api_port:
            self._rest = RestServer((host, max(rest_api_port, 0)), self.core, max_request_bytes,
                                    metrics=self.core.metrics, metrics_path=metrics_path, **(rest_options or {}))
        self.manager.listeners.append(self._update_health)
        self._update_health()

    async def _create_grpc(self, options):
        return grpc.aio.server(migration_thread_pool=self._health_pool, options=options)

    async def _bind(self, address):
        return self._grpc.add_insecure_port(address)

    def _on_loop(self, coroutine, timeout=None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def _close_loop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._health_pool.shutdown(wait=False)

    def _update_health(self):
        """Each health service's status from the models' availability, after every poll of the manager. Only
        changes are set: the servicer sends every `set` to the open `Watch` calls, which would otherwise hear
        the same status once a poll (a second by default)."""
        serving = health_pb2.HealthCheckResponse.SERVING
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        overall = serving if self.manager.available() else not_serving
        statuses = {name: serving if self.manager.available(name) else not_serving for name in self.manager.configs}
        statuses[""] = overall
        for service in ("tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"):
            statuses[service] = overall
        for service, status in statuses.items():
            if self._health_statuses.get(service) != status:
                self._health_statuses[service] = status
                self.health.set(service, status)

    def start(self):
        """Load the models (first poll), then open the ports."""
        self.manager.start()
        self._on_loop(self._grpc.start())
        log.info("Running gRPC ModelServer at %s:%d ...", self.host, self.port)
        if self._rest is not None:
            try:
                self.rest_port = self._on_loop(self._rest.open()).server_address[1]
            except OSError:
                self.stop(0)
                raise
            log.info("Exporting HTTP/REST API at %s:%d ...", self.host, self.rest_port)
        return self

    def wait(self):
        self._on_loop(self._grpc.wait_for_termination())

    def stop(self, grace=2.0):
        log.info("Stopping the server on port %d", self.port)
        self.manager.stop()
        self.health.enter_graceful_shutdown()
        if self._loop.is_running():
            try:
                if self._rest is not None:
                    self._on_loop(self._rest.close(), timeout=self._rest.timeout + 5)
                self._on_loop(self._grpc.stop(grace), timeout=grace + 10)
            except (concurrent.futures.TimeoutError, RuntimeError) as error:
                log.warning("shutdown did not finish cleanly: %r", error)
            self._close_loop()
        self.core.close()


def configure_tensorflow(intra_op=0, inter_op=0):
    """TensorFlow's thread pools, as tensorflow_model_server's `--tensorflow_*_op_parallelism` (0: auto-configure).

    `intra_op=0` leaves TensorFlow's choice (a thread a core). `inter_op=0`
    picks `default_inter_op_threads()`, a core less than TensorFlow would.
    Must run before TensorFlow executes anything (before any model loads).
    """
    import tensorflow as tf

    for name, value in (("intra_op", intra_op), ("inter_op", inter_op)):
        if value < 0:
            raise ValueError(f"--tensorflow_{name}_parallelism must be >= 0; got {value}")
    if intra_op:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    if inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)
        return
    try:
        tf.config.threading.set_inter_op_parallelism_threads(default_inter_op_threads())
    except RuntimeError:  # TensorFlow already runs in this process (a server started from Python): keep its pool
        log.debug("TensorFlow's inter-op pool was made before the server started; it keeps its size")


def default_inter_op_threads():
    """The inter-op pool's size when `--tensorflow_inter_op_parallelism` is 0: the cores less one, at least 1.

    TensorFlow's own default is a thread a core. Its pool threads spin a while
    after each op before they sleep, and a server's Python and gRPC threads
    run between the model's calls: on two cores, a second inter-op thread
    mostly took the core those needed. With one, sequential batch-1 requests
    were about 0.06-0.09 ms faster (of about 2 ms) and 32 unbatched clients
    got more requests/s at about half the p99 (measured in 1.0; see the serving archive page).
    """
    try:
        cores = len(os.sched_getaffinity(0))  # the cores this process may use (a container's share)
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def freeze_startup_heap():
    """Keep the interpreter's start-up objects out of every later garbage collection.

    `import tensorflow` leaves about 400,000 objects that live as long as the
    process. Python's full collections walk all of them, about 0.2 s on one
    core with the GIL held, and under load one comes every few seconds: every
    request in flight then waits for it. `gc.freeze()` before the models load
    moves them out of the collector's sight; the versions' own objects (tens
    of thousands) are still collected, so an unloaded version's memory is
    freed as before.
    """
    gc.collect()
    gc.freeze()


class _Shutdown(Exception):
    """SIGTERM or SIGINT arrived.

    The handler raises this rather than setting a threading.Event: a Python signal handler runs on the
    main thread, between two bytecodes of whatever it was doing, and if that was the Event's own wait
    holding the Event's lock, `Event.set()` in the handler waits for that lock forever.
    """


def _raise_shutdown(signum, frame):
    raise _Shutdown(signal.Signals(signum).name)


def _sleep_until_signalled(poll_seconds=0.5):
    """Sleep on the main thread until a signal handler raises (`_Shutdown`).

    A signal sent to the process goes to any one of its threads (gRPC's and TensorFlow's included).
    Python then only records it, and runs the handler on the main thread at its next bytecode: a main
    thread blocked in one long wait (`threading.Event().wait()`, a lock acquire) is not woken by a
    signal that another thread received, and the server ignored SIGTERM for as long as that wait
    lasted. Short sleeps bound the delay to `poll_seconds`.

    Args:
        poll_seconds: the longest time between a signal and its handler.
    """
    while True:
        time.sleep(poll_seconds)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        configs = model_configs(args)
        batching = batching_options(args)
        metrics_path = read_monitoring_config(args.monitoring_config_file) if args.monitoring_config_file else None
        rest_options = rest_options_from(args)
        configure_tensorflow(args.tensorflow_intra_op_parallelism, args.tensorflow_inter_op_parallelism)
        if metrics_path and not args.rest_api_port:
            raise ValueError("--monitoring_config_file: metrics are served on the REST port; give --rest_api_port")
    except (ValueError, OSError) as error:
        parser.error(str(error))
    if args.verbose:
        log.setLevel(logging.DEBUG)
    server = ModelServer(
        configs, port=args.port, rest_api_port=args.rest_api_port, host=args.host,
        poll_seconds=args.file_system_poll_wait_seconds, batching=batching,
        max_request_bytes=args.max_request_bytes, max_rows=args.max_rows_per_call,
        num_threads=args.rest_api_num_threads, rest_options=rest_options, metrics_path=metrics_path,
    )
    freeze_startup_heap()
    server.start()
    try:
        # Installed before the ports are announced, so a script that signals as soon as it reads them
        # gets a clean shutdown rather than the default handler's kill.
        signal.signal(signal.SIGTERM, _raise_shutdown)
        signal.signal(signal.SIGINT, _raise_shutdown)
        # The ports are printed on stdout too, so scripts and tests can pick up port 0's choice.
        print(f"SERVING grpc={server.port} rest={server.rest_port or 0}", flush=True)
        _sleep_until_signalled()
    except _Shutdown:
        pass
    finally:
        # A second signal during the graceful stop ends the process at once, as with tensorflow_model_server.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
