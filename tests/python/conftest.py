"""Shared fixtures for the Python tests.

The package under test is whatever `import hopperkit` finds: a CMake build's <build>/python on
PYTHONPATH (scripts/python-check.sh) or a `pip install .`. GPU tests take the `cuda` fixture and
skip with the reason when torch or a CUDA device is missing; torch-only tests take `torch_mod`.
"""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk

try:
    import torch
except ImportError:
    torch = None


def gpu_missing_reason() -> str:
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device (" + (hk._C.no_gpu_reason() or "torch.cuda.is_available() is False") + ")"
    return ""


@pytest.fixture
def torch_mod():
    if torch is None:
        pytest.skip("needs torch: torch is not installed")
    return torch


@pytest.fixture
def cuda():
    reason = gpu_missing_reason()
    if reason:
        pytest.skip("GPU test: " + reason)
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def rng():
    return np.random.default_rng(20240607)
