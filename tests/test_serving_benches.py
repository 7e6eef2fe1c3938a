"""The serving benches' results files keep the layout the results page and the serving issue read."""

import json
import pathlib

import pytest

from bench import serving_latency, serving_profile

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
    assert f"{result['clients']['32']['batched_rps']:.0f}" in text and "old vs new" in text


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


def test_serving_profile_stages_add_up():
    result = json.loads((RESULTS / "serving_profile.json").read_text())
    for api, stages in result["apis"].items():
        assert stages["round_trip"] == pytest.approx(stages["handler"] + stages["transport_and_client"]), api
        # Each stage holds the ones inside it.
        assert stages["handler"] >= stages["predict_on"] >= stages["servable_call"] >= stages["signature_function"]
    assert "| round trip |" in serving_profile.markdown(result)


@pytest.mark.slow
def test_serving_profile_runs(tmp_path):
    """A short profile end to end (an export, a server, a client process): slow, so not by default."""
    out = tmp_path / "profile.json"
    assert serving_profile.main(["--requests", "20", "--out", str(out)]) == 0
    assert set(json.loads(out.read_text())["apis"]) == {"grpc", "rest"}
