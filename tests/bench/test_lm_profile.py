"""bench/lm/profile.py: ops sorted into phase, place and kind; a tiny profiled run; the product timings."""

from bench.lm import profile as lm_profile


def test_categorize_by_hand():
    ps = 10**12
    times = {
        "model/core/while/body/_1/cell/qkv/BiasAdd": ("_MklNativeFusedMatMul", 3 * ps),
        "gradients/model/core/while/cell/qkv/MatMul_grad/MatMul": ("_MklMatMul", 2 * ps),
        "gradient_tape/model/softmax/MatMul": ("_MklMatMul", 1 * ps),
        "model/core/while/body/_1/cell/Tanh": ("Tanh", 1 * ps),
        "Adam/update/ResourceApplyAdam": ("ResourceApplyAdam", 1 * ps),
    }
    assert lm_profile.categorize(times) == {
        ("forward", "loop", "matmul"): 3 * ps, ("backward", "loop", "matmul"): 2 * ps,
        ("backward", "outside", "matmul"): ps, ("forward", "loop", "other"): ps,
        ("optimizer", "outside", "other"): ps}


def test_a_tiny_profiled_step(capsys):
    lm_profile.main(["--model", "rmc", "--steps", "1", "--batch", "4", "--bptt", "5", "--vocab", "50", "--top", "3"])
    out = capsys.readouterr().out
    assert "matrix products" in out and "backward  loop    matmul" in out


def test_product_rates_are_positive():
    rates = lm_profile.product_rates(rows=4, features=8, units=16, repeats=3)
    assert len(rates) == 3 and all(rate > 0 for rate in rates.values())
