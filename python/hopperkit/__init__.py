"""hopperkit: Hopper (sm_90a) deep-learning kernels, each a ladder of registered variants.

* Ops: ``hk.gelu``, ``hk.softmax``, ``hk.rms_norm``, ``hk.row_sum``, ``hk.weighted_sum``,
  ``hk.add_scalar``, ``hk.outer_add``, ``hk.outer_mul_relu``, ``hk.row_scale_relu``,
  ``hk.matmul``, ``hk.linear`` (and ``hk.nn.GELU``, ``hk.nn.RMSNorm``, ``hk.nn.Linear``) as
  PyTorch custom ops with autograd, ``torch.compile`` and ``torch.export`` support; NumPy arrays run the fp64 CPU reference instead.
* Registry: ``hk.families()``, ``hk.variants(family)``, ``hk.explain(family, *tensors, **attrs)``
  (which kernel the public op runs, and why), ``hk.run(family, variant, *tensors,
  **attrs)`` for one rung, ``hk.reference(...)`` for the fp64 oracle, ``hk.bench(...)`` for the
  ``hk bench`` JSON record.
* Plots: ``python -m hopperkit.plot results.json -o DIR``.

Errors from C++ arrive as ValueError / TypeError / NotImplementedError / RuntimeError with the
C++ message. The package imports without torch (registry + NumPy path).
"""

try:
    # torch first, as for any torch extension: its CUDA libraries (cudart, cuBLAS, CUPTI from its
    # wheels) are then the ones in the process and ours bind to them by soname. Loaded the other
    # way round, torch ran on the toolkit's older copies and the process aborted at exit
    # ("free(): invalid pointer") on the GPU box.
    import torch as _torch_first  # noqa: F401
except ImportError:
    pass
from ._C import __version__, git_sha
from ._core import VariantInfo, bench, explain, families, problem, reference, run, supports, variants
from ._core import torch as _torch
from ._op import kernel_op, new_like
from .attention import attention, attention_fp8, attention_varlen, scaled_dot_product_attention
from .block_ops import (linear_residual, rope, rope_attention, rope_backward, rope_tables, swiglu,
                        swiglu_backward)
from .conv import conv2d, conv2d_single_channel
from .fp8 import matmul_fp8, quantize_fp8
from .ops import (add_scalar, gelu, gelu_backward, linear, matmul, outer_add, outer_mul_relu, rms_norm,
                  row_scale_relu, row_sum, softmax, weighted_sum)
from .w4a16 import (int4_matmul, matmul_w4a16, quantize_int4, w4a16_from_awq, w4a16_from_gptq, w4a16_pack,
                    w4a16_pack_zeros, w4a16_quantize, w4a16_repack, w4a16_unpack, w4a16_unpack_zeros, w4a16_unrepack)

if _torch is not None:
    from . import nn

__all__ = [
    "VariantInfo", "__version__", "add_scalar", "attention", "attention_fp8", "attention_varlen", "bench", "conv2d",
    "conv2d_single_channel", "explain", "families", "gelu",
    "gelu_backward", "git_sha", "kernel_op", "linear", "linear_residual", "matmul", "new_like", "outer_add", "outer_mul_relu",
    "problem", "reference", "rms_norm", "rope", "rope_attention", "rope_backward", "rope_tables", "row_scale_relu", "row_sum", "run",
    "scaled_dot_product_attention", "softmax", "supports", "swiglu", "swiglu_backward", "variants",
    "weighted_sum", "matmul_fp8", "quantize_fp8", "matmul_w4a16", "w4a16_from_awq", "w4a16_from_gptq", "w4a16_pack",
    "w4a16_pack_zeros", "w4a16_quantize", "w4a16_repack", "w4a16_unpack", "w4a16_unpack_zeros", "w4a16_unrepack",
    "quantize_int4", "int4_matmul",
]
