"""Registry access and the generic entry points: nothing here names a family.

Every family registered in C++ is reachable from here as soon as it implements
``Family::make_problem`` (docs/python.md): ``variants`` lists its rungs, ``run`` calls one rung on
CUDA tensors, ``reference`` runs its fp64 CPU reference on host arrays, ``bench`` runs the
``hk bench`` harness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from . import _C

try:
    import torch
except ImportError:  # the registry and the NumPy path work without torch
    torch = None

#: hopperkit dtype names -> NumPy dtypes (bf16 and the fp8 formats have no NumPy dtype).
NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u8": np.uint8}


#: hopperkit dtype names -> torch dtypes, built once (a declaration reads it on every call).
_TORCH_DTYPES = {} if torch is None else {
    "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
    "i32": torch.int32, "u8": torch.uint8,
}


def torch_dtype(name: str):
    """The torch dtype of a hopperkit dtype name ("f32", "bf16", "e4m3", ...)."""
    dtype = _TORCH_DTYPES.get(name)
    if dtype is None:
        raise NotImplementedError(f"hopperkit dtype {name} has no torch dtype")
    return dtype


def numpy_dtype(name: str):
    """The NumPy dtype of a hopperkit dtype name; TypeError for bf16 / fp8, which NumPy lacks."""
    if name not in NUMPY_DTYPES:
        raise TypeError(f"hopperkit dtype {name} has no NumPy dtype; use torch tensors for it")
    return NUMPY_DTYPES[name]


@dataclass(frozen=True)
class VariantInfo:
    """One registered rung of a family's ladder."""

    family: str
    name: str
    summary: str
    min_sm: int
    flags: tuple[str, ...]  # any of "production", "baseline", "reference"

    @property
    def is_production(self) -> bool:
        """The family's dispatch may run it for a public call; otherwise a ladder-only rung."""
        return "production" in self.flags

    @property
    def is_baseline(self) -> bool:
        return "baseline" in self.flags

    @property
    def is_reference(self) -> bool:
        return "reference" in self.flags


def families() -> dict[str, str]:
    """Registered families, sorted by name: {name: one-line summary}."""
    return dict(_C.families())


def variants(family: str) -> list[VariantInfo]:
    """The rungs of ``family`` sorted by name, with summary, minimum SM and flags.

    ValueError for an unknown family (the message lists the known ones).
    """
    out = []
    for name, summary, min_sm, flags in _C.variants(family):
        names = tuple(n for bit, n in ((_C.FLAG_PRODUCTION, "production"), (_C.FLAG_BASELINE, "baseline"),
                                       (_C.FLAG_REFERENCE, "reference"))
                      if flags & bit)
        out.append(VariantInfo(family, name, summary, min_sm, names))
    return out


def _is_torch(x: Any) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


#: torch.Tensor, or () without torch: ``isinstance(x, _Tensor)`` is then False for anything.
_Tensor = () if torch is None else torch.Tensor

#: torch's current-stream query (device index -> cudaStream_t as an integer), looked up once. A
#: torch built without CUDA has none, and then no CUDA tensor can reach a launch either.
_raw_stream = None if torch is None else getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _metadata_view(x: Any) -> Any:
    # DLPack refuses tensors that require grad; only metadata (and, on launch, the pointer) is
    # read. detach() builds a new tensor through the dispatcher (0.6-1.3 us per call, measured on a
    # CPU host with torch 2.15), so only a tensor that requires grad gets one; the others pass as
    # they are.
    return x.detach() if isinstance(x, _Tensor) and x.requires_grad else x


def _host(x: Any) -> Any:
    if _is_torch(x):
        return x.detach().cpu()
    if isinstance(x, np.ndarray) and any(s < 0 for s in x.strides):
        return np.ascontiguousarray(x)  # DLPack views take non-negative strides only
    return x


def problem(family: str, *tensors: Any, **attrs: Any) -> dict:
    """The problem these inputs and keyword attributes pose, as the C++ family builds it.

    Returns a dict: family, key (as in test names and bench rows), flops, bytes, attrs, inputs and
    outputs (name, dtype, shape, strides), tolerances ((atol, rtol) per output). Validates like the
    public op: TypeError / ValueError / NotImplementedError with the C++ message.
    """
    return _C.problem(family, [_metadata_view(t) for t in tensors], attrs)


def supports(family: str, variant: str, *tensors: Any, **attrs: Any) -> str:
    """"" when ``variant`` can run the problem on the current device, else the reason."""
    return _C.supports(family, variant, [_metadata_view(t) for t in tensors], attrs)


def explain(family: str, *tensors: Any, **attrs: Any) -> str:
    """Which kernel the public op runs for these inputs and attributes, and why.

    The family's dispatch in words: the chosen variant with its reason, then every production
    route it passed over with that route's ``supports()`` reason. Only metadata is read, so host
    arrays describe a problem as well as CUDA tensors do.
    """
    return _C.explain(family, [_metadata_view(t) for t in tensors], attrs)


def launch(family: str, variant: str, inputs: list, outputs: list, attrs: dict) -> str:
    """Runs ``variant`` ("" = the public op's dispatch) writing ``outputs``; returns its name.

    On the current torch stream of the inputs' device, under a device guard: work queued earlier
    on that stream (including on a side stream made current with ``torch.cuda.stream``) is
    ordered before the kernel. Asynchronous, like any CUDA op.
    """
    inputs = [_metadata_view(t) for t in inputs]
    outputs = [_metadata_view(t) for t in outputs]
    first = inputs[0] if inputs else None
    if not (isinstance(first, _Tensor) and first.is_cuda):
        # The C++ side raises the ValueError naming the device of the offending operand.
        return _C.launch(family, variant, inputs, outputs, attrs, 0)
    # The bindings make the operands' device current for the launch (and restore the caller's).
    # get_device() is the index as an int; t.device builds a torch.device object per call.
    return _C.launch(family, variant, inputs, outputs, attrs, _raw_stream(first.get_device()))


def current_stream(device: Any) -> int:
    """The current torch stream of the CUDA ``device`` as the integer the bindings take (a
    cudaStream_t). Read with torch's raw-stream query, as compiled torch code does: building a
    ``torch.cuda.Stream`` object and entering a device context cost microseconds per call."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _raw_stream(index)


def run(family: str, variant: str, *tensors: Any, **attrs: Any):
    """Runs one registered rung on torch CUDA tensors and returns its output(s).

    ``tensors`` are the family's inputs in its contract order, ``attrs`` its keyword attributes
    (``hk.run("gelu", "v02_fused", x, approximate="none")``). Outputs are allocated as the
    problem's output specs say, on the inputs' device; the kernel runs on the current stream.
    NotImplementedError when the rung does not support the problem (the message says why).
    """
    if torch is None:
        raise ImportError("hk.run needs torch (CUDA tensors); hk.reference runs NumPy arrays")
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"hk.run({family}): input {i} is {type(t).__name__}, expected a torch "
                            "CUDA tensor (NumPy arrays run the reference: hk.reference)")
    desc = problem(family, *tensors, **attrs)
    device = tensors[0].device if tensors else torch.device("cuda")
    outs = [torch.empty_strided(o["shape"], o["strides"], dtype=torch_dtype(o["dtype"]), device=device)
            for o in desc["outputs"]]
    launch(family, variant, list(tensors), outs, attrs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def reference(family: str, *arrays: Any, **attrs: Any):
    """The family's fp64 CPU reference on host arrays: float64 NumPy array(s), unrounded.

    Takes NumPy arrays (f32, f16, i32, u8), torch tensors of any dtype and device (copied to the
    host) or any DLPack host array; the same keyword attributes as ``run``.
    """
    outs = _C.reference(family, [_host(a) for a in arrays], attrs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _shape_text(shape: Any) -> str:
    return shape if isinstance(shape, str) else "x".join(str(int(d)) for d in shape)


def bench(family: str | Iterable[str] | None = None, *, variant: str | None = None,
          shapes: Iterable[Any] = (), dtypes: Iterable[str] = (), warm: bool = False,
          quick: bool | None = None, budget_ms: float = 1500.0, spin_us: float = 300.0,
          progress: bool = False) -> dict:
    """Runs the ``hk bench`` harness and returns its JSON record (the document ``--json`` writes).

    ``family=None`` is the quick suite (every family's default variant vs its baseline), as
    ``hk bench`` with no family; ``variant`` is a glob; ``shapes`` are "16384x8192" strings or
    tuples; ``dtypes`` names like "bf16". Every row is verified against the fp64 reference before
    it is timed; ``spin_us`` of GPU spin before each sample keeps the host's launch work out of
    it (0: none). RuntimeError without a GPU; ValueError for an unknown family.
    """
    if family is None:
        names = []
    elif isinstance(family, str):
        names = [family]
    else:
        names = list(family)
    if quick is None:
        quick = family is None
    doc = _C.bench(names, variant or "", [_shape_text(s) for s in shapes], list(dtypes),
                   bool(warm), bool(quick), float(budget_ms), float(spin_us), bool(progress))
    return json.loads(doc)
