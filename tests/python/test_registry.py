"""CPU: the registry as Python sees it, the import without torch, and the error mapping."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import hopperkit as hk


def test_families_lists_gelu_with_summary():
    fams = hk.families()
    assert "gelu" in fams
    assert list(fams) == sorted(fams)
    assert all(isinstance(s, str) and s for s in fams.values())


@pytest.mark.parametrize("family", list(hk.families()))
def test_variants_production_and_one_baseline(family):
    vs = hk.variants(family)
    assert vs, f"{family} has no variants"
    assert [v.name for v in vs] == sorted(v.name for v in vs)
    # Every family's dispatch routes public calls to at least one production rung; the rest are
    # ladder-only (tests and hk bench run them).
    assert any(v.is_production for v in vs), family
    assert sum(v.is_baseline for v in vs) == 1
    for v in vs:
        assert v.family == family and v.summary and v.min_sm >= 70
        assert set(v.flags) <= {"production", "baseline", "reference"}


def test_gelu_ladder():
    vs = {v.name: v for v in hk.variants("gelu")}
    assert {"v01_unfused", "v02_fused", "v03_vectorized"} <= set(vs)
    # v03 serves every alignment (peeled); the fused scalar rung and the unfused rung are ladder-only
    assert vs["v03_vectorized"].is_production
    assert not vs["v02_fused"].is_production and not vs["v01_unfused"].is_production
    assert vs["v01_unfused"].is_baseline and vs["v01_unfused"].is_reference


def test_unknown_family_and_variant_are_value_errors():
    with pytest.raises(ValueError, match=r"no family named 'softmaxx' \(families: .*gelu"):
        hk.variants("softmaxx")
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"gelu has no variant 'v99_magic' \(variants: v01_unfused"):
        hk.supports("gelu", "v99_magic", x)


def test_error_kinds_map_to_python_exceptions():
    x = np.ones(8, np.float32)
    with pytest.raises(TypeError, match="gelu: input 0 is float64"):
        hk.reference("gelu", x.astype(np.float64))
    with pytest.raises(TypeError, match="gelu: x is i32, expected f32, f16 or bf16"):
        hk.reference("gelu", x.astype(np.int32))
    with pytest.raises(TypeError, match="attribute approximate must be a str, got int"):
        hk.reference("gelu", x, approximate=1)
    with pytest.raises(ValueError, match="unknown attribute.*approx; gelu takes approximate, backward"):
        hk.reference("gelu", x, approx="tanh")
    with pytest.raises(ValueError, match='approximate must be "tanh" or "none", got "sigmoid"'):
        hk.reference("gelu", x, approximate="sigmoid")
    with pytest.raises(ValueError, match=r"gelu_backward: dy has shape \[5\] but x has \[8\]"):
        hk.reference("gelu", x, np.ones(5, np.float32), backward=True)
    with pytest.raises(ValueError, match=r"takes 2 inputs \(x, dy\), got 1"):
        hk.reference("gelu", x, backward=True)
    with pytest.raises(NotImplementedError, match="x must be contiguous"):
        hk.reference("gelu", np.ones((4, 6), np.float32)[:, ::2])


def test_variants_need_cuda_arrays():
    with pytest.raises(ValueError, match="input 0 is on cpu; variants run on CUDA tensors"):
        hk._C.launch("gelu", "", [np.ones(4, np.float32)], [np.ones(4, np.float32)], {}, 0)


def test_bench_errors():
    with pytest.raises((ValueError, RuntimeError)) as e:
        hk.bench("softmaxx")
    if hk._C.device_count() > 0:  # the family is checked first on a GPU machine
        assert e.type is ValueError and "no family named 'softmaxx'" in str(e.value)
    else:  # kCuda -> RuntimeError, with the reason there is no GPU
        assert e.type is RuntimeError and "hk.bench needs a CUDA GPU" in str(e.value)


def test_problem_descriptor():
    p = hk.problem("gelu", np.ones((3, 5), np.float16), approximate="tanh")
    assert p["key"] == "3x5_f16_tanh_fwd"
    assert p["attrs"] == {"approximate": "tanh", "backward": False}
    assert p["outputs"][0]["shape"] == (3, 5) and p["outputs"][0]["dtype"] == "f16"
    assert p["flops"] > 0 and p["bytes"] == 15 * 2 * 2
    assert len(p["tolerances"]) == 1


def test_imports_without_torch():
    # torch set to None in sys.modules makes `import torch` raise ImportError.
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, hopperkit as hk\n"
            "assert not hasattr(hk, 'nn')\n"
            "y = hk.gelu(np.array([1.0, -1.0], np.float32))\n"
            "assert y.dtype == np.float32 and abs(y[0] - 0.8413447) < 1e-6, y\n"
            "try:\n    hk.run('gelu', 'v02_fused', np.ones(2, np.float32))\n"
            "except ImportError as e:\n    print('ok', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok hk.run needs torch")


@pytest.mark.parametrize("code", [
    "import hopperkit",
    "import hopperkit, torch",
    "import torch, hopperkit",
    "import hopperkit as hk, numpy as np; hk.gelu(np.ones(3, np.float32))",
    "import hopperkit as hk, torch; hk.gelu(torch.ones(8, device='cuda')); torch.cuda.synchronize()",
])
def test_interpreter_exits_cleanly(code):
    # Library load order and static destructors: an abort at exit fails every script using us.
    if "torch" in code:
        torch = pytest.importorskip("torch")
        if "cuda" in code and not torch.cuda.is_available():
            pytest.skip("torch sees no CUDA device")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, f"{code!r} exited {out.returncode}: {out.stderr[-2000:]}"
