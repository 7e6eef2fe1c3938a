"""The two serving benches: `bench.serving` (speed, and one large request's memory) and `bench.serving.soak`."""

import json
import os

import pytest

from bench import serving as serving_latency

needs_data = pytest.mark.skipif(not os.environ.get("KERAS_RELMEM_DATA"), reason="needs KERAS_RELMEM_DATA")


@needs_data
def test_serving_latency_runs_and_writes_its_figures(tmp_path):
    """A tiny run: both servers start, every figure is measured, and the page's table is made from the JSON."""
    out = tmp_path / "latency.json"
    assert serving_latency.main(["--seconds", "0.3", "--clients", "2", "--rows", "50", "--max-rows", "16",
                                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["in_process_p50_ms"] > 0 and set(result["sequential_p50_ms"]) == {"grpc", "rest"}
    for label in ("unbatched", "batched"):
        for api in ("grpc", "rest"):
            assert result[label][api]["2"]["requests_per_s"] > 0
    # 50 rows in slices of 16 (and of the default) are answered whole
    assert result["large_request"]["16"]["status"] == "OK" == result["large_request"]["default"]["status"]
    assert "| 2 | grpc |" in serving_latency.markdown(result)


def test_the_soak_runs_another_checkouts_server_with_that_checkouts_package(monkeypatch, tmp_path):
    import subprocess

    from bench.serving import soak as serving_soak

    started = {}

    class Stop(Exception):
        pass

    def popen(command, **kwargs):
        started.update(command=command, env=kwargs["env"])
        raise Stop

    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(Stop):
        serving_soak.start_with_models(tmp_path, tmp_path / "log", script="/old/serving/server.py")
    assert "/old/serving/server.py" in started["command"]
    assert started["env"]["PYTHONPATH"].split(os.pathsep)[0] == "/old"


def test_the_soak_places_a_swap_windows_slowest_request_in_time():
    from bench.serving.soak import slowest_in

    latencies = [(0.5, 0.010), (2.0, 0.080), (2.5, 0.020), (9.0, 0.500)]  # (sent at s, took s)
    # 9.0 is outside; the window holds two requests.
    assert slowest_in(latencies, 1.0, 5.0) == {"slowest_ms": 80.0, "slowest_at_s": 1.0, "requests": 2}
    assert slowest_in(latencies, 6.0, 8.0) == {"slowest_ms": 0.0, "requests": 0}


def test_a_swap_window_ends_where_the_next_event_begins():
    from bench.serving.soak import swap_windows

    events = [{"event": "v2", "t": 1.0, "available_after_s": 1.5}, {"event": "v3 (corrupt)", "t": 3.0},
              {"event": "v4", "t": 6.0, "available_after_s": 1.0}, {"event": "v5", "t": 8.5, "available_after_s": None}]
    assert swap_windows(events) == {"v2": (1.0, 3.0), "v4": (6.0, 8.5), "v5": (8.5, 11.5)}


def test_the_soak_reads_when_the_server_loaded_each_version_from_its_log():
    import time

    from bench.serving.soak import in_flight_during, load_spans

    began = time.mktime(time.strptime("2026-12-05 14:40:10", "%Y-%m-%d %H:%M:%S"))  # the load's start, local time
    log = "\n".join([
        "2026-12-05 14:40:09,694 INFO Loading servable version {name: babi version: 1} from /m/babi/1",
        "2026-12-05 14:40:09,990 INFO Successfully loaded servable version {name: babi version: 1}",
        "2026-12-05 14:40:11,495 INFO Loading servable version {name: babi version: 2} from /m/babi/2",
        "2026-12-05 14:40:11,520 INFO Successfully loaded servable version {name: babi version: 2}",
        "2026-12-05 14:40:12,521 INFO Loading servable version {name: babi version: 3} from /m/babi/3",
        "2026-12-05 14:40:12,521 ERROR Loading servable version {name: babi version: 3} failed: OSError: no",
        "2026-12-05 14:40:13,100 INFO Loading servable version {name: lm version: 2} from /m/lm/2",
        "2026-12-05 14:40:13,200 INFO Successfully loaded servable version {name: lm version: 2}",
    ])
    spans = load_spans(log, "babi", began)
    assert set(spans) == {1, 2}  # version 3 failed; lm is another model
    assert spans[2] == pytest.approx((1.495, 1.520), abs=1e-6)
    assert spans[1] == pytest.approx((-0.306, -0.010), abs=1e-6)
    # (sent at s, took s): one answered before the load began, one sent during it, one sent before it and
    # still waiting when it began, one sent after it ended.
    latencies = [(1.400, 0.050), (1.500, 0.012), (1.480, 0.030), (1.600, 0.090)]
    found = in_flight_during(latencies, *spans[2])
    assert found == pytest.approx({"ms": 25.0, "slowest_ms": 30.0, "requests": 2}, abs=1e-3)


def test_the_load_recorder_gives_every_good_request_since_a_start():
    from keras_relmem.testing.soak import LoadRecorder

    recorder = LoadRecorder()
    recorder.good("grpc", 10.5, 0.002, True, "grpc answer")
    recorder.good("rest fresh", 11.0, 0.003, False, "rest answer: 500")
    recorder.good("grpc", 12.0, 0.001, True, "grpc ids")
    assert sorted(recorder.since(10.0)) == [(0.5, 0.002), (1.0, 0.003), (2.0, 0.001)]
    assert recorder.good_failures == ["rest answer: 500"] and recorder.count == 3
