"""The serving benches' results files keep the layout the results page and the serving issue read."""

import json
import os
import pathlib

import numpy as np
import pytest

from bench import native_load, serving_latency, serving_profile

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "bench" / "results"


def test_serving_latency_results_hold_the_batching_figures_per_client_count():
    result = json.loads((RESULTS / "serving_latency.json").read_text())
    for clients in ("1", "8", "32"):
        row = result["clients"][clients]
        for key in ("batched_rps", "unbatched_rps", "batched_p99_ms", "unbatched_p99_ms"):
            assert row[key] > 0, (clients, key)
        assert row["batched_over_unbatched"] == pytest.approx(row["batched_rps"] / row["unbatched_rps"])
    p50 = result["sequential_p50_ms"]
    assert result["grpc_over_in_process"] == pytest.approx(p50["grpc"] / p50["in_process"])
    text = serving_latency.markdown(result)
    assert f"{result['clients']['32']['batched_rps']:.0f}" in text
    assert ("old vs new" in text) == ("baseline" in result)
    assert ("gRPC servers: native unbatched" in text) == (result.get("grpc_servers", {}).get("unbatched") == "native")


def test_serving_latency_server_flags_reach_every_server_of_its_run_only(monkeypatch):
    import argparse

    started = []

    class Process:
        def send_signal(self, signum):
            pass

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(serving_latency, "start_server",
                        lambda flags, script=None: (started.append(flags), (Process(), {}))[1])

    def one_server(args):
        with serving_latency.running_server(["--model_name", "babi"]):
            return {}

    monkeypatch.setattr(serving_latency, "_run", one_server)
    serving_latency.run(argparse.Namespace(server_flags=["--grpc_native=true"]))
    assert started == [["--model_name", "babi", "--grpc_native=true"]]
    with serving_latency.running_server(["--port", "0"]):  # after the run: no flags of its own
        pass
    assert started[-1] == ["--port", "0"]
    with pytest.raises(SystemExit):
        serving_latency.main(["--server-flag=--grpc_native=true", "--baseline-script", "other/serving/server.py"])


def test_serving_latency_records_which_grpc_server_its_servers_run(monkeypatch):
    from keras_relmem.serving import server as server_module
    from keras_relmem.serving.grpc_native import NOT_INSTALLED

    monkeypatch.setattr(server_module, "native_grpc_unavailable", lambda: None)
    assert serving_latency.grpc_servers([]) == {"unbatched": "native", "batched": "native"}
    assert serving_latency.grpc_servers(serving_latency.ASYNCIO_GRPC) == {"unbatched": "asyncio",
                                                                         "batched": "asyncio"}
    assert serving_latency.grpc_servers(serving_latency.SYNC_GRPC) == {"unbatched": "synchronous",
                                                                      "batched": "synchronous"}
    assert serving_latency.grpc_servers(["--grpc_native=false"]) == {"unbatched": "synchronous", "batched": "asyncio"}
    assert serving_latency.grpc_servers(["--grpc_native=true"]) == {"unbatched": "native", "batched": "native"}
    monkeypatch.setattr(server_module, "native_grpc_unavailable", lambda: NOT_INSTALLED)
    assert serving_latency.grpc_servers([]) == {"unbatched": "synchronous", "batched": "asyncio"}


def test_serving_latency_measures_each_num_batch_threads_given(tmp_path):
    import argparse

    from keras_relmem.serving import server

    flags = serving_latency.server_flags(tmp_path, True, "one_thread_each", num_batch_threads=2)
    options = server.batching_options(server.build_parser().parse_args(["--port", "0", *flags]))
    assert options == {"max_batch_size": 32, "batch_timeout_micros": 2000, "num_batch_threads": 2}
    # one thread: the flags the committed figures were measured with
    assert "--batching_parameters_file" not in serving_latency.server_flags(tmp_path, True, "one_thread_each")
    runs = serving_latency.batched_runs(argparse.Namespace(num_batch_threads=[1, 2]))
    assert runs == [("batched", 1), ("batched_2_threads", 2)]
    result = json.loads((RESULTS / "serving_latency.json").read_text())
    row = result["clients_one_thread_each"]["32"]
    row["batched_2_threads"] = {**row["batched"], "rps": 2 * row["batched"]["rps"]}
    row["batched_2_threads_over_unbatched"] = 2 * row["batched_over_unbatched"]
    text = serving_latency.markdown(result)
    assert (f"32 clients, batched with num_batch_threads 2: {2 * row['batched']['rps']:.0f} req/s, "
            f"p99 {row['batched']['p99_ms']:.1f} ms, {2 * row['batched_over_unbatched']:.2f}x unbatched") in text


@pytest.mark.parametrize("name", ["serving_profile.json", "serving_profile_native.json"])
def test_serving_profile_stages_add_up(name):
    result = json.loads((RESULTS / name).read_text())
    for api, stages in result["apis"].items():
        assert stages["round_trip"] == pytest.approx(stages["handler"] + stages["transport_and_client"]), api
        # Each stage holds the ones inside it.
        assert stages["handler"] >= stages["predict_on"] >= stages["servable_call"] >= stages["signature_function"]
    text = serving_profile.markdown(result)
    assert "| round trip |" in text and ("gRPC, native" in text) == ("grpc_native" in result["apis"])


def test_serving_profile_runs(tmp_path):
    """A short profile end to end (an export, servers, a client process; about 15 s): run by default since the
    bench once broke unnoticed when the server's signature call changed."""
    from keras_relmem.serving.grpc_native import available

    out = tmp_path / "profile.json"
    assert serving_profile.main(["--requests", "20", "--out", str(out)]) == 0
    assert set(json.loads(out.read_text())["apis"]) == {"grpc", "rest"} | ({"grpc_native"} if available() else set())


def test_grpc_frame_is_the_length_prefixed_message_of_the_grpc_wire_format():
    # gRPC over HTTP/2 (PROTOCOL-HTTP2.md): Compressed-Flag (1 byte, 0), Message-Length (4 bytes, big-endian), Message
    assert native_load.grpc_frame(b"abc") == bytes([0, 0, 0, 0, 3]) + b"abc"
    assert native_load.grpc_frame(b"x" * 300)[:5] == bytes([0, 0, 0, 1, 44])


WRK_OUT = """Running 4s test @ http://127.0.0.1:8501/v1/models/babi:predict
  1 threads and 1 connections
  Latency Distribution
     50%    1.61ms
     75%    2.10ms
     90%  850.00us
     99%    1.20s
  1802 requests in 4.00s, 0.9MB read
Requests/sec:    450.25
Transfer/sec:    230.10KB
"""


def test_wrk_and_h2load_outputs_are_read_and_errors_refused():
    rate, latency = native_load.parse_wrk(WRK_OUT)
    assert rate == 450.25 and latency == {"p50_ms": 1.61, "p99_ms": 1200.0}
    with pytest.raises(RuntimeError, match="errors"):
        native_load.parse_wrk(WRK_OUT + "  Non-2xx or 3xx responses: 3\n")
    out = "finished in 3.00s, 721.67 req/s, 200KB/s\n"
    rate, latencies = native_load.parse_h2load(out, "1796409000000000\t200\t1500\n1796409000002000\t200\t2500\n")
    assert rate == 721.67 and latencies.tolist() == [0.0015, 0.0025]
    with pytest.raises(RuntimeError, match="statuses"):
        native_load.parse_h2load(out, "1796409000000000\t200\t1500\n1796409000002000\t503\t10\n")


def test_serving_latency_shows_the_native_clients_beside_the_python_ones():
    result = json.loads((RESULTS / "serving_latency_native.json").read_text())
    native = result["native_clients"]
    for clients in ("1", "8", "32"):
        row = native["clients"][clients]
        assert row["batched_over_unbatched"] == pytest.approx(row["batched_rps"] / row["unbatched_rps"])
    assert f"({native['grpc_over_in_process']:.2f}x)" in serving_latency.markdown(result)


@pytest.mark.slow
@pytest.mark.skipif(not native_load.available(), reason="needs Debian's nghttp2-client and wrk")
def test_native_clients_get_answers_from_the_server(tmp_path):
    """h2load's gRPC bytes and wrk's REST body are answered by a real server (slow: an export and a server)."""
    import numpy as np

    from bench.serving import export_babi_entnet, start_server

    export_babi_entnet(tmp_path)
    process, ports = start_server(serving_latency._with_rest(serving_latency.server_flags(tmp_path, False,
                                                                                            "one_thread_each")))
    try:
        message = native_load.predict_request(
            "babi", {"story": np.array([serving_latency.STORY], dtype=object),
                     "question": np.array([serving_latency.QUESTION], dtype=object)}, "answer", ("top_answers",))
        assert native_load.check_grpc_body(ports["grpc"], message) == ["top_answers"]
        rate, latencies = native_load.h2load_grpc(ports["grpc"], message, 2, requests=20)
        assert rate > 0 and len(latencies) == 20
        rate, latency = native_load.wrk_rest(ports["rest"], serving_latency.rest_body(), 1, 1)
        assert rate > 0 and latency["p99_ms"] >= latency["p50_ms"] > 0
        # bench.serving_floors' cheapest calls: a health check over gRPC, the model's status over REST.
        from bench import serving_floors

        serving_floors.check_health(ports["grpc"])
        assert serving_latency.h2load_p50(ports["grpc"], serving_floors.health_message(), serving_floors.HEALTH) > 0
        assert serving_floors.wrk_p50(ports["rest"], None, 1, serving_floors.STATUS) > 0
    finally:
        serving_latency._stop(process)


def test_serving_floors_rotates_the_paths_and_sums_up_what_the_bounds_leave():
    from bench import serving_floors
    from bench.serving import rotated

    assert [rotated(serving_floors.PATHS, i)[0] for i in range(6)] == [*serving_floors.PATHS, serving_floors.PATHS[0]]
    rounds = [
        {"in_process": 1.0, "grpc_health": 0.2, "rest_status": 0.1, "grpc_predict": 1.5, "rest_predict": 1.3},
        {"in_process": 0.8, "grpc_health": 0.1, "rest_status": 0.1, "grpc_predict": 1.2, "rest_predict": 1.0},
        {"in_process": 1.2, "grpc_health": 0.3, "rest_status": 0.1, "grpc_predict": 1.5, "rest_predict": 1.6},
    ]
    summary = serving_floors.summarize(rounds)
    assert summary["p50_ms"] == {"in_process": 1.0, "grpc_health": 0.2, "rest_status": 0.1, "grpc_predict": 1.5,
                                 "rest_predict": 1.3}
    grpc, rest = summary["grpc"], summary["rest"]
    # 1.3x of 1.0 ms leaves 0.3 ms above the model; the health check takes 0.2 of it; 1.5 - 1.0 - 0.2 is left.
    assert grpc["budget_ms"] == pytest.approx(0.3) and grpc["cheapest_call_share_of_budget"] == pytest.approx(2 / 3)
    assert grpc["predict_over_in_process"] == 1.5 and grpc["rest_of_predict_ms"] == pytest.approx(0.3)
    assert grpc["left_after_cheapest_call_ms"] == pytest.approx(0.1)
    # Per round: 1.5x, 1.5x, 1.25x over gRPC; 1.3x, 1.25x, 1.33x over REST.
    assert (grpc["rounds_within_bound"], rest["rounds_within_bound"]) == (1, 3)
    assert rest["budget_ms"] == pytest.approx(0.4) and rest["cheapest_call_share_of_budget"] == pytest.approx(0.25)
    text = serving_floors.markdown({"summary": summary})
    assert "| gRPC, Python server | 0.200 | 1.500 | 1.50x | 1.3x | 0.300 | 67% | 0.300 |" in text
    assert "grpc_python" not in summary and "converted in Python" not in text
    # The server converting tensors in Python (the path before the in-graph Predict) gets a row of its own.
    for r, python in zip(rounds, (1.6, 1.3, 1.7)):
        r["grpc_python_predict"] = python
    summary = serving_floors.summarize(rounds)
    assert summary["grpc_python"]["predict_over_in_process"] == 1.6
    assert summary["grpc_python"]["rounds_within_bound"] == 0  # 1.6x, 1.625x, 1.417x
    text = serving_floors.markdown({"summary": summary})
    assert "| gRPC, Python server, tensors converted in Python | 0.200 | 1.600 | 1.60x |" in text


def test_serving_floors_resumes_and_only_sums_up_a_finished_file(tmp_path):
    import argparse

    from bench import serving_floors

    out = tmp_path / "floors.json"
    rounds = [dict.fromkeys(serving_floors.PATHS, 1.0) for _ in range(2)]
    out.write_text(json.dumps({"rounds": rounds}))
    # Both rounds are on disk: no model, no server, the summary written from them.
    assert serving_floors.run(argparse.Namespace(rounds=2, wrk_seconds=1, out=str(out), server_flags=[])) == 0
    result = json.loads(out.read_text())
    assert result["summary"]["rounds"] == 2 and result["rounds"] == rounds
    # Rounds made with other server flags are not mixed with these.
    with pytest.raises(SystemExit, match="has rounds with the server flags"):
        serving_floors.run(argparse.Namespace(rounds=3, wrk_seconds=1, out=str(out),
                                              server_flags=["--tensorflow_inter_op_parallelism=1"]))
    assert serving_latency._RUN_FLAGS == []


def test_the_handed_off_rest_server_is_measured_beside_the_default():
    from keras_relmem.serving import server

    args = server.build_parser().parse_args(["--port", "0", *serving_latency.HAND_OFF])
    assert server.rest_options_from(args)["inline_max_bytes"] == 0  # every request to a worker
    seq = {"in_process": [1.0, 1.2, 1.1], "grpc": [2.0, 2.2, 2.1], "rest_keep_alive": [1.3, 1.5, 1.4],
           "rest_keep_alive_handed_off": [1.8, 2.0, 1.9]}
    figures = serving_latency.sequential_summary(seq)
    assert figures["rest_over_in_process"] == pytest.approx(1.4 / 1.1)
    assert figures["rest_handed_off_over_in_process"] == pytest.approx(1.9 / 1.1)
    assert "REST handed to a worker thread 1.90 (1.73x)" in serving_latency._handed_off(figures)
    # results recorded before the comparison existed have no such figure, and say nothing of it
    del seq["rest_keep_alive_handed_off"]
    assert serving_latency._handed_off(serving_latency.sequential_summary(seq)) == ""


def test_the_soak_places_a_swap_windows_slowest_request_in_time():
    from bench.serving_soak import slowest_in

    latencies = [(0.5, 0.010), (2.0, 0.080), (2.5, 0.020), (9.0, 0.500)]  # (sent at s, took s)
    # 9.0 is outside; the window holds two requests.
    assert slowest_in(latencies, 1.0, 5.0) == {"slowest_ms": 80.0, "slowest_at_s": 1.0, "requests": 2}
    assert slowest_in(latencies, 6.0, 8.0) == {"slowest_ms": 0.0, "requests": 0}


def test_a_swap_window_ends_where_the_next_event_begins():
    from bench.serving_soak import swap_windows

    events = [{"event": "v2", "t": 1.0, "available_after_s": 1.5}, {"event": "v3 (corrupt)", "t": 3.0},
              {"event": "v4", "t": 6.0, "available_after_s": 1.0}, {"event": "v5", "t": 8.5, "available_after_s": None}]
    assert swap_windows(events) == {"v2": (1.0, 3.0), "v4": (6.0, 8.5), "v5": (8.5, 11.5)}


def test_the_soak_reads_when_the_server_loaded_each_version_from_its_log():
    import time

    from bench.serving_soak import in_flight_during, load_spans

    began = time.mktime(time.strptime("2026-12-05 14:40:10", "%Y-%m-%d %H:%M:%S"))  # the load's start, local time
    log = "\n".join([
        "2026-12-05 14:40:09,694 INFO Loading servable version {name: babi version: 1} from /m/babi/1",
        "2026-12-05 14:40:09,990 INFO Successfully loaded servable version {name: babi version: 1}",
        "2026-12-05 14:40:11,495 INFO Loading servable version {name: babi version: 2} from /m/babi/2",
        "2026-12-05 14:40:11,513 INFO Servable version {name: babi version: 2} runs on the graph functions of "
        "version 1 with its own variables",
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


def _soak_result(steady_p99, without, with_warm_up, reused):
    swap = {"event": "version 2 (without warm-up)", "t": 1.0, "available_after_s": 0.3, "slowest_ms": without,
            "requests": 100}
    warm = {"event": "version 4 (with warm-up)", "t": 5.0, "available_after_s": 0.4, "slowest_ms": with_warm_up,
            "requests": 200}
    return {"load": {"steady_p99_ms": steady_p99, "steady_slowest_ms": 2 * steady_p99,
                     "swaps": [swap, {"event": "version 3 (corrupt)", "t": 3.0}, warm],
                     "good_requests": 1000, "good_failed": 0, "bad_5xx_or_dropped": {}},
            "loads_reusing_graph_functions": reused}


def test_serving_swaps_summarises_each_run_and_resumes(tmp_path, monkeypatch):
    from bench import serving_swaps

    made = []

    def fake_run(setting, path, arguments):
        made.append(setting)
        slowest = 15.0 if setting.endswith("reuse") else 40.0
        path.write_text(json.dumps(_soak_result(10.0, slowest, slowest / 2, 2 if setting.endswith("reuse") else 0)))

    monkeypatch.setattr(serving_swaps, "run_once", fake_run)
    argv = ["--runs", "2", "--workdir", str(tmp_path / "runs"), "--out", str(tmp_path / "swaps.json")]
    serving_swaps.main(argv)
    assert made == list(serving_swaps.SETTINGS) * 2
    result = json.loads((tmp_path / "swaps.json").read_text())
    reuse, full = result["settings"]["retrained_reuse"], result["settings"]["retrained_full"]
    assert reuse["runs"][0]["swaps"]["without_warm_up"]["over_steady_p99"] == 1.5
    assert reuse["worst_over_steady_p99"] == {"best": 1.5, "median": 1.5, "worst": 1.5}
    assert (reuse["runs_within_2x"], full["runs_within_2x"]) == (2, 0)
    assert "| retrained_full | 2 | 10.0 | 40.0 ms (4.00x), serving after 0.30 s |" in serving_swaps.markdown(result)
    assert "loading_over_steady_p99" not in reuse  # these soaks did not read the server's log
    serving_swaps.main(argv)  # every run is on disk: nothing runs again
    assert len(made) == 8


def test_serving_swaps_sums_up_the_requests_in_flight_while_versions_loaded(tmp_path, monkeypatch):
    from bench import serving_swaps

    def fake_run(setting, path, arguments):
        soak = _soak_result(10.0, 30.0, 12.0, 2)
        swaps = soak["load"]["swaps"]
        swaps[0]["loading"] = {"ms": 40.0, "slowest_ms": 15.0, "requests": 20}
        swaps[2]["loading"] = {"ms": 30.0, "slowest_ms": 25.0 if setting == "copy_reuse" else 8.0, "requests": 9}
        soak["load"]["slow_sockets"] = {"opened": 50, "slowest_ms": 21.0}
        path.write_text(json.dumps(soak))

    monkeypatch.setattr(serving_swaps, "run_once", fake_run)
    serving_swaps.main(["--runs", "1", "--settings", "retrained_reuse", "copy_reuse", "--workdir",
                        str(tmp_path / "runs"), "--out", str(tmp_path / "swaps.json")])
    result = json.loads((tmp_path / "swaps.json").read_text())
    retrained, copy = result["settings"]["retrained_reuse"], result["settings"]["copy_reuse"]
    # The window's slowest (30 ms, 3x) misses the bound; the requests in flight while loading (15 ms) do not.
    assert retrained["runs_within_2x"] == 0 and retrained["runs_within_2x_while_loading"] == 1
    assert retrained["loading_over_steady_p99"]["worst"] == 1.5
    # Neither run's slowest without warm-up records (30 ms) was in flight during its load; copy's 25 ms with was.
    assert (retrained["swaps_slowest_while_loading"], copy["swaps_slowest_while_loading"], copy["swaps"]) == (0, 1, 2)
    assert copy["runs_within_2x_while_loading"] == 0 and copy["loading_over_steady_p99"]["worst"] == 2.5
    assert retrained["runs"][0]["slow_sockets_slowest_ms"] == 21.0
    assert "30.0 ms (3.00x), serving after 0.30 s; while loading 15.0 ms (1.50x)" in serving_swaps.markdown(result)


def test_serving_swaps_sums_up_the_loads_of_the_runs_that_timed_them(tmp_path, monkeypatch):
    from bench import serving_swaps

    def fake_run(setting, path, arguments):
        soak = _soak_result(10.0, 30.0, 12.0, 2)
        if path.name.endswith("_2.json"):  # a later soak, which read the server's log
            for swap in soak["load"]["swaps"]:
                if "available_after_s" in swap:
                    swap["loading"] = {"ms": 40.0, "slowest_ms": 12.0, "requests": 20}
        path.write_text(json.dumps(soak))

    monkeypatch.setattr(serving_swaps, "run_once", fake_run)
    serving_swaps.main(["--runs", "2", "--settings", "copy_reuse", "--workdir", str(tmp_path / "runs"),
                        "--out", str(tmp_path / "swaps.json")])
    copy = json.loads((tmp_path / "swaps.json").read_text())["settings"]["copy_reuse"]
    assert copy["runs_within_2x"] == 0  # both runs' windows held a 30 ms request (3x)
    assert copy["loading_over_steady_p99"] == {"best": 1.2, "median": 1.2, "worst": 1.2}
    assert (copy["runs_within_2x_while_loading"], copy["swaps_slowest_while_loading"], copy["swaps"]) == (1, 1, 2)


def test_serving_swaps_soaks_a_baseline_server_just_before_this_one(tmp_path, monkeypatch):
    from bench import serving_swaps

    made = []

    def fake_run(setting, path, arguments):
        made.append((setting, arguments))
        path.write_text(json.dumps(_soak_result(10.0, 30.0 if setting.startswith("baseline_") else 15.0, 12.0, 2)))

    monkeypatch.setattr(serving_swaps, "run_once", fake_run)
    serving_swaps.main(["--runs", "2", "--settings", "retrained_reuse", "copy_reuse", "--baseline-script",
                        "/old/serving/server.py", "--workdir", str(tmp_path / "runs"),
                        "--out", str(tmp_path / "s.json")])
    order = ["baseline_retrained_reuse", "retrained_reuse", "baseline_copy_reuse", "copy_reuse"]
    assert [setting for setting, _ in made] == order * 2
    assert dict(made)["baseline_copy_reuse"] == ["--swap-versions", "copy", "--server-script", "/old/serving/server.py"]
    assert dict(made)["copy_reuse"] == ["--swap-versions", "copy"]
    result = json.loads((tmp_path / "s.json").read_text())["settings"]
    assert (result["baseline_copy_reuse"]["runs_within_2x"], result["copy_reuse"]["runs_within_2x"]) == (0, 2)
    assert result["baseline_copy_reuse"]["command"].endswith("--server-script /old/serving/server.py")


def test_the_soak_runs_another_checkouts_server_with_that_checkouts_package(monkeypatch, tmp_path):
    from bench import serving, serving_soak

    started = {}
    monkeypatch.setattr(serving_soak, "start_server", lambda flags, log_path=None, script=None: (
        started.update(script=script, env=serving._env_for(script)), ("process", {"grpc": 1, "rest": 2}))[1])
    serving_soak.start_with_models(tmp_path, tmp_path / "log", script="/old/serving/server.py")
    assert started["script"] == "/old/serving/server.py"
    assert started["env"]["PYTHONPATH"].split(os.pathsep)[0] == "/old"


def test_the_load_recorder_gives_every_good_request_since_a_start():
    from keras_relmem.testing.soak import LoadRecorder

    recorder = LoadRecorder()
    recorder.good("grpc", 10.5, 0.002, True, "grpc answer")
    recorder.good("rest fresh", 11.0, 0.003, False, "rest answer: 500")
    recorder.good("grpc", 12.0, 0.001, True, "grpc ids")
    assert sorted(recorder.since(10.0)) == [(0.5, 0.002), (1.0, 0.003), (2.0, 0.001)]
    assert recorder.good_failures == ["rest answer: 500"] and recorder.count == 3


def test_swap_series_measures_each_load_against_the_requests_outside_all_of_them():
    from bench import serving_swap_series

    # 200 steady requests taking 0.01 to 2 ms, sent every second from t=2.5 s; and around two loads
    # (version 2 from 100.0 to 100.02 s; version 3, with warm-up records, from 200.0 to 200.01 s) four more.
    # Version 4 never loaded.
    steady = [(2.5 + i, (i + 1) / 100_000) for i in range(200)]
    latencies = [*steady, (99.99, 0.015), (100.01, 0.003), (200.005, 0.001), (100.3, 0.050)]
    spans = {2: (100.0, 100.02), 3: (200.0, 200.01)}
    result = serving_swap_series.measure(latencies, spans, {2: False, 3: True, 4: False}, {"good_failed": 0})
    # Steady: every request that overlaps no load nor the half second after it; of the steady ones that
    # leaves out those sent at 100.5 and 200.5 s (and the four extra ones, the 50 ms one 0.3 s after load 2 too).
    kept = [s for t, s in steady if t not in (100.5, 200.5)]
    assert result["steady_requests"] == len(kept) == 198
    assert result["steady_p99_ms"] == pytest.approx(float(np.percentile(kept, 99)) * 1e3)
    first, second, never = result["swaps"]
    # In flight during load 2: the one sent at 99.99 s taking 15 ms and the one sent at 100.01 s (3 ms).
    assert (first["in_flight"], first["slowest_ms"]) == (2, pytest.approx(15.0))
    assert first["over_steady_p99"] == pytest.approx(15.0 / result["steady_p99_ms"])
    assert (second["warm_up_records"], second["slowest_ms"], second["in_flight"]) == (True, pytest.approx(1.0), 1)
    assert never == {"version": 4, "warm_up_records": False, "loaded": False}
    assert result["good_failed"] == 0


def test_swap_series_alternates_the_servers_and_resumes(tmp_path, monkeypatch):
    from bench import serving_swap_series

    made = []

    def fake_run(shapes, base, sources, swaps, gap, threads, script=None, server_flags=()):
        made.append((script, tuple(server_flags)))
        ratio = 3.0 if script else 1.5  # the baseline's swaps miss the bound, this server's keep within it
        return {"steady_p99_ms": 10.0, "steady_requests": 100, "good_requests": 500, "good_failed": 0,
                "bad_5xx_or_dropped": 0, "loads_reusing_graph_functions": swaps,
                "swaps": [{"version": v + 2, "warm_up_records": v % 2 == 1, "loaded": True, "load_ms": 10.0 + v,
                           "in_flight": 3, "slowest_ms": 10 * ratio * (2 if v == 0 else 1),
                           "over_steady_p99": ratio * (2 if v == 0 else 1)} for v in range(swaps)]}

    monkeypatch.setattr(serving_swap_series, "one_run", fake_run)
    monkeypatch.setattr(serving_swap_series, "make_exports", lambda workdir: ("shapes", "base", ["a", "b"]))
    argv = ["--runs", "2", "--swaps", "3", "--baseline-script", "/old/serving/server.py", "--workdir",
            str(tmp_path / "runs"), "--out", str(tmp_path / "series.json"), "--server-flag=--grpc_native=true"]
    serving_swap_series.main(argv)
    # The flags go to this checkout's server only: the old one may not know them.
    assert made == [("/old/serving/server.py", ()), (None, ("--grpc_native=true",))] * 2
    result = json.loads((tmp_path / "series.json").read_text())
    this, baseline = result["servers"]["this"]["summary"], result["servers"]["baseline"]["summary"]
    # This server: first swaps 3.0x (missed), later ones 1.5x; the baseline misses all six.
    assert (this["swaps"], this["within_2x"], this["first_swaps_within_2x"]) == (6, 4, 0)
    assert this["over_steady_p99"] == {"best": 1.5, "median": 1.5, "worst": 3.0}
    assert (baseline["within_2x"], baseline["later_swaps_within_2x"]) == (0, 0)
    assert this["load_ms"] == {"median": 11.0, "p90": 12.0, "worst": 12.0}  # loads 10, 11, 12 ms, twice
    # Two loads of 10 and 30 ms: the p90 lies between them, near the slower (NumPy's linear interpolation).
    run = {"steady_p99_ms": 10.0, "good_failed": 0, "bad_5xx_or_dropped": 0, "loads_reusing_graph_functions": 2,
           "swaps": [{"loaded": True, "load_ms": ms, "over_steady_p99": 1.0} for ms in (30.0, 10.0)]}
    assert serving_swap_series.summarise([run])["load_ms"] == {"median": 20.0, "p90": 28.0, "worst": 30.0}
    row = "| this | 4 of 6 | 1.50 / 1.50 / 3.00 | 0 of 2 | 11 / 12 | 10.0 | 0 | 0 |"
    assert row in serving_swap_series.markdown(result)
    serving_swap_series.main(argv)  # every run is on disk: nothing runs again
    assert len(made) == 4


def test_the_batching_server_on_asyncios_own_loop_is_measured_beside_the_default():
    from keras_relmem.serving import server

    assert server.build_parser().parse_args(serving_latency.ASYNCIO_LOOP).event_loop == "asyncio"
    result = json.loads((RESULTS / "serving_latency_priority_fix.json").read_text())
    text = serving_latency.markdown(result)
    assert "asyncio's own event loop" not in text  # runs from before the comparison say nothing of it
    native = result["native_clients"]
    for key in ("clients_one_thread_each", "rest_clients_one_thread_each"):
        native[key]["32"]["batched_asyncio_loop"] = {"rps": 1234.0, "p99_ms": 5.67}
    text = serving_latency.markdown(result)
    assert text.count("- 32 clients, batched on asyncio's own event loop (`--event_loop=asyncio`): "
                      "1234 req/s, p99 5.7 ms") == 2
    assert "batched on the synchronous gRPC server (`--grpc_asyncio=false`): 2852 req/s" in text
    # The runs that record `grpc_servers` ran that flag on the native front end, and their pages say so.
    result["grpc_servers"] = {"unbatched": "native", "batched": "asyncio"}
    assert "batched with `--grpc_asyncio=false` (there the native front end" in serving_latency.markdown(result)


def test_the_event_loop_rounds_rotate_the_servers_and_sum_up_per_api():
    from bench import serving_event_loops as loops

    assert [loops.order(i)[0] for i in range(4)] == ["unbatched", "batched_uvloop", "batched_asyncio", "unbatched"]

    def figures(unbatched, uvloop, asyncio):
        return {"unbatched": {"rps": unbatched, "p99_ms": 20.0}, "batched_uvloop": {"rps": uvloop, "p99_ms": 9.0},
                "batched_asyncio": {"rps": asyncio, "p99_ms": 11.0}}

    rounds = [{"grpc": figures(1000, 2600, 2000), "rest": figures(1000, 3000, 3000)},
              {"grpc": figures(1000, 2400, 2400), "rest": figures(2000, 3000, 2500)},
              {"grpc": figures(1000, 2500, 2000), "rest": figures(1000, 3300, 3000)}]
    summary = loops.summarize(rounds)
    assert summary["grpc"]["batched_uvloop"]["rps"] == 2500
    assert summary["grpc"]["uvloop_over_asyncio"] == {"median": 1.25, "min": 1.0, "max": 1.3}
    assert summary["grpc"]["rounds_uvloop_faster"] == 2  # 1.3, 1.0 (not faster), 1.25
    assert summary["grpc"]["rounds_uvloop_at_least_2_5x"] == 2  # 2.6, 2.4, 2.5
    assert summary["rest"]["batched_uvloop_over_unbatched"]["median"] == 3.0  # 3.0, 1.5, 3.3
    text = loops.markdown({"arguments": {"threads": "one_thread_each", "seconds": 6.0}, "rounds": rounds,
                           "summary": summary})
    assert "| grpc | 1000 | 2500 (9.0) | 2000 (11.0) | 2.50x | 2.00x | 1.25x (1.00-1.30) |" in text


def test_serving_threads_sums_up_both_pools_per_round():
    from bench import serving_threads

    def round_(seq_tf, seq_default, rps_tf, rps_default):
        load = {name: {"rps": (rps_default if name.endswith("server_default") else rps_tf), "p99_ms": 10.0}
                for name in serving_threads.SERVERS}
        return {"sequential_p50_ms": {"in_process": 1.0, "unbatched_tensorflow_pool": seq_tf,
                                      "unbatched_server_default": seq_default}, "load": load}

    rounds = [round_(1.4, 1.2, 800, 880), round_(1.3, 1.25, 820, 800), round_(1.5, 1.35, 700, 770)]
    summary = serving_threads.summarize(rounds)
    assert summary["sequential_p50_ms"]["unbatched_server_default"] == 1.25
    assert summary["sequential_over_in_process"]["unbatched_tensorflow_pool"] == 1.4
    assert summary["rounds_within_1_3x"] == {"unbatched_tensorflow_pool": 1, "unbatched_server_default": 2}
    ratio = summary["unbatched_rps_server_default_over_tensorflow_pool"]
    assert ratio["median"] == pytest.approx(1.1) and ratio["min"] == pytest.approx(800 / 820)
    text = serving_threads.markdown({"summary": summary, "arguments": {"cores": 2, "server_default_threads": 1,
                                                                      "clients": 32}})
    assert "server's default 1.250 (1.25x)" in text and "| batched server default | 800 | 10.0 |" in text


def test_the_server_default_inter_op_pool_is_a_core_smaller(monkeypatch):
    from keras_relmem.serving import server

    monkeypatch.setattr(server.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert server.default_inter_op_threads() == 3
    monkeypatch.setattr(server.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert server.default_inter_op_threads() == 1
