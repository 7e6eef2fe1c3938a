"""Which versions of which models are loaded, and keeping that in step with the disk.

Every `poll_seconds` the manager lists each model's base path. For TF
Serving's version policies (latest N by default, all, specific) it loads the
versions it should serve that are not loaded yet, and only then drops the ones
it should no longer serve, so requests never find no version. A version that
fails to load (or to replay its warm-up requests,
`assets.extra/tf_serving_warmup_requests`) is reported (status END with the error) and skipped: the
versions already serving keep serving, and the broken one is retried once its
files change. In-flight requests hold their own reference to the servable
they started on, so a swap never fails them.
"""

import logging
import os
import pathlib
import threading

import grpc

from keras_relmem.serving.errors import ServingError
from keras_relmem.serving.servable import MAX_ROWS_PER_CALL, Servable

log = logging.getLogger("keras_relmem.serving")


def _fingerprint(path):
    """What changes when a version directory's files change (names, sizes, times)."""
    entries = []
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                stat = os.stat(full)
            except OSError:
                continue
            entries.append((os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(entries))


class VersionStatus:
    """State of one version as GetModelStatus reports it."""

    def __init__(self, state, error=""):
        self.state = state  # "LOADING", "AVAILABLE", "UNLOADING" or "END"
        self.error = error


class ModelManager:
    """Loads, swaps and looks up model versions.

    Args:
        configs: list of `tensorflow.serving.ModelConfig` protos (name,
            base_path, model_version_policy, version_labels).
        poll_seconds: seconds between file-system polls; 0 polls once at
            start, negative never polls (as `--file_system_poll_wait_seconds`).
        servable_factory: builds a servable from (name, version, path);
            None (the default) builds a `Servable` (tests swap in fakes).
        max_rows: with the default factory, rows one model call takes at
            most (`Servable(max_rows=...)`, `--max_rows_per_call`).

    Example:

    ```python
    manager = ModelManager(configs, poll_seconds=1)
    manager.start()
    servable = manager.get("babi")          # the latest version
    ```
    """

    def __init__(self, configs, poll_seconds=1.0, servable_factory=None, max_rows=MAX_ROWS_PER_CALL):
        names = [config.name for config in configs]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique; received {names}.")
        self.configs = {config.name: config for config in configs}
        self.poll_seconds = poll_seconds
        self._factory = servable_factory
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._loaded = {name: {} for name in self.configs}  # name -> {version: Servable}
        self._status = {name: {} for name in self.configs}  # name -> {version: VersionStatus}
        self._failed = {name: {} for name in self.configs}  # name -> {version: fingerprint}
        self._stop = threading.Event()
        self._thread = None
        self.listeners = []  # called with no arguments after each poll

    # Looking up -------------------------------------------------------------

    def get(self, name, version=None, label=None):
        """The servable for a request's ModelSpec, or NOT_FOUND as TF Serving answers."""
        with self._lock:
            if name not in self._loaded:
                raise ServingError(
                    grpc.StatusCode.NOT_FOUND,
                    f"Servable not found for request: Latest({name}) "
                    f"(served models: {', '.join(sorted(self._loaded))})",
                )
            loaded = self._loaded[name]
            if label:
                labels = dict(self.configs[name].version_labels)
                if label not in labels:
                    raise ServingError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"Unrecognized servable version label: {label}",
                    )
                version = labels[label]
            if version is None:
                if not loaded:
                    raise ServingError(
                        grpc.StatusCode.UNAVAILABLE if self._status[name] else grpc.StatusCode.NOT_FOUND,
                        f"Servable not found for request: Latest({name}): no version of {name} "
                        "is available" + self._last_error(name),
                    )
                return loaded[max(loaded)]
            if int(version) not in loaded:
                raise ServingError(
                    grpc.StatusCode.NOT_FOUND,
                    f"Servable not found for request: Specific({name}, {version}) "
                    f"(available versions: {sorted(loaded) or 'none'})",
                )
            return loaded[int(version)]

    def _last_error(self, name):
        errors = [s.error for _, s in sorted(self._status[name].items()) if s.error]
        return f"; last load error: {errors[-1]}" if errors else ""

    def status(self, name, version=None):
        """`[(version, state, error)]` for GetModelStatus, newest first."""
        with self._lock:
            if name not in self._status:
                raise ServingError(
                    grpc.StatusCode.NOT_FOUND, f"Could not find any versions of model {name}"
                )
            items = sorted(self._status[name].items(), reverse=True)
        if version is not None:
            items = [(v, s) for v, s in items if v == int(version)]
            if not items:
                raise ServingError(
                    grpc.StatusCode.NOT_FOUND,
                    f"Could not find version {version} of model {name}",
                )
        elif not items:
            raise ServingError(
                grpc.StatusCode.NOT_FOUND, f"Could not find any versions of model {name}"
            )
        return [(v, s.state, s.error) for v, s in items]

    def is_served(self, servable):
        """Whether this servable object is still one of the loaded versions."""
        with self._lock:
            return any(s is servable for s in self._loaded.get(servable.name, {}).values())

    def available(self, name=None):
        """Whether `name` (or every model) has a version serving."""
        with self._lock:
            names = [name] if name else list(self._loaded)
            return all(self._loaded.get(n) for n in names)

    # Keeping in step with the disk -------------------------------------------

    def _versions_on_disk(self, config):
        base = pathlib.Path(config.base_path)
        if not base.is_dir():
            return {}
        return {int(p.name): p for p in base.iterdir() if p.is_dir() and p.name.isdigit()}

    def _wanted(self, config, on_disk):
        """Versions to serve, newest first, skipping ones that failed and have not changed."""
        policy = config.model_version_policy
        failed = self._failed[config.name]

        def usable(version):
            # Only a version that failed is fingerprinted (walking every version
            # folder on every poll would be wasted I/O).
            return version not in failed or failed[version] != _fingerprint(on_disk[version])

        if policy.WhichOneof("policy_choice") == "all":
            return [v for v in sorted(on_disk, reverse=True) if usable(v)], None
        if policy.WhichOneof("policy_choice") == "specific":
            return [v for v in sorted(policy.specific.versions, reverse=True) if v in on_disk and usable(v)], None
        count = policy.latest.num_versions if policy.HasField("latest") and policy.latest.num_versions else 1
        return [v for v in sorted(on_disk, reverse=True) if usable(v)], count

    def poll(self):
        """Load what should serve, then unload what should not; one pass over every model."""
        for name, config in self.configs.items():
            try:
                self._poll_model(config)
            except Exception:  # never let one model's trouble stop the others
                log.exception("Polling model %s failed", name)
        for listener in list(self.listeners):
            listener()

    def _poll_model(self, config):
        name = config.name
        on_disk = self._versions_on_disk(config)
        if not on_disk and not self._loaded[name]:
            log.warning("No versions of servable %s found under base path %s", name, config.base_path)
        candidates, count = self._wanted(config, on_disk)
        keep = []
        for version in candidates:
            if count is not None and len(keep) >= count:
                break
            if version in self._loaded[name] or self._load(name, version, on_disk[version]):
                keep.append(version)
        # Only versions still on disk may stay when their replacement failed.
        if not keep:
            keep = [v for v in self._loaded[name] if v in on_disk]
        for version in [v for v in self._loaded[name] if v not in keep]:
            with self._lock:
                self._status[name][version] = VersionStatus("UNLOADING")
                del self._loaded[name][version]
                self._status[name][version] = VersionStatus("END")
            log.info("Unloaded servable version {name: %s version: %d}", name, version)

    def _load(self, name, version, path):
        fingerprint = _fingerprint(path)
        with self._lock:
            self._status[name][version] = VersionStatus("LOADING")
        log.info("Loading servable version {name: %s version: %d} from %s", name, version, path)
        try:
            servable, replayed = self._create(name, version, path)
            if replayed:
                log.info("Warmed up servable version {name: %s version: %d} with %d requests",
                         name, version, replayed)
        except Exception as error:  # a broken version must never take the server down
            message = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            with self._lock:
                self._status[name][version] = VersionStatus("END", f"Loading {path} failed: {message}")
                self._failed[name][version] = fingerprint
            log.error("Loading servable version {name: %s version: %d} failed: %s", name, version, message)
            return False
        with self._lock:
            self._loaded[name][version] = servable
            self._status[name][version] = VersionStatus("AVAILABLE")
            self._failed[name].pop(version, None)
        log.info("Successfully loaded servable version {name: %s version: %d}", name, version)
        return True

    def _create(self, name, version, path):
        """`(servable, warm-up requests replayed)`: the version loaded, then warmed before it takes traffic."""
        if self._factory is not None:
            servable = self._factory(name, version, path)
        else:
            servable = Servable(name, version, path, max_rows=self.max_rows)
        warm_up = getattr(servable, "warm_up", None)
        return servable, warm_up() if warm_up is not None else 0

    def start(self):
        """Poll once now (so the server starts with its models), then keep polling in the background."""
        if self.poll_seconds < 0:
            return self
        self.poll()
        if self.poll_seconds > 0:
            self._thread = threading.Thread(target=self._run, name="model-poller", daemon=True)
            self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.poll_seconds):
            self.poll()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
