"""bench/lm/speed.py's table: speed-ups against RNN(cell) in the same backend and mode, shares of the
machine's matrix-product rate (the highest the run measured)."""

from bench.lm import speed as lm_speed


def row(backend, mode, model, tokens, flops):
    return {"backend": backend, "mode": mode, "model": model, "params": 10, "tokens_per_s": tokens,
            "flops_per_token": flops, "gflops": round(tokens * flops / 1e9, 1)}


def test_table_by_hand():
    results = {"date": "2026-11-25", "cpus": 2, "steps": 3, "batch": 64, "bptt": 100, "vocab": 10000,
               "matmul_gflops": {"tensorflow": 80.0, "jax": 100.0},
               "rows": {"a": row("tensorflow", "graph", lm_speed.REFERENCE, 1000.0, 50e6),
                        "b": row("tensorflow", "graph", "RMC, RelationalMemory", 1500.0, 50e6),
                        "c": row("jax", "jit", "RMC, RelationalMemory", 1200.0, 50e6)}}
    table = lm_speed.markdown(results).splitlines()
    # 1000 tok/s x 50 MFLOP = 50 GFLOP/s, half of the machine's best rate (JAX's 100)
    assert table[2] == "| RMC, RNN(cell) (reference) | tensorflow graph | 10 | 1,000 | 1.00 | 50.0 | 50.0 | 50% |"
    assert table[3] == "| RMC, RelationalMemory | tensorflow graph | 10 | 1,500 | 1.50 | 50.0 | 75.0 | 75% |"
    # no RNN(cell) row for JAX in this run: no ratio
    assert table[4] == "| RMC, RelationalMemory | jax jit | 10 | 1,200 |  | 50.0 | 60.0 | 60% |"
    assert "tensorflow 80.0 GFLOP/s, jax 100.0 GFLOP/s" in table[-1]


def test_training_flops_of_each_model():
    # the plain LSTM: untied, so no projection; a 1000-unit LSTM on 192 inputs and a 10k softmax
    assert lm_speed.training_flops("plain keras LSTM (untied)", 10_000) == 3 * (2 * 1192 * 4000 + 2 * 1000 * 10_000)
    rmc = [name for name, (kind, _) in lm_speed.MODELS.items() if kind == "rmc"]
    assert len(rmc) == 3 and len({lm_speed.training_flops(name, 10_000) for name in rmc}) == 1
