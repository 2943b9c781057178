"""Plain-PyTorch twins of ``hk.nn.TransformerBlock`` and ``hk.nn.TransformerLM``: the same
computation from ``torch.nn`` ops only (``F.rms_norm``, ``F.linear``,
``F.scaled_dot_product_attention``, ``F.silu``), with the same parameter names, so one state
dict loads into both. ``attention="naive"`` materialises the scores instead of calling SDPA (the
benchmarking lecture's starting point). The tests compare forward outputs and gradients of the two; the block
benchmark (``python -m hopperkit.block_bench``) times them side by side, eager and compiled.

RoPE uses the same f32 [S, R/2] tables (``rope_tables``, identical to ``hk.rope_tables``) in
Hugging Face's ``rotate_half`` form.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .nn import _block_dims


def rope_tables(seq_len: int, rotary_dim: int, theta: float = 10000.0, device=None) -> tuple:
    """cos, sin: f32 [seq_len, rotary_dim // 2], angles computed in f64 (as hk.rope_tables)."""
    half = rotary_dim // 2
    pos = torch.arange(seq_len, dtype=torch.float64, device=device)
    inv = torch.exp(torch.arange(half, dtype=torch.float64, device=device) * (-2.0 * math.log(theta) / rotary_dim))
    ang = pos[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """rotate_half RoPE on x [B, S, H, D] with [S, R/2] tables, in f32, rounded to x's dtype."""
    half = cos.shape[-1]
    r = 2 * half
    xf = x.float()
    x1, x2, rest = xf[..., :half], xf[..., half:r], xf[..., r:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1).to(x.dtype)


def naive_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention as the benchmarking lecture's model starts: the [B, H, S, S] scores materialised
    (q k^T in q's dtype), the causal mask filled with -inf, softmax in f32, then P v."""
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    s = q.shape[-2]
    mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    p = torch.softmax(scores.float().masked_fill(mask, float("-inf")), dim=-1).to(q.dtype)
    return p @ v


class RMSNormRef(torch.nn.Module):
    def __init__(self, dim: int, eps: float, device=None, dtype=None) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class LinearRef(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int, device=None, dtype=None) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class ReferenceBlock(torch.nn.Module):
    """``hk.nn.TransformerBlock`` in plain PyTorch (same arguments, parameters and forward)."""

    def __init__(self, dim: int, n_heads: int, n_kv_heads: int | None = None, ffn_dim: int | None = None, *,
                 head_dim: int | None = None, rotary_dim: int | None = None, rope_theta: float = 10000.0,
                 eps: float = 1e-6, attention: str = "sdpa", device=None, dtype=torch.bfloat16) -> None:
        super().__init__()
        if attention not in ("sdpa", "naive"):
            raise ValueError(f"ReferenceBlock: attention must be 'sdpa' or 'naive', got {attention!r}")
        self.attention = attention
        self.n_heads, self.n_kv_heads, self.head_dim, self.ffn_dim = _block_dims(dim, n_heads, n_kv_heads,
                                                                                 ffn_dim, head_dim)
        self.dim = dim
        self.rotary_dim = self.head_dim if rotary_dim is None else rotary_dim
        self.rope_theta = rope_theta
        kw = {"device": device, "dtype": dtype}
        self.attn_norm = RMSNormRef(dim, eps, **kw)
        self.qkv = LinearRef(dim, (self.n_heads + 2 * self.n_kv_heads) * self.head_dim, **kw)
        self.attn_out = LinearRef(self.n_heads * self.head_dim, dim, **kw)
        self.ffn_norm = RMSNormRef(dim, eps, **kw)
        self.gate_up = LinearRef(dim, 2 * self.ffn_dim, **kw)
        self.down = LinearRef(self.ffn_dim, dim, **kw)

    def rope_tables(self, seq_len: int, device=None) -> tuple:
        return rope_tables(seq_len, self.rotary_dim, self.rope_theta, device=device)

    def forward(self, x: torch.Tensor, cos: torch.Tensor | None = None, sin: torch.Tensor | None = None) -> torch.Tensor:
        b, s, _ = x.shape
        if cos is None or sin is None:
            cos, sin = self.rope_tables(s, x.device)
        hq, hkv, dh = self.n_heads, self.n_kv_heads, self.head_dim
        qkv = self.qkv(self.attn_norm(x)).view(b, s, hq + 2 * hkv, dh)
        q = apply_rope(qkv[:, :, :hq], cos, sin).transpose(1, 2)
        k = apply_rope(qkv[:, :, hq:hq + hkv], cos, sin).transpose(1, 2)
        v = qkv[:, :, hq + hkv:].transpose(1, 2)
        if hkv != hq:  # GQA as repeated KV heads (SDPA's enable_gqa needs torch >= 2.5)
            k = k.repeat_interleave(hq // hkv, dim=1)
            v = v.repeat_interleave(hq // hkv, dim=1)
        if self.attention == "naive":
            o = naive_causal_attention(q, k, v).transpose(1, 2)
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        h = x + self.attn_out(o.reshape(b, s, hq * dh))
        gate, up = self.gate_up(self.ffn_norm(h)).chunk(2, dim=-1)
        return h + self.down(F.silu(gate) * up)


class ReferenceLM(torch.nn.Module):
    """``hk.nn.TransformerLM`` in plain PyTorch (same arguments, parameters and forward)."""

    def __init__(self, vocab: int, dim: int, n_layers: int, n_heads: int, n_kv_heads: int | None = None,
                 ffn_dim: int | None = None, *, head_dim: int | None = None, rotary_dim: int | None = None,
                 rope_theta: float = 10000.0, eps: float = 1e-6, attention: str = "sdpa", device=None,
                 dtype=torch.bfloat16) -> None:
        super().__init__()
        self.vocab = vocab
        self.embed = torch.nn.Embedding(vocab, dim, device=device, dtype=dtype)
        self.blocks = torch.nn.ModuleList(
            ReferenceBlock(dim, n_heads, n_kv_heads, ffn_dim, head_dim=head_dim, rotary_dim=rotary_dim,
                           rope_theta=rope_theta, eps=eps, attention=attention, device=device, dtype=dtype)
            for _ in range(n_layers))
        self.norm = RMSNormRef(dim, eps, device=device, dtype=dtype)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor | None = None):
        h = self.embed(tokens)
        cos, sin = self.blocks[0].rope_tables(tokens.shape[1], tokens.device) if len(self.blocks) else (None, None)
        for block in self.blocks:
            h = block(h, cos, sin)
        logits = F.linear(self.norm(h), self.embed.weight)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.float().reshape(-1, self.vocab), targets.reshape(-1))
        return logits, loss
