"""hopperkit: Hopper (sm_90a) deep-learning kernels, each a ladder of registered variants.

* Ops: ``hk.gelu`` (and ``hk.nn.GELU``) as PyTorch custom ops with autograd, ``torch.compile``
  and ``torch.export`` support; NumPy arrays run the fp64 CPU reference instead.
* Registry: ``hk.families()``, ``hk.variants(family)``, ``hk.run(family, variant, *tensors,
  **attrs)`` for one rung, ``hk.reference(...)`` for the fp64 oracle, ``hk.bench(...)`` for the
  ``hk bench`` JSON record.
* Plots: ``python -m hopperkit.plot results.json -o DIR``.

Errors from C++ arrive as ValueError / TypeError / NotImplementedError / RuntimeError with the
C++ message. The package imports without torch (registry + NumPy path).
"""

from ._C import __version__, git_sha
from ._core import VariantInfo, bench, families, problem, reference, run, supports, variants
from ._core import torch as _torch
from ._op import kernel_op, new_like
from .ops import gelu, gelu_backward

if _torch is not None:
    from . import nn

__all__ = [
    "VariantInfo", "__version__", "bench", "families", "gelu", "gelu_backward", "git_sha",
    "kernel_op", "new_like", "problem", "reference", "run", "supports", "variants",
]
