"""GPU: every registered variant of every family, through hk.run, on the family's own test
problems (odd shapes, strided rows, NaN/Inf specials), against the fp64 reference under the
problem's tolerance; and the public dispatch (variant "") on the same problems.

The C++ suite runs every test problem on every variant; here, where the point is the path from
torch tensors through hk.problem and hk.run, each variant takes every third problem (which third
depends on the variant's name, so the variants of a family share out all of them) and the public
dispatch takes them all. The fp64 references are host work: the whole list on every variant took
21 minutes of worker time on a 16-core H200 machine (2026-12-02), a third of it ~7.

Generic: a family added in C++ is tested here as soon as it implements Family::make_problem.
"""

from __future__ import annotations

import math
import time
import zlib

import numpy as np
import pytest

import hopperkit as hk

try:
    import torch
except ImportError:
    torch = None

CASES = [(f, v.name) for f in hk.families() for v in hk.variants(f)] + [(f, "") for f in hk.families()]
STRIDE = 3  # a variant runs problems i with i % STRIDE == crc32(name) % STRIDE; the dispatch runs all


def _values(spec: dict, n: int, gen) -> "torch.Tensor":
    """Fresh float64 values drawn as the spec says, specials written at their positions."""
    scale = spec["scale"]
    dist = spec["dist"]
    if dist == "normal":
        v = scale * torch.randn(n, dtype=torch.float64, generator=gen)
    elif dist == "uniform":
        v = scale * (2 * torch.rand(n, dtype=torch.float64, generator=gen) - 1)
    elif dist == "small_int":
        r = int(scale)
        v = torch.randint(-r, r + 1, (n,), generator=gen).to(torch.float64)
    elif dist == "positive":
        v = scale * (0.125 + 0.875 * torch.rand(n, dtype=torch.float64, generator=gen))
    else:
        raise AssertionError(f"unknown distribution {dist}")
    for idx, val in spec["specials"]:
        if idx < n:
            v[idx] = val
    return v


def make_input(spec: dict, device, gen) -> "torch.Tensor":
    """A device tensor laid out as the spec (strides included), its padding poisoned with the
    C++ harness's all-ones bytes (NaN in every float dtype)."""
    dtype = hk._core.torch_dtype(spec["dtype"])
    shape, strides = spec["shape"], spec["strides"]
    n = math.prod(shape)
    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if n else 0
    size = torch.empty((), dtype=dtype).element_size()
    base = torch.full((span * size,), 255, dtype=torch.uint8, device=device).view(dtype)
    t = base.as_strided(shape, strides)
    if n:
        t.copy_(_values(spec, n, gen).view(shape).to(dtype))
    return t


def mismatch(got: "torch.Tensor", ref: np.ndarray, tol: tuple[float, float]) -> str:
    """'' when got matches the fp64 reference as the C++ harness compares; else the first miss."""
    g = got.detach().to(torch.float64).cpu().numpy()
    atol, rtol = tol
    with np.errstate(invalid="ignore"):
        ok = np.where(np.isnan(ref), np.isnan(g),
                      np.where(np.isinf(ref), g == ref, np.abs(g - ref) <= atol + rtol * np.abs(ref)))
    if ok.all():
        return ""
    first = np.unravel_index(np.argmin(ok), ok.shape)
    return (f"{(~ok).sum()} of {ok.size} differ; first at {tuple(int(i) for i in first)}: "
            f"got {g[first]!r}, expected {ref[first]!r} (atol {atol}, rtol {rtol})")


@pytest.mark.parametrize("family,variant", CASES, ids=[f"{f}/{v or 'dispatch'}" for f, v in CASES])
def test_variant_matches_reference(cuda, family, variant):
    seed = zlib.crc32(f"{family}/{variant}".encode()) ^ time.time_ns()  # fresh inputs every run
    gen = torch.Generator().manual_seed(seed & 0xFFFFFFFF)
    ran, unsupported, failures = 0, [], []
    offset = zlib.crc32(variant.encode()) % STRIDE
    for i, p in enumerate(hk._C.test_problems(family)):
        if variant and i % STRIDE != offset:
            continue
        inputs = [make_input(s, cuda, gen) for s in p["inputs"]]
        try:
            q = hk.problem(family, *inputs, **p["attrs"])
        except NotImplementedError as e:
            if "make_problem" in str(e):
                pytest.fail(f"{family} has no Family::make_problem (docs/python.md): {e}")
            raise
        assert q["key"] == p["key"]
        if variant:
            why = hk.supports(family, variant, *inputs, **p["attrs"])
            if why:
                unsupported.append(f"{p['key']}: {why}")
                continue
            result = hk.run(family, variant, *inputs, **p["attrs"])
            outs = list(result) if isinstance(result, tuple) else [result]
        else:  # the public op's dispatch, as the torch ops call it
            outs = [torch.empty_strided(o["shape"], o["strides"], dtype=hk._core.torch_dtype(o["dtype"]),
                                        device=cuda) for o in q["outputs"]]
            hk._core.launch(family, "", inputs, outs, p["attrs"])
        result = hk.reference(family, *inputs, **p["attrs"])
        refs = list(result) if isinstance(result, tuple) else [result]
        torch.cuda.synchronize()
        for i, (got, ref) in enumerate(zip(outs, refs)):
            why = mismatch(got, ref, tuple(q["tolerances"][i]))
            if why:
                failures.append(f"{p['key']} output {i}: {why}")
        ran += 1
    assert not failures, (f"{family}/{variant or 'dispatch'} (seed {seed & 0xFFFFFFFF}):\n"
                          + "\n".join(failures[:20]))
    if ran == 0:
        pytest.skip(f"{family}/{variant} supports none of the test problems: " + "; ".join(unsupported[:3]))
