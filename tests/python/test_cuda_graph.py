"""CUDA-graph capture of the public torch ops and of the decoder block's training step.

Each op is captured by ``torch.cuda.graph`` (global capture mode, torch's default: the strictest)
as its first call on the capture stream, so whatever it allocates, zeroes or creates lazily
happens under capture. Its outputs are then poisoned with NaN and the graph replayed twice; each
replay must match an eager call on the same inputs. Backward passes are captured whole (forward,
``backward``), after the one warm-up iteration on a side stream that torch asks for autograd.
"""

from __future__ import annotations

import math

import pytest

import hopperkit as hk

torch = pytest.importorskip("torch")


def _randn(*shape, dtype=torch.bfloat16, scale=1.0, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * scale).to(dtype)


def _tensors(out):
    return [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, torch.Tensor)]


def _poison(ts):
    for t in ts:
        if t.is_floating_point() and t.element_size() >= 2:
            t.fill_(math.nan)
        else:
            t.zero_()


def _fp8_operands():
    x, w = _randn(256, 512, seed=1), _randn(384, 512, seed=2, scale=0.1)
    qa, sa = hk.quantize_fp8(x, scaling="block", block_rows=1)
    qb, sb = hk.quantize_fp8(w, scaling="block", block_rows=128)
    return qa, sa, qb, sb


def _w4a16_operands():
    x = _randn(16, 1024, seed=3)
    qw, scales, zeros = hk.w4a16_quantize(_randn(512, 1024, seed=4, dtype=torch.float32), 128)
    return x, qw, scales.to(torch.bfloat16), zeros


def _attention_qkv(d, s=256, b=2, hq=4, hkv=2):
    return (_randn(b, s, hq, d, seed=5), _randn(b, s, hkv, d, seed=6), _randn(b, s, hkv, d, seed=7))


def _rope_args():
    cos, sin = hk.rope_tables(64, 64, device="cuda")
    return _randn(2, 64, 4, 64, seed=8), cos, sin


# (id, build inputs, the op)
FORWARD = [
    ("gelu", lambda: (_randn(1000, 333),), hk.gelu),
    ("softmax", lambda: (_randn(300, 4097),), hk.softmax),
    ("rms_norm", lambda: (_randn(513, 768), _randn(768, seed=1)), hk.rms_norm),
    ("row_sum", lambda: (_randn(257, 3001, dtype=torch.float32),), hk.row_sum),
    ("weighted_sum", lambda: (_randn(1024, 4096), _randn(4096, seed=1)), hk.weighted_sum),
    ("matmul", lambda: (_randn(512, 1024), _randn(1024, 768, seed=1)), hk.matmul),
    # K = 4095: rows TMA cannot read; the operands go through an aligned copy in scratch
    ("matmul_unaligned_k", lambda: (_randn(512, 4095), _randn(768, 4095, seed=1).t()), hk.matmul),
    # stream-K's partial tiles and flags live in a per-stream buffer made on the first call
    ("matmul_skinny", lambda: (_randn(16, 8192), _randn(8192, 4096, seed=1)), hk.matmul),
    ("linear_gelu", lambda: (_randn(256, 512), _randn(1024, 512, seed=1), _randn(1024, seed=2)),
     lambda x, w, b: hk.matmul(x, w.t(), bias=b, activation="gelu")),
    ("linear_residual", lambda: (_randn(256, 512), _randn(384, 512, seed=1), _randn(256, 384, seed=2)),
     hk.linear_residual),
    ("swiglu", lambda: (_randn(300, 2 * 688),), hk.swiglu),
    ("rope", _rope_args, hk.rope),
    ("attention_causal", lambda: _attention_qkv(128), lambda q, k, v: hk.attention(q, k, v, causal=True)),
    ("attention_d80", lambda: _attention_qkv(80), lambda q, k, v: hk.attention(q, k, v)),
    ("attention_d36", lambda: _attention_qkv(36), lambda q, k, v: hk.attention(q, k, v, causal=True)),
    ("attention_varlen", lambda: (_randn(300, 4, 64, seed=5), _randn(300, 2, 64, seed=6), _randn(300, 2, 64, seed=7),
                                  torch.tensor([0, 37, 200, 300], dtype=torch.int32, device="cuda")),
     lambda q, k, v, cu: hk.attention_varlen(q, k, v, cu, cu, 163, 163, causal=True)),
    ("conv2d_nhwc", lambda: (_randn(4, 64, 14, 14).to(memory_format=torch.channels_last),
                             _randn(128, 64, 3, 3, seed=1, scale=0.05).to(memory_format=torch.channels_last)),
     lambda x, w: hk.conv2d(x, w, padding=1)),
    ("conv2d_depthwise", lambda: (_randn(2, 32, 28, 28), _randn(32, 1, 7, 7, seed=1)),
     lambda x, w: hk.conv2d(x, w, padding=3, groups=32)),
    ("conv2d_single_channel", lambda: (_randn(4, 129, 257, dtype=torch.float32),
                                       _randn(3, 3, seed=1, dtype=torch.float32)), hk.conv2d_single_channel),
    ("quantize_fp8_block", lambda: (_randn(256, 512),), lambda x: hk.quantize_fp8(x, scaling="block")),
    ("matmul_fp8_block", _fp8_operands, hk.matmul_fp8),
    ("matmul_w4a16", _w4a16_operands, lambda x, qw, s, z: hk.matmul_w4a16(x, qw, s, z, group_size=128)),
]


def _capture(fn, args):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    return graph, out


@pytest.mark.parametrize("name,make,fn", FORWARD, ids=[c[0] for c in FORWARD])
def test_forward_replays_from_a_graph(cuda, name, make, fn):
    args = make()
    torch.cuda.synchronize()
    graph, out = _capture(fn, args)
    want = _tensors(fn(*args))  # eager, on the same inputs, after capture
    got = _tensors(out)
    assert len(got) == len(want)
    for replay in (1, 2):
        _poison(got)
        graph.replay()
        torch.cuda.synchronize()
        for g, w in zip(got, want):
            assert not g.is_floating_point() or not torch.isnan(g.float()).any(), f"{name}: replay {replay} left NaN"
            torch.testing.assert_close(g.float(), w.float(), rtol=1e-2, atol=1e-2,
                                       msg=lambda m: f"{name}, replay {replay}: {m}")


def _train_step_graph(step, params):
    """Warm up `step` once on a side stream (autograd's lazy state), then capture it; returns the
    graph and what the captured step returned."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    for p in params:
        p.grad = None
    return _capture(step, ())


BACKWARD = ["matmul", "rms_norm", "attention_causal", "attention_d80", "swiglu", "block"]


@pytest.mark.parametrize("name", BACKWARD)
def test_forward_backward_replays_from_a_graph(cuda, name):
    if name == "block":
        torch.manual_seed(0)
        block = hk.nn.TransformerBlock(512, 8, 2, device="cuda", dtype=torch.bfloat16)
        x = _randn(2, 128, 512, seed=9).requires_grad_(True)
        params = [x, *block.parameters()]

        def forward():
            return block(x)
    else:
        if name == "matmul":
            params = [_randn(256, 512).requires_grad_(True), _randn(512, 384, seed=1).requires_grad_(True)]
            op = hk.matmul
        elif name == "rms_norm":
            params = [_randn(300, 1024).requires_grad_(True), _randn(1024, seed=1).requires_grad_(True)]
            op = hk.rms_norm
        elif name == "swiglu":
            params = [_randn(300, 2 * 512).requires_grad_(True)]
            op = hk.swiglu
        else:
            params = [t.requires_grad_(True) for t in _attention_qkv(128 if name == "attention_causal" else 80)]

            def op(q, k, v):
                return hk.attention(q, k, v, causal=name == "attention_causal")

        def forward():
            return op(*params)

    y0 = forward()
    dy = _randn(*y0.shape, seed=11)
    del y0

    def step():
        y = forward()
        y.backward(dy)
        return y

    graph, y = _train_step_graph(step, params)
    grads = [p.grad for p in params]
    assert all(g is not None for g in grads), name
    for p in params:  # the eager step after capture accumulates into fresh gradients
        p.grad = None
    want_y = step().detach().clone()
    want = [p.grad.detach().clone() for p in params]
    for replay in (1, 2):
        _poison([y, *grads])
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y.float(), want_y.float(), rtol=2e-2, atol=2e-2,
                                   msg=lambda m: f"{name} output, replay {replay}: {m}")
        for i, (g, w) in enumerate(zip(grads, want)):
            # attention's dq sums by atomics: equal up to the order of f32 additions, then rounded
            torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=2e-2,
                                       msg=lambda m: f"{name} grad {i}, replay {replay}: {m}")


def test_compile_reduce_overhead_runs_the_graph(cuda):
    """torch.compile(mode="reduce-overhead") records hopperkit's custom ops in a CUDA graph."""
    w = _randn(768, seed=1)

    def f(x):
        return hk.gelu(hk.rms_norm(x, w))

    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for seed in range(3):  # the first calls record; later ones replay
        x = _randn(257, 768, seed=seed)
        torch.testing.assert_close(compiled(x).float(), f(x).float(), rtol=1e-2, atol=1e-2)
