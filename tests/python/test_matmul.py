"""hk.matmul, hk.linear and hk.nn.Linear against torch: the four layouts (transposed views run
as they are), odd shapes and tile multiples, bias / ReLU / GeLU epilogues, batches (3-D @ 3-D,
3-D @ 2-D folded into M, 2-D @ 3-D and batch-1 broadcasts as stride-0 views), gradients,
opcheck, torch.compile(fullgraph=True), torch.export, bad input.

Most tests run twice: on CUDA tensors (the kernels; skipped without a GPU) and on CPU tensors,
which run the same custom op through the fp64 reference rounded once — so the Python side
(layouts, broadcasting, autograd, fake implementations) is checked on any machine.
"""

from __future__ import annotations

import math

import pytest

import hopperkit as hk
from hopperkit._op import matrix_layout_ok

torch = pytest.importorskip("torch", reason="the torch ops need torch: torch is not installed")
F = torch.nn.functional

DTYPES = [torch.bfloat16, torch.float16]
LAYOUTS = ["nn", "nt", "tn", "tt"]  # 't': a column-major operand (a transposed view)
# Odd tails (TMA-hostile K) and whole 128x256 tiles.
SHAPES = [(113, 203, 799), (256, 512, 64), (1, 1, 1), (17, 8, 40)]
# One rounding of the f32 result: an ulp of the output dtype.
ULP = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


@pytest.fixture(params=["cuda", "cpu"])
def dev(request):
    if request.param == "cuda":
        return request.getfixturevalue("cuda")
    return torch.device("cpu")


def small_ints(shape, dtype, device, gen=None):
    """Integers in [-3, 3]: every product and partial sum is exact in f32 (and fp64), so the
    kernels and the reference agree bit for bit after the one rounding."""
    return torch.randint(-3, 4, shape, generator=gen).to(dtype).to(device)


def operand(rows, cols, col_major, dtype, device, pad=0):
    """A [rows, cols] operand: row-major, or column-major as the transpose of a [cols, rows]
    tensor; `pad` pads the leading dim (a view into a wider tensor)."""
    if col_major:
        return small_ints((cols, rows + pad), dtype, device)[:, :rows].t()
    return small_ints((rows, cols + pad), dtype, device)[:, :cols]


def reference(a, b, bias=None, activation=None):
    """act(a b + bias) in f32 from the same (rounded) inputs, before the rounding to a's dtype."""
    z = torch.matmul(a.float(), b.float())
    if bias is not None:
        z = z + bias.float()
    if activation == "relu":
        z = torch.relu(z)
    elif activation == "gelu":
        z = F.gelu(z, approximate="tanh")
    return z


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layouts_match_torch_exactly(dev, dtype, shape, layout):
    m, n, k = shape
    a = operand(m, k, layout[0] == "t", dtype, dev, pad=3)
    b = operand(k, n, layout[1] == "t", dtype, dev, pad=5)
    assert matrix_layout_ok(a) and matrix_layout_ok(b)  # padded and transposed views: no copy
    c = hk.matmul(a, b)
    assert c.dtype == dtype and c.shape == (m, n) and c.device == a.device and c.is_contiguous()
    torch.testing.assert_close(c, reference(a, b).to(dtype), rtol=0, atol=0)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_epilogues(dev, dtype, with_bias, activation):
    m, n, k = 113, 203, 799
    a = operand(m, k, False, dtype, dev)
    b = operand(k, n, True, dtype, dev)  # x W^T, the Linear layout
    bias = small_ints((n,), dtype, dev) if with_bias else None
    c = hk.matmul(a, b, bias, activation)
    expect = reference(a, b, bias, activation).to(dtype)
    if activation == "gelu":  # f32 GeLU in two libraries: neighbouring values may round apart
        torch.testing.assert_close(c, expect, rtol=ULP[dtype], atol=1e-5)
    else:
        torch.testing.assert_close(c, expect, **bias_tolerance(dev, dtype, with_bias))


def bias_tolerance(dev, dtype, with_bias):
    """Exact, but for a bias on the GPU: few-tile problems like the tests' run cuBLASLt's fused
    BIAS epilogue, which rounds the product to the 16-bit output, adds the bias and rounds again
    (as torch's own bf16 Linear does): one output ulp."""
    if with_bias and dev.type == "cuda":
        return dict(rtol=ULP[dtype], atol=0)
    return dict(rtol=0, atol=0)


def test_random_values_k_aware_tolerance(dev):
    a = torch.randn(97, 4000, device=dev).to(torch.bfloat16)
    b = torch.randn(4000, 136, device=dev).to(torch.bfloat16).t().contiguous().t()
    c = hk.matmul(a, b, None, "gelu")
    # f32 sums of 4000 products in different orders (|sum| ~ 63): 2^-20 K absolute, as the C++
    # tolerance; then one bf16 rounding.
    torch.testing.assert_close(c, reference(a, b, None, "gelu").to(torch.bfloat16), rtol=ULP[torch.bfloat16],
                               atol=2.0**-20 * 4000)


def test_batched(dev):
    dtype = torch.float16
    a = small_ints((3, 64, 136), dtype, dev)
    b = small_ints((3, 72, 136), dtype, dev).transpose(1, 2)  # a batch of column-major B
    bias = small_ints((72,), dtype, dev)
    c = hk.matmul(a, b, bias, "relu")
    assert c.shape == (3, 64, 72)
    torch.testing.assert_close(c, reference(a, b, bias, "relu").to(dtype), rtol=0, atol=0)
    # A batch-strided view (every other matrix) runs as it is.
    wide = small_ints((6, 64, 136), dtype, dev)[::2]
    assert matrix_layout_ok(wide)
    torch.testing.assert_close(hk.matmul(wide, b), reference(wide, b).to(dtype), rtol=0, atol=0)


def test_batch_broadcasts(dev):
    dtype = torch.bfloat16
    a3 = small_ints((4, 33, 40), dtype, dev)
    b2 = small_ints((40, 24), dtype, dev)
    a2 = small_ints((33, 40), dtype, dev)
    b3 = small_ints((4, 40, 24), dtype, dev)
    cases = [
        (a3, b2),                  # folded into M = 4 * 33 (a view: a3 is contiguous)
        (a3.transpose(1, 2).contiguous().transpose(1, 2), b2),  # column-major batch: a copy, folded
        (a2, b3),                  # a repeats as a stride-0 batch
        (a3[:1], b3),              # a batch of one against four
        (a3, b3[1:2]),
    ]
    for a, b in cases:
        c = hk.matmul(a, b)
        expect = reference(a, b).to(dtype)
        assert c.shape == expect.shape, (tuple(a.shape), tuple(b.shape))
        torch.testing.assert_close(c, expect, rtol=0, atol=0)


def test_empty_and_k_zero(dev):
    dtype = torch.bfloat16
    a = torch.empty(0, 8, dtype=dtype, device=dev)
    b = small_ints((8, 5), dtype, dev)
    assert hk.matmul(a, b).shape == (0, 5)
    # K = 0: the product is zero and the epilogue still applies: relu(0 + bias).
    bias = small_ints((5,), dtype, dev)
    c = hk.matmul(torch.empty(3, 0, dtype=dtype, device=dev), torch.empty(0, 5, dtype=dtype, device=dev), bias, "relu")
    torch.testing.assert_close(c, torch.relu(bias).expand(3, 5), rtol=0, atol=0)
    assert hk.matmul(torch.empty(0, 3, 8, dtype=dtype, device=dev), b).shape == (0, 3, 5)


def misaligned(rows, cols, dtype, device, offset=1):
    """A contiguous [rows, cols] view that starts `offset` elements into its storage: a base
    address TMA cannot take (2-byte aligned)."""
    flat = small_ints((rows * cols + offset,), dtype, device)
    return flat[offset:].view(rows, cols)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_operands_tma_cannot_describe_match_torch_exactly(dev, dtype):
    # x @ W^T with K = 4095 (rows of 8190 bytes), a view one element into its buffer, a
    # transposed misaligned weight and an odd N: the dispatch copies what TMA cannot read into
    # aligned scratch (v19_aligned_pack) rather than running a teaching rung.
    cases = [
        (small_ints((300, 4095), dtype, dev), small_ints((520, 4095), dtype, dev).t()),
        (misaligned(257, 136, dtype, dev), small_ints((136, 263), dtype, dev)),
        (small_ints((64, 96), dtype, dev), misaligned(72, 96, dtype, dev, offset=3).t()),
        (misaligned(33, 1001, dtype, dev), misaligned(1001, 7, dtype, dev, offset=5)),
    ]
    for a, b in cases:
        if dev.type == "cuda":
            assert "v19_aligned_pack" in hk.explain("gemm", a, b).splitlines()[0]
        torch.testing.assert_close(hk.matmul(a, b), reference(a, b).to(dtype), rtol=0, atol=0)
        bias = small_ints((b.shape[1],), dtype, dev)
        torch.testing.assert_close(hk.matmul(a, b, bias, "relu"), reference(a, b, bias, "relu").to(dtype),
                                   **bias_tolerance(dev, dtype, True))


def grad_tolerance(dtype, length):
    """dZ = dY act'(Z) is rounded to the dtype (an ulp per term, random signs: sqrt(length)
    terms of size ~1 add up), then the product rounds once more."""
    return dict(rtol=2 * ULP[dtype], atol=4 * ULP[dtype] * math.sqrt(length))


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradients_match_torch(dev, layout, activation):
    dtype = torch.bfloat16
    m, n, k = 37, 45, 61
    gen = torch.Generator().manual_seed(7)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype).to(dev)

    a = (randn(k, m).t() if layout[0] == "t" else randn(m, k)).requires_grad_()
    b = (randn(n, k).t() if layout[1] == "t" else randn(k, n)).requires_grad_()
    bias = randn(n).requires_grad_()
    dy = randn(m, n)
    if activation == "relu":
        # Where the pre-activation lies within an output ulp of zero, whether ReLU passes it
        # depends on how the forward rounded (cuBLASLt's bias epilogue rounds twice): no
        # gradient flows there in either case.
        p = a.detach().float() @ b.detach().float()
        z = p + bias.detach().float()
        dy = torch.where(z.abs() <= ULP[dtype] * (p.abs() + bias.detach().float().abs()), 0, dy)
    hk.matmul(a, b, bias, activation).backward(dy)
    ar, br, biasr = (t.detach().float().requires_grad_() for t in (a, b, bias))
    reference(ar, br, biasr, activation).backward(dy.float())
    assert a.grad.dtype == dtype and a.grad.shape == a.shape and b.grad.shape == b.shape
    torch.testing.assert_close(a.grad, ar.grad.to(dtype), **grad_tolerance(dtype, n))
    torch.testing.assert_close(b.grad, br.grad.to(dtype), **grad_tolerance(dtype, m))
    torch.testing.assert_close(bias.grad, biasr.grad.to(dtype), **grad_tolerance(dtype, m))


def test_gradients_batched_and_broadcast(dev):
    dtype = torch.float16
    a = torch.randn(3, 20, 24, device=dev).to(dtype).requires_grad_()
    b = torch.randn(24, 16, device=dev).to(dtype).requires_grad_()  # shared over the batch
    w = torch.randn(3, 16, 8, device=dev).to(dtype).requires_grad_()
    (hk.matmul(hk.matmul(a, b, None, "relu"), w)).sum().backward()
    ar, br, wr = (t.detach().float().requires_grad_() for t in (a, b, w))
    torch.matmul(torch.relu(torch.matmul(ar, br)).to(dtype).float(), wr).sum().backward()
    tol = grad_tolerance(dtype, 3 * 20 * 8)
    torch.testing.assert_close(a.grad, ar.grad.to(dtype), **tol)
    torch.testing.assert_close(b.grad, br.grad.to(dtype), **tol)  # summed over the batch
    torch.testing.assert_close(w.grad, wr.grad.to(dtype), **tol)


def test_weight_gradient_in_the_weights_layout(dev):
    """x W^T with W [N, K] passed as the column-major view W.t(): the backward computes dW as
    dZ^T X, row-major like W (the path that spares autograd a strided copy into W.grad); a
    row-major b takes dB = X^T dZ. Both against fp64."""
    dtype = torch.bfloat16
    x = torch.randn(40, 24, device=dev).to(dtype).requires_grad_()
    w = torch.randn(16, 24, device=dev).to(dtype).requires_grad_()
    dy = torch.randn(40, 16, device=dev).to(dtype)
    hk.linear(x, w).backward(dy)
    want = (dy.double().t() @ x.detach().double()).to(dtype)
    torch.testing.assert_close(w.grad, want, **grad_tolerance(dtype, 40))
    # a row-major b keeps its row-major gradient
    b = torch.randn(24, 16, device=dev).to(dtype).requires_grad_()
    hk.matmul(x.detach(), b).backward(dy)
    torch.testing.assert_close(b.grad, (x.detach().double().t() @ dy.double()).to(dtype), **grad_tolerance(dtype, 40))


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_opcheck(dev, activation):
    a = torch.randn(13, 40, device=dev).to(torch.bfloat16).requires_grad_()
    b = torch.randn(24, 40, device=dev).to(torch.bfloat16).t().requires_grad_()
    bias = torch.randn(24, device=dev).to(torch.bfloat16).requires_grad_()
    torch.library.opcheck(hk.ops._matmul.op, (a, b, bias, activation))
    torch.library.opcheck(hk.ops._matmul.op, (a.detach()[None].expand(2, 13, 40), b.detach()[None].expand(2, 40, 24)))


def test_compile_fullgraph(dev):
    torch._dynamo.reset()
    # Inductor generates the surrounding code on CUDA; on the CPU, aot_eager checks the same
    # tracing (fake implementation, autograd, no graph break) without a C++ code generator.
    backend = "inductor" if dev.type == "cuda" else "aot_eager"
    lin = hk.nn.Linear(40, 24, device=dev, dtype=torch.bfloat16)

    def f(x, w):
        h = hk.matmul(x * 2, w, lin.bias, "gelu")
        return lin(x) + h

    cf = torch.compile(f, fullgraph=True, backend=backend)
    x = torch.randn(3, 13, 40, device=dev).to(torch.bfloat16)
    w = torch.randn(24, 40, device=dev).to(torch.bfloat16).t()
    torch.testing.assert_close(cf(x, w), f(x, w), rtol=ULP[torch.bfloat16], atol=1e-2)
    xg = x.clone().requires_grad_()
    cf(xg, w).float().pow(2).sum().backward()
    gw = lin.weight.grad.clone()
    lin.weight.grad = None
    xr = x.clone().requires_grad_()
    f(xr, w).float().pow(2).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, rtol=ULP[torch.bfloat16], atol=1e-2)
    torch.testing.assert_close(gw, lin.weight.grad, rtol=ULP[torch.bfloat16], atol=1e-1)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nn_linear_is_a_drop_in(dev, dtype, bias):
    ours = hk.nn.Linear(203, 113, bias=bias, device=dev, dtype=dtype)
    theirs = torch.nn.Linear(203, 113, bias=bias, device=dev, dtype=dtype)
    assert repr(ours) == repr(theirs)
    assert isinstance(ours, torch.nn.Linear)
    theirs.load_state_dict(ours.state_dict())
    assert matrix_layout_ok(ours.weight.t())  # W^T is read as it is
    x = torch.randn(2, 7, 203, device=dev).to(dtype)
    # Both f32-accumulate 203 products of ~N(0, 1/203) weights; then one rounding each.
    # torch may round x W^T before adding the bias (a second rounding): allow a few ulps near 1.
    tol = dict(rtol=2 * ULP[dtype], atol=4 * ULP[dtype])
    torch.testing.assert_close(ours(x), theirs(x), **tol)
    torch.testing.assert_close(ours(x[0, 0]), theirs(x[0, 0]), **tol)  # 1-D input
    xg = x.clone().requires_grad_()
    ours(xg).float().sum().backward()
    xr = x.clone().requires_grad_()
    theirs(xr).float().sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, **tol)
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad, **tol)
    if bias:
        torch.testing.assert_close(ours.bias.grad, theirs.bias.grad, **tol)


def test_export_keeps_the_custom_op(dev):
    m = hk.nn.Linear(64, 32, device=dev, dtype=torch.bfloat16)
    x = torch.randn(8, 64, device=dev).to(torch.bfloat16)
    ep = torch.export.export(m, (x,))
    assert "torch.ops.hopperkit.matmul.default" in str(ep.graph_module.code)
    torch.testing.assert_close(ep.module()(x), m(x))


def test_matrix_layout_matches_what_make_problem_takes():
    """matrix_layout_ok passes a tensor as it is exactly when gemm's make_problem takes it as an
    operand (otherwise the op copies it first)."""
    base = torch.zeros(4, 10, 12, dtype=torch.bfloat16)
    cases = [base, base.transpose(1, 2), base[:, :, :7], base[:, :7].transpose(1, 2), base[::2], base[0],
             base[0].t(), base[:, ::2], base[:, :, ::2], base.permute(2, 0, 1)[:3], base[0, :1], base[0, :, :1],
             base[0, :, :1].t(), torch.zeros(1, 12, dtype=torch.bfloat16).expand(5, 12),
             torch.zeros(5, 1, dtype=torch.bfloat16).expand(5, 12), torch.zeros(12, dtype=torch.bfloat16)[None],
             base[0].expand(3, 10, 12), base.as_strided((10, 12), (4, 1))]
    for x in cases:
        other = torch.zeros(x.shape[-1], 3, dtype=torch.bfloat16)
        if x.dim() == 3:
            other = other.expand(x.shape[0], -1, -1)
        try:
            hk.problem("gemm", x, other)
            taken = True
        except (NotImplementedError, ValueError):
            taken = False
        assert taken == matrix_layout_ok(x), (tuple(x.shape), x.stride())
    assert matrix_layout_ok(torch.zeros(8)) and not matrix_layout_ok(torch.zeros(16)[::2])


def test_bad_input(dev):
    bf = dict(dtype=torch.bfloat16, device=dev)
    a, b = torch.ones(8, 16, **bf), torch.ones(16, 8, **bf)
    with pytest.raises(TypeError, match="gemm: a is f32, expected bf16 or f16"):
        hk.matmul(a.float(), b.float())
    with pytest.raises(TypeError, match="gemm: b is f16 but a is bf16"):
        hk.matmul(a, b.half())
    with pytest.raises(ValueError, match=r"gemm: a is \[8, 16\] and b is \[15, 8\]: K must match, got 16 and 15"):
        hk.matmul(a, torch.ones(15, 8, **bf))
    with pytest.raises(ValueError, match=r"gemm: bias must be \[8\], got \[9\]"):
        hk.matmul(a, b, torch.ones(9, **bf))
    with pytest.raises(TypeError, match="gemm: bias is f16 but c is bf16"):
        hk.matmul(a, b, torch.ones(8, dtype=torch.float16, device=dev))
    with pytest.raises(ValueError, match=r'activation must be "none", "relu" or "gelu" \(tanh form\), got "silu"'):
        hk.matmul(a, b, None, "silu")
    with pytest.raises(ValueError, match="gemm: a must be .* got rank 4"):
        hk.matmul(torch.ones(2, 2, 8, 16, **bf), torch.ones(2, 2, 16, 8, **bf))
    with pytest.raises(ValueError, match="gemm: batch sizes differ: a 2, b 3"):
        hk.matmul(torch.ones(2, 8, 16, **bf), torch.ones(3, 16, 8, **bf))
    with pytest.raises(TypeError, match="gemm: a is f32"):
        hk.nn.Linear(16, 8, device=dev)(torch.ones(4, 16, device=dev))  # an f32 module
    if dev.type == "cuda":
        with pytest.raises(ValueError, match="input 1 is on cpu"):
            hk.matmul(a, b.cpu())
    torch.testing.assert_close(hk.matmul(a, b), torch.full((8, 8), 16.0, **bf))  # still works
