#!/usr/bin/env python3
"""One call each of hopperkit's public row reductions and of torch.compile's kernel for the same
expression (row_sum, weighted_sum, rms_norm; 16384x8192 bf16), inside a profiler range, for
Nsight Compute to compare kernel against kernel:

  ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
      --section LaunchStats --profile-from-start off python3 scripts/ncu-row-reductions.py

Each op runs twice before the range (compilation, module load); ncu flushes the caches before
every kernel it profiles, so each starts from a cold L2.
"""
import torch
import torch.nn.functional as F

import hopperkit as hk

x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
c_sum = torch.compile(lambda x: x.sum(-1))
c_ws = torch.compile(lambda x, w: x @ w)
c_rms = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6))
ops = [lambda: hk.row_sum(x), lambda: c_sum(x), lambda: hk.weighted_sum(x, w), lambda: c_ws(x, w),
       lambda: hk.rms_norm(x, w, 1e-6), lambda: c_rms(x, w)]
for f in ops:
    f()
    f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for f in ops:
    f()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
