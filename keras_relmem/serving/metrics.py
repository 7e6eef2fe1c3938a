"""Prometheus metrics, switched on as TF Serving does: `--monitoring_config_file`.

The file is TF Serving's `MonitoringConfig` text proto:

    prometheus_config {
      enable: true,
      path: "/monitoring/prometheus/metrics"
    }

and the metrics are served on the REST port at that path. The names follow TF
Serving's (`/tensorflow/serving/request_count` becomes
`:tensorflow:serving:request_count`; the Prometheus client adds `_total` to
counters), with labels for the model, version, signature, API and, for counts,
the gRPC status code, so errors can be counted by code.

`tensorflow-serving-api` does not ship `monitoring_config.proto`, so its two
messages are declared here, field for field, and parsed with protobuf's own
text format parser: a file the official server reads, this one reads the same.
"""

import pathlib
import time

import prometheus_client
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

DEFAULT_PATH = "/monitoring/prometheus/metrics"
# Seconds; from 0.5 ms (a cached batch-1 answer) to 30 s (the REST timeout).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _monitoring_config_class():
    """`tensorflow.serving.MonitoringConfig` as in TF Serving's `monitoring_config.proto`."""
    file = descriptor_pb2.FileDescriptorProto(
        name="keras_relmem/monitoring_config.proto", package="tensorflow.serving", syntax="proto3"
    )
    prometheus = file.message_type.add(name="PrometheusConfig")
    prometheus.field.add(name="enable", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
                         label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    prometheus.field.add(name="path", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                         label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    monitoring = file.message_type.add(name="MonitoringConfig")
    monitoring.field.add(name="prometheus_config", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                         type_name=".tensorflow.serving.PrometheusConfig",
                         label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.serving.MonitoringConfig"))


MonitoringConfig = _monitoring_config_class()


def read_monitoring_config(path):
    """The Prometheus path a `--monitoring_config_file` asks for, or None when it is off.

    Raises:
        ValueError: naming the file (and the line, from the parser) when it is
            missing or not a MonitoringConfig text proto.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"--monitoring_config_file {path} does not exist")
    config = MonitoringConfig()
    try:
        text_format.Parse(path.read_text(), config)
    except text_format.ParseError as error:
        raise ValueError(f"{path}: {error} (expected prometheus_config {{ enable: true, path: \"...\" }})") from error
    if not config.prometheus_config.enable:
        return None
    route = config.prometheus_config.path or DEFAULT_PATH
    if not route.startswith("/"):
        raise ValueError(f"{path}: prometheus_config.path must start with '/'; got {route!r}")
    return route


class ServingMetrics:
    """Request counts and latencies of one server, in its own Prometheus registry.

    Args:
        registry: a `prometheus_client.CollectorRegistry`; a new one by default
            (so two servers in one process keep separate counts).

    Example:

    ```python
    >>> metrics = ServingMetrics()
    >>> metrics.observe("REST", "predict", "babi", 1, "answer", "OK", 0.004)
    >>> b'model_name="babi"' in metrics.exposition()
    True

    ```
    """

    def __init__(self, registry=None):
        self.registry = registry or prometheus_client.CollectorRegistry()
        self.requests = prometheus_client.Counter(
            ":tensorflow:serving:request_count",
            "Requests answered, by model, version, signature, API, front end and gRPC status code.",
            ["model_name", "model_version", "signature_name", "API", "entrypoint", "status"],
            registry=self.registry,
        )
        self.latency = prometheus_client.Histogram(
            ":tensorflow:serving:request_latency",
            "Seconds from a request's arrival to its answer, by model, version, signature, API and front end.",
            ["model_name", "model_version", "signature_name", "API", "entrypoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def observe(self, entrypoint, api, model, version, signature, status, seconds):
        """Count one answered request. `version`/`signature` are "" when it failed before they were known."""
        labels = (model or "", "" if version is None else str(version), signature or "", api, entrypoint)
        self.requests.labels(*labels, status).inc()
        self.latency.labels(*labels).observe(seconds)

    def exposition(self):
        """The registry in Prometheus' text format (bytes)."""
        return prometheus_client.generate_latest(self.registry)


class RequestRecord:
    """What a front end learns about one request as it goes, for `ServingMetrics.observe`.

    Example:

    ```python
    record = RequestRecord("GRPC", "predict", metrics)
    record.model = "babi"
    ...
    record.finish("OK")
    ```
    """

    def __init__(self, entrypoint, api, metrics):
        self.entrypoint, self.api, self.metrics = entrypoint, api, metrics
        self.model = self.version = self.signature = None
        self.started = time.perf_counter()

    def served_by(self, servable, signature):
        self.model, self.version, self.signature = servable.name, servable.version, signature

    def finish(self, status):
        if self.metrics is not None:
            self.metrics.observe(self.entrypoint, self.api, self.model, self.version, self.signature,
                                 status, time.perf_counter() - self.started)
