"""``hk.nn``: drop-in ``torch.nn`` modules running hopperkit's kernels (needs torch), and a decoder
block and language model built only from them (``TransformerBlock``, ``TransformerLM``)."""

from __future__ import annotations

import contextlib
import math
import numbers

import torch

from . import block_ops, ops
from .w4a16 import int4_matmul, quantize_int4


class GELU(torch.nn.Module):
    """Drop-in for ``torch.nn.GELU`` (same ``approximate`` argument and default)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class RMSNorm(torch.nn.Module):
    """Drop-in for ``torch.nn.RMSNorm`` (same arguments, parameter and state dict), running
    ``hk.rms_norm``.

    ``normalized_shape``: the trailing dims normalized over (an int or a tuple); several are
    flattened into one row of their product (a view for inputs whose trailing dims are
    contiguous). ``eps=None`` is ``torch.finfo(x.dtype).eps``, as in torch. The weight is cast to
    the input's dtype when they differ (the kernels take one dtype; its gradient flows back in
    the weight's dtype); without ``elementwise_affine`` a ones vector stands in for it.
    """

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            torch.nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.normalized_shape:
            raise ValueError(f"hk.nn.RMSNorm: normalized_shape={list(self.normalized_shape)} needs an input "
                             f"of shape [*, {', '.join(map(str, self.normalized_shape))}], got {list(x.shape)}")
        d = math.prod(self.normalized_shape)
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        if self.weight is None:
            weight = x.new_ones(d)
        else:
            weight = self.weight.reshape(d).to(x.dtype)
        rows = x.reshape(*x.shape[:x.ndim - k], d) if k != 1 else x
        return ops.rms_norm(rows, weight, eps).reshape(x.shape)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _as(p: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A parameter in the compute dtype: itself, or a cast (differentiable: its gradient comes back
    in the parameter's own dtype, as master weights need)."""
    return p if p.dtype == dtype else p.to(dtype)


class Linear(torch.nn.Linear):
    """Drop-in for ``torch.nn.Linear`` (same arguments, parameters, initialization and state
    dict): ``y = x W^T + b`` through ``hk.linear``, one GEMM with the bias fused.

    ``W`` [out_features, in_features] is read through its transpose, a column-major view: no
    copy. The kernels take 16-bit operands, bf16 or f16: the input sets the dtype, and a weight
    and bias kept in another dtype (f32 master weights for mixed-precision training) are cast to
    it on each call, their gradients flowing back in their own dtype. Other input dtypes are a
    TypeError naming them.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.linear(x, _as(self.weight, x.dtype), None if self.bias is None else _as(self.bias, x.dtype))


class Int4Linear(torch.nn.Module):
    """``y = x dequant(W)^T + b`` with a 4-bit weight: ``hk.int4_matmul`` on buffers ``qweight``
    (int32 ``[out, in / 8]``), ``scales`` (``[out, in / group_size]``, the activations' dtype) and
    ``zeros`` (packed, or None when symmetric), plus an optional ``bias``. ``from_linear`` quantises
    a ``torch.nn.Linear`` (round to nearest on GPTQ's grid, ``hk.quantize_int4``); the module then
    takes bf16 or f16 inputs of the weight's dtype. Inference only: no gradients."""

    def __init__(self, in_features: int, out_features: int, group_size: int = 128, symmetric: bool = False,
                 bias: bool = True, device=None, dtype=torch.bfloat16) -> None:
        super().__init__()
        if in_features % 8:
            raise ValueError(f"Int4Linear: in_features must be a multiple of 8 (eight weights per int32), got {in_features}")
        g = in_features if group_size in (None, -1) else int(group_size)
        if in_features % g:
            raise ValueError(f"Int4Linear: group_size {g} does not divide in_features {in_features}")
        self.in_features, self.out_features, self.group_size, self.symmetric = in_features, out_features, g, symmetric
        groups = in_features // g
        self.register_buffer("qweight", torch.zeros(out_features, in_features // 8, dtype=torch.int32, device=device))
        self.register_buffer("scales", torch.ones(out_features, groups, dtype=dtype, device=device))
        self.register_buffer("zeros", None if symmetric else
                             torch.zeros(out_features, (groups + 7) // 8, dtype=torch.int32, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, group_size: int = 128, symmetric: bool = False) -> "Int4Linear":
        """A quantised copy of ``linear`` on its device, in its dtype (bf16 or f16; others keep bf16)."""
        w = linear.weight.detach()
        dtype = w.dtype if w.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        m = cls(linear.in_features, linear.out_features, group_size, symmetric, linear.bias is not None, w.device, dtype)
        qweight, scales, zeros = quantize_int4(w.to(dtype), m.group_size, symmetric)
        m.qweight.copy_(qweight)
        m.scales.copy_(scales)
        if zeros is not None:
            m.zeros.copy_(zeros)
        if linear.bias is not None:
            m.bias.copy_(linear.bias.detach().to(dtype))
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = int4_matmul(x, self.qweight, self.scales, self.zeros)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}, "
                f"symmetric={self.symmetric}, bias={self.bias is not None}")


# ---- the decoder block and language model --------------------------------------------------------

_SUBLAYER_RANGES = False


@contextlib.contextmanager
def sublayer_ranges(enabled: bool = True):
    """Within this context, ``TransformerBlock.forward`` marks each sub-layer (``attn_norm``,
    ``qkv``, ``rope_attention``, ``attn_out``, ``ffn_norm``, ``gate_up``, ``swiglu``, ``down``)
    with a range named ``hk.block.<sub-layer>``: an NVTX range (nsys, ncu ``--nvtx``) and a
    ``torch.profiler`` range, whose device time is the time of the kernels launched inside it.
    Off by default: a range costs host time per call, and the eager small models are bound by it.
    Eager calls only: code that ``torch.compile`` traces gets no ranges (they would break its
    graph, and switching them on or off recompiles it), and a captured CUDA graph replays none.
    The switch is process-wide. Without CUDA (a CPU build of torch) only the profiler ranges
    exist."""
    global _SUBLAYER_RANGES
    before, _SUBLAYER_RANGES = _SUBLAYER_RANGES, enabled
    try:
        yield
    finally:
        _SUBLAYER_RANGES = before


_HAS_NVTX = hasattr(torch._C, "_nvtx")  # a CPU build of torch has none


@contextlib.contextmanager
def _marked(name: str):
    if _HAS_NVTX:
        torch.cuda.nvtx.range_push(name)
    try:
        with torch.autograd.profiler.record_function(name):
            yield
    finally:
        if _HAS_NVTX:
            torch.cuda.nvtx.range_pop()


_UNMARKED = contextlib.nullcontext()


def _sublayer(name: str):
    # No ranges in a graph torch.compile traces: they would break it into pieces.
    if not _SUBLAYER_RANGES or torch.compiler.is_compiling():
        return _UNMARKED
    return _marked("hk.block." + name)


def _block_dims(dim: int, n_heads: int, n_kv_heads: int | None, ffn_dim: int | None,
                head_dim: int | None) -> tuple[int, int, int, int]:
    """(n_heads, n_kv_heads, head_dim, ffn_dim) with the defaults filled in and checked."""
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads})")
    if head_dim is None:
        if dim % n_heads:
            raise ValueError(f"dim ({dim}) must be a multiple of n_heads ({n_heads}) unless head_dim is given")
        head_dim = dim // n_heads
    if ffn_dim is None:  # Llama's rule: 2/3 of 4 dim, rounded up to a multiple of 256
        ffn_dim = 256 * ((int(8 * dim / 3) + 255) // 256)
    return n_heads, n_kv_heads, head_dim, ffn_dim


class TransformerBlock(torch.nn.Module):
    """A pre-norm decoder block (Llama's), every step a hopperkit kernel:

    ``h = x + W_o attention(rope(q), rope(k), v)`` with ``q, k, v`` from one fused projection
    ``W_qkv rms_norm(x)``, then ``out = h + W_down swiglu(W_gate_up rms_norm(h))``.

    Parameters (names shared with ``hopperkit.reference_model.ReferenceBlock``, so state dicts
    load into either): ``attn_norm.weight`` [dim], ``qkv.weight`` [(Hq + 2 Hkv) Dh, dim] (the q,
    k and v rows stacked in that order), ``attn_out.weight`` [dim, Hq Dh], ``ffn_norm.weight``
    [dim], ``gate_up.weight`` [2 F, dim] (gate rows, then up rows), ``down.weight`` [dim, F]; no
    biases. Causal attention with ``n_kv_heads`` KV heads shared by ``n_heads / n_kv_heads``
    query heads each (GQA), RoPE with ``theta`` on the first ``rotary_dim`` (default Dh) dims of
    each head. Parameters are bf16 by default. The input's dtype (bf16 or f16: the GEMM and
    attention kernels take 16-bit operands) is the compute dtype; parameters kept in another
    dtype — ``dtype=torch.float32``, f32 master weights for mixed-precision training — are cast
    to it on each forward, and their gradients come back in f32.

    ``fuse_residual`` (default True): the two residual adds run in the output and down
    projections' GEMM epilogues (``hk.linear_residual``) instead of as separate adds.

    ``forward(x, cos=None, sin=None)``: ``x`` [B, S, dim]; ``cos, sin`` the [S, rotary_dim/2] f32
    tables of ``hk.rope_tables`` (computed for positions 0..S-1 when left out).
    """

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int | None = None, ffn_dim: int | None = None, *,
                 head_dim: int | None = None, rotary_dim: int | None = None, rope_theta: float = 10000.0,
                 eps: float = 1e-6, fuse_residual: bool = True, device=None, dtype=torch.bfloat16) -> None:
        super().__init__()
        self.fuse_residual = fuse_residual
        self.n_heads, self.n_kv_heads, self.head_dim, self.ffn_dim = _block_dims(dim, n_heads, n_kv_heads,
                                                                                 ffn_dim, head_dim)
        self.dim = dim
        self.rotary_dim = self.head_dim if rotary_dim is None else rotary_dim
        self.rope_theta = rope_theta
        kw = {"device": device, "dtype": dtype}
        qkv_rows = (self.n_heads + 2 * self.n_kv_heads) * self.head_dim
        self.attn_norm = RMSNorm(dim, eps=eps, **kw)
        self.qkv = Linear(dim, qkv_rows, bias=False, **kw)
        self.attn_out = Linear(self.n_heads * self.head_dim, dim, bias=False, **kw)
        self.ffn_norm = RMSNorm(dim, eps=eps, **kw)
        self.gate_up = Linear(dim, 2 * self.ffn_dim, bias=False, **kw)
        self.down = Linear(self.ffn_dim, dim, bias=False, **kw)

    def rope_tables(self, seq_len: int, device=None) -> tuple:
        return block_ops.rope_tables(seq_len, self.rotary_dim, self.rope_theta, device=device)

    def forward(self, x: torch.Tensor, cos: torch.Tensor | None = None, sin: torch.Tensor | None = None) -> torch.Tensor:
        b, s, _ = x.shape
        if cos is None or sin is None:
            cos, sin = self.rope_tables(s, x.device)
        hq, hkv, dh = self.n_heads, self.n_kv_heads, self.head_dim
        with _sublayer("attn_norm"):
            n = self.attn_norm(x)
        with _sublayer("qkv"):
            qkv = self.qkv(n).view(b, s, hq + 2 * hkv, dh)
        # q, k, v are head slices of one [B, S, Hq + 2 Hkv, Dh] tensor: rope and attention read
        # them through their strides (no copies), and the backward writes one d(qkv).
        with _sublayer("rope_attention"):
            o = block_ops.rope_attention(qkv, cos, sin, hq, hkv).reshape(b, s, hq * dh)
        with _sublayer("attn_out"):
            h = (block_ops.linear_residual(o, _as(self.attn_out.weight, o.dtype), x) if self.fuse_residual
                 else x + self.attn_out(o))
        with _sublayer("ffn_norm"):
            n = self.ffn_norm(h)
        with _sublayer("gate_up"):
            g = self.gate_up(n)
        with _sublayer("swiglu"):
            a = block_ops.swiglu(g)
        with _sublayer("down"):
            return (block_ops.linear_residual(a, _as(self.down.weight, a.dtype), h) if self.fuse_residual
                    else h + self.down(a))

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, "
                f"ffn_dim={self.ffn_dim}, rotary_dim={self.rotary_dim}, rope_theta={self.rope_theta}, "
                f"fuse_residual={self.fuse_residual}")


class TransformerLM(torch.nn.Module):
    """A decoder-only language model of ``TransformerBlock``s: token embedding, ``n_layers``
    blocks, a final RMSNorm and a head tied to the embedding (``logits = h E^T`` through
    ``hk.linear``).

    ``forward(tokens, targets=None)``: ``tokens`` int64 [B, S]; returns the logits [B, S, vocab]
    (in the model's dtype), or ``(logits, loss)`` with ``targets`` [B, S] — the mean
    cross-entropy, computed by ``torch.nn.functional.cross_entropy`` on f32 logits (not yet a
    hopperkit kernel). Parameter names match ``hopperkit.reference_model.ReferenceLM``:
    ``embed.weight``, ``blocks.<i>.*``, ``norm.weight``.

    ``dtype`` is the parameters' dtype, ``compute_dtype`` the activations' (default: ``dtype``
    when it is bf16 or f16, else bf16). ``dtype=torch.float32`` keeps f32 master weights: every
    forward casts them to ``compute_dtype`` and their gradients come back in f32, ready for an
    optimizer stepping in f32.
    """

    def __init__(self, vocab: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
                 ffn_dim: int | None = None, *, head_dim: int | None = None, rotary_dim: int | None = None,
                 rope_theta: float = 10000.0, eps: float = 1e-6, fuse_residual: bool = True, device=None,
                 dtype=torch.bfloat16, compute_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.vocab = vocab
        if compute_dtype is None:
            compute_dtype = dtype if dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        if compute_dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"hk.nn.TransformerLM: compute_dtype must be torch.bfloat16 or torch.float16 (the "
                            f"kernels' operands), got {compute_dtype}")
        self.compute_dtype = compute_dtype
        self.embed = torch.nn.Embedding(vocab, dim, device=device, dtype=dtype)
        self.blocks = torch.nn.ModuleList(
            TransformerBlock(dim, n_heads, n_kv_heads, ffn_dim, head_dim=head_dim, rotary_dim=rotary_dim,
                             rope_theta=rope_theta, eps=eps, fuse_residual=fuse_residual, device=device,
                             dtype=dtype)
            for _ in range(n_layers))
        self.norm = RMSNorm(dim, eps=eps, device=device, dtype=dtype)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None):
        h = _as(self.embed(tokens), self.compute_dtype)
        cos, sin = self.blocks[0].rope_tables(tokens.shape[1], tokens.device) if len(self.blocks) else (None, None)
        for block in self.blocks:
            h = block(h, cos, sin)
        logits = ops.linear(self.norm(h), _as(self.embed.weight, self.compute_dtype))
        if targets is None:
            return logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, self.vocab), targets.reshape(-1))
        return logits, loss
