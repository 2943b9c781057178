"""``kernel_op``: one declaration per public op gives its torch custom op and its NumPy path.

A declaration is a function whose annotated signature is the op's schema and whose body
allocates the outputs (shapes and dtypes only)::

    @kernel_op("gelu")
    def _gelu(x: Tensor, approximate: str = "none") -> Tensor:
        return new_like(x)

From it ``kernel_op`` builds:

* ``torch.ops.hopperkit.<name>``, a ``torch.library.custom_op`` whose schema is read from the
  annotations. The real kernel allocates the outputs with the declaration, then runs the family's
  default dispatch on the current stream of the inputs' device (CUDA) or the fp64 reference
  (CPU tensors). The declaration itself is the fake (meta) implementation, so ``torch.compile``
  and ``torch.export`` see the same shapes the kernel produces.
* the NumPy path: NumPy inputs run the family's fp64 reference and come back in the declared
  output dtypes.

Tensor parameters (annotated ``Tensor`` or ``Tensor | None``) become the C++ inputs in signature
order, a ``None`` one left out; every other parameter (``str``, ``float``, ``int``, ``bool``, or
one of those ``| None``) becomes a keyword attribute of ``Family::make_problem`` under its own
name, left out when None, plus the fixed ``attrs`` given to ``kernel_op``. Tensor inputs whose
layout the kernels cannot take are copied first (``layout``); an empty input with a non-empty
output (a sum over no elements) takes the outputs from the reference instead of a launch.
The returned callable takes every argument positionally (public wrappers pass them all), which
keeps it trivial for ``torch.compile`` to trace. docs/python.md shows how to add an op.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from . import _C, _core
from ._core import launch, numpy_dtype, torch, torch_dtype

#: Annotation (as written in a declaration) -> torch schema type.
_SCHEMA_TYPES = {
    "Tensor": "Tensor",
    "Tensor | None": "Tensor?",
    "str": "str",
    "str | None": "str?",
    "float": "float",
    "float | None": "float?",
    "int": "SymInt",
    "int | None": "SymInt?",
    "bool": "bool",
    "bool | None": "bool?",
}


def new_like(x: Any, shape: Any = None, dtype: str | None = None) -> Any:
    """An uninitialized, contiguous output for a declaration: ``x``'s shape, dtype and device
    unless ``shape`` or ``dtype`` (a hopperkit name: "f32", "bf16", ...) say otherwise.
    Works for torch tensors (real or fake) and NumPy arrays alike."""
    if isinstance(x, np.ndarray):
        shape = x.shape if shape is None else tuple(shape)
        return np.empty(shape, dtype=x.dtype if dtype is None else numpy_dtype(dtype))
    if shape is None:
        # An output of the input's shape: torch.empty_like parses its arguments faster than
        # torch.empty(shape, dtype=, device=) does (about 1.7 us against 2.4 us per call on a
        # CPU host).
        return torch.empty_like(x, dtype=None if dtype is None else torch_dtype(dtype),
                                memory_format=torch.contiguous_format)
    return torch.empty(tuple(shape), dtype=x.dtype if dtype is None else torch_dtype(dtype), device=x.device)


def _default_text(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"kernel_op: default {value!r} cannot appear in a torch schema")


def schema_of(declare: Callable) -> str:
    """The torch schema string of a declaration, e.g. "(Tensor x, str approximate='none') -> Tensor"."""
    sig = inspect.signature(declare)
    args = []
    for p in sig.parameters.values():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"kernel_op {declare.__name__}: parameter {p.name} must be positional")
        if p.annotation not in _SCHEMA_TYPES:
            raise TypeError(f"kernel_op {declare.__name__}: parameter {p.name} is annotated "
                            f"{p.annotation!r}; use one of {', '.join(_SCHEMA_TYPES)}")
        arg = f"{_SCHEMA_TYPES[p.annotation]} {p.name}"
        if p.default is not p.empty:
            arg += "=" + _default_text(p.default)
        args.append(arg)
    ret = sig.return_annotation
    if ret == "Tensor":
        returns = "Tensor"
    elif isinstance(ret, str) and ret.startswith("tuple[") and ret.endswith("]"):
        parts = [r.strip() for r in ret[len("tuple["):-1].split(",")]
        if not parts or any(r != "Tensor" for r in parts):
            raise TypeError(f"kernel_op {declare.__name__}: returns must be Tensor or tuple[Tensor, ...]")
        returns = "(" + ", ".join(parts) + ")"
    else:
        raise TypeError(f"kernel_op {declare.__name__}: return annotation {ret!r}; use Tensor or "
                        "tuple[Tensor, ...] (with `from __future__ import annotations`)")
    return "(" + ", ".join(args) + ") -> " + returns


def _flat(outputs: Any) -> list:
    return list(outputs) if isinstance(outputs, tuple) else [outputs]


def rows_layout_ok(t: Any) -> bool:
    """Whether the row-wise kernels take torch tensor ``t`` as it is: its last dim contiguous and
    its leading dims collapsing into one row stride at least the row length (a batch of padded
    rows), as rows::layout and rows::check_matrix in src/common/rows.hpp accept. Vectors must be
    contiguous."""
    if t.numel() == 0 or t.dim() == 0:
        return True
    if t.is_contiguous() and t.stride(-1) == 1:
        # The common case, decided by torch's cached flag: a contiguous tensor's leading dims
        # collapse into rows of exactly the row length (torch ignores the stride of a size-1
        # dim, hence the check of the last one, which the kernels read with stride 1).
        return True
    return rows_strides_ok(t)


def rows_strides_ok(t: Any) -> bool:
    """``rows_layout_ok`` from the strides alone (no contiguity shortcut)."""
    if t.numel() == 0 or t.dim() == 0:
        return True
    shape, strides = t.shape, t.stride()
    if strides[-1] != 1:
        return False
    ld, expect = shape[-1], None
    for d in range(t.dim() - 2, -1, -1):
        if shape[d] == 1:
            continue
        if expect is None:
            ld, expect = strides[d], strides[d] * shape[d]
        elif strides[d] != expect:
            return False
        else:
            expect *= shape[d]
    return expect is None or ld >= shape[-1]


def matrix_layout_ok(t: Any) -> bool:
    """Whether the GEMM kernels take torch tensor ``t`` as it is, as src/ops/gemm/reference.cpp's
    check_matrix accepts: a matrix ``[rows, cols]`` or a batch ``[batch, rows, cols]`` (any batch
    stride, 0 included) with a unit stride along its last dim (row-major) or its second-to-last
    (column-major, e.g. a transposed view) and a leading stride at least the extent it steps
    over. Vectors (the bias) must be contiguous; other ranks pass to C++, which names the error."""
    if t.numel() == 0 or t.dim() not in (1, 2, 3):
        return True
    if t.is_contiguous() and t.stride(-1) == 1:
        return True  # row-major with packed rows (the common case; see rows_layout_ok)
    return matrix_strides_ok(t)


def matrix_strides_ok(t: Any) -> bool:
    """``matrix_layout_ok`` from the strides alone (no contiguity shortcut)."""
    if t.numel() == 0 or t.dim() not in (1, 2, 3):
        return True
    if t.dim() == 1:
        return t.shape[0] == 1 or t.stride(0) == 1
    rows, cols = t.shape[-2], t.shape[-1]
    row_stride, col_stride = t.stride(-2), t.stride(-1)
    if col_stride == 1 or cols == 1:  # row-major: C++ decides so first, as here
        return rows == 1 or row_stride >= cols
    if row_stride == 1 or rows == 1:  # column-major
        return cols == 1 or col_stride >= rows
    return False


#: kernel_op(layout=...) -> which torch tensor inputs pass to C++ as they are (others are copied).
_LAYOUTS = {
    # The method itself where torch is present: no Python frame per call.
    "contiguous": torch.Tensor.is_contiguous if torch is not None else (lambda t: t.is_contiguous()),
    "rows": rows_layout_ok,
    "matrix": matrix_layout_ok,
}


def kernel_op(family: str, *, name: str | None = None, attrs: dict | None = None,
              layout: str = "contiguous") -> Callable[[Callable], Callable]:
    """Declares ``hopperkit::<name>`` running ``family``'s default variant (see module doc).

    ``name``: the op name (default: the declaration's name without leading underscores).
    ``attrs``: fixed attributes added to the parameters' (gelu_backward: {"backward": True}).
    ``layout``: what the family's kernels take; torch tensor inputs outside it are copied to
    contiguous first. "contiguous" (flat kernels), "rows" (row-wise families, whose
    make_problem takes padded rows: see ``rows_layout_ok``) or "matrix" (gemm: row- or
    column-major matrices with free leading and batch strides, see ``matrix_layout_ok``).
    """
    if layout not in _LAYOUTS:
        raise ValueError(f"kernel_op: layout {layout!r}; use one of {', '.join(_LAYOUTS)}")
    takes_as_is = _LAYOUTS[layout]

    def wrap(declare: Callable) -> Callable:
        op_name = name or declare.__name__.lstrip("_")
        sig = inspect.signature(declare)
        schema = schema_of(declare)  # validates the annotations even without torch
        params = list(sig.parameters.values())
        is_tensor = [p.annotation in ("Tensor", "Tensor | None") for p in params]
        fixed = dict(attrs or {})

        n_params = len(params)
        defaults = tuple(p.default for p in params)
        # Positional parameters with defaults trail the ones without (Python's rule): a call that
        # passes at least the required ones positionally needs only the trailing defaults.
        positional = all(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
        n_required = sum(d is inspect.Parameter.empty for d in defaults) if positional else n_params

        # Where the inputs and the attributes sit among the parameters, read once here rather than
        # zipped per call.
        tensor_at = tuple(i for i, t in enumerate(is_tensor) if t)
        optional_tensors = any(p.annotation == "Tensor | None" for p in params)
        attr_at = tuple((i, p.name) for i, (p, t) in enumerate(zip(params, is_tensor)) if not t)

        def values_of(args: tuple) -> tuple:
            # Every parameter's value in order, defaults filled in. The common calls pass them
            # positionally: all of them (call() does) or all but the trailing ones left at their
            # defaults (torch's dispatcher drops those). No inspect.Signature.bind for either,
            # which cost a fifth of the op's host time.
            n = len(args)
            if n == n_params:
                return args
            if n_required <= n < n_params:
                return args + defaults[n:]
            bound = sig.bind(*args)  # raises the TypeError a wrong call deserves
            bound.apply_defaults()
            return tuple(bound.arguments.values())

        def split(args: tuple) -> tuple[list, dict]:
            values = values_of(args)
            if optional_tensors:
                tensors = [values[i] for i in tensor_at if values[i] is not None]
            else:
                tensors = [values[i] for i in tensor_at]
            # An attribute given as None is absent: the family's make_problem default applies.
            attr_values = {name: values[i] for i, name in attr_at if values[i] is not None}
            if fixed:
                attr_values.update(fixed)
            return tensors, attr_values

        def numpy_path(args: tuple) -> Any:
            tensors, attr_values = split(args)
            bad = [type(t).__name__ for t in tensors if not isinstance(t, np.ndarray)]
            if bad:
                raise TypeError(f"hk.{op_name}: NumPy arrays and {', '.join(bad)} mixed; pass one kind")
            # (np.ascontiguousarray would turn a 0-d array into 1-d: copy only what needs it.)
            tensors = [t if t.flags.c_contiguous else np.ascontiguousarray(t) for t in tensors]
            refs = _C.reference(family, tensors, attr_values)
            outputs = declare(*args)
            results = [ref.astype(out.dtype) for ref, out in zip(refs, _flat(outputs))]
            return tuple(results) if isinstance(outputs, tuple) else results[0]

        overload = None
        if torch is not None:

            def kernel(*args: Any, **kwargs: Any) -> Any:
                if kwargs:
                    args = tuple(sig.bind(*args, **kwargs).args)
                outputs = declare(*args)
                flat = outputs if isinstance(outputs, tuple) else (outputs,)
                tensors, attr_values = split(args)
                # The common case in one pass over the inputs, straight to the bindings: every
                # input a CUDA tensor on one device, in a layout the kernels take, none empty.
                # Anything else takes the general path below (copies, the device error, the
                # reference). get_device() is an int; t.device builds a torch.device per call,
                # and reading its .type costs another 0.6 us or so.
                index = tensors[0].get_device() if tensors and tensors[0].is_cuda else -1
                if index >= 0:
                    for i, t in enumerate(tensors):
                        if not (t.is_cuda and t.get_device() == index and takes_as_is(t)) or t.numel() == 0:
                            break
                        if t.requires_grad:
                            tensors[i] = t.detach()  # DLPack refuses tensors that require grad
                    else:
                        # The outputs are the declaration's fresh new_like tensors: none requires
                        # grad. The bindings make the device current for the launch.
                        _C.launch(family, "", tensors, flat, attr_values, _core._raw_stream(index))
                        return outputs
                tensors = [t if takes_as_is(t) else t.contiguous() for t in tensors]
                for i, t in enumerate(tensors):
                    if t.device != tensors[0].device:
                        # Never move data behind the caller's back (torch ops refuse this too).
                        raise ValueError(f"hk.{op_name}: operands on different devices: input {i} is on "
                                         f"{t.device} but input 0 is on {tensors[0].device}; "
                                         "move them to one device")
                on_host = bool(tensors) and tensors[0].device.type == "cpu"
                # An empty input with a non-empty output (a row sum over zero columns, rmsnorm's
                # dg over zero rows) is a case the C++ ops answer without a kernel; here the
                # reference answers it, on a few elements at most.
                degenerate = any(t.numel() == 0 for t in tensors) and any(o.numel() > 0 for o in flat)
                if on_host or degenerate:
                    # CPU tensors run the fp64 reference (slow, exact): the op works everywhere.
                    refs = _C.reference(family, [t.detach().cpu() for t in tensors], attr_values)
                    for out, ref in zip(flat, refs):
                        out.copy_(torch.from_numpy(ref))
                else:
                    launch(family, "", tensors, flat, attr_values)
                return outputs

            custom = torch.library.custom_op(f"hopperkit::{op_name}", kernel, mutates_args=(),
                                             schema=schema)
            custom.register_fake(declare)
            overload = getattr(torch.ops.hopperkit, op_name).default

        def call(*args: Any) -> Any:
            # Plain loops and isinstance on torch.Tensor first: what torch.compile traces.
            if overload is not None:
                for a in args:
                    if isinstance(a, torch.Tensor):
                        return overload(*args)
            for a in args:
                if isinstance(a, np.ndarray):
                    return numpy_path(args)
            takes = "torch tensors or NumPy arrays" if overload is not None else "NumPy arrays (no torch)"
            raise TypeError(f"hk.{op_name}: takes {takes}, got "
                            + ", ".join(type(a).__name__ for a in args))

        def register_autograd(backward: Callable, setup_context: Callable) -> None:
            """torch's register_autograd for this op (nothing to do without torch)."""
            if torch is not None:
                custom.register_autograd(backward, setup_context=setup_context)

        call.__name__ = op_name
        call.__doc__ = f"hopperkit::{op_name}{schema} (family {family})"
        call.schema = schema
        call.family = family
        call.op = overload  # torch.ops.hopperkit.<name>.default, for opcheck; None without torch
        call.register_autograd = register_autograd
        return call

    return wrap
