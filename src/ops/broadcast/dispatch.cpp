// broadcast/dispatch.cpp — which rung serves a public call of the four broadcast families
// (hk::add_scalar, hk::outer_add, hk::outer_mul_relu, hk::row_scale_relu and their hk.* ops).
//
// One rung per family serves every call (row_scale_relu's forward: v04_flat_vectors first where
// it can run; below). Those rungs run any alignment: operands or row strides
// that are not 16-byte aligned take their peeled kernels (each row of the output peeled to its
// first 16-byte boundary, 16-byte stores; inputs at another phase read with the widest loads
// their phase allows). Measured on the H200, 2026-11-29 (docs/broadcast.md), % of copy
// bandwidth, bf16 / f32, aligned operands, before the default cache policy, add_scalar's one-shot
// blocks and the outer ops' flat kernel (docs/decisions.md, memory-bound ops):
//
//   family            rung                  16384x8192            4x2^26
//   add_scalar        v02_vectorized        92.6 / 92.0           92.7 / 91.8
//   outer_add         v02_vectorized        94.9 / 99.4           89.9 / 90.3
//   outer_mul_relu    v02_vectorized        94.5 / 99.5           89.9 / 90.4
//   row_scale_relu    v03_oneshot_chunks    fwd 91.9 / 91.2,      fwd 92.2 / 91.0,
//                                           bwd 92.4 / 95.9       bwd 93.9 / 96.7
//   row_scale_relu    v04_flat_vectors      fwd 99.4 / 100.6      fwd 100.4 / 101.1
//     (forward, aligned rows of whole vectors; 2026-12-04, default policy: v03's forward 97.3 / 96.8
//     and 97.7 / 96.5 in that run)
//
// Re-measured with the current kernels (H200, 2026-12-03, f0a9960): the quick suite at 16384x8192
// bf16, % of copy: add_scalar 100.0, outer_add 102.5, outer_mul_relu 101.6, row_scale_relu fwd
// 96.6 (docs/results/bench-quick.json). From Python against the best of eager torch and
// torch.compile in one process (docs/results/bench-torch-quick.json), bf16 / f32: add_scalar
// 0.99x / 1.00x, outer_add 1.34x / 1.00x, outer_mul_relu 1.36x / 1.00x, row_scale_relu 0.98x /
// 0.96x (backward 1.19x).
//
// row_scale_relu's forward on v04_flat_vectors (H200, 2026-12-04, `hk bench row_scale_relu
// --quick --budget-ms 400 --variant 'public,v03*,v04*' --shape 16384x8192 --shape 4x67108864
// --dtype bf16,f32`): the rows as one flat array of 16-byte vectors in one-shot 128 x 2 blocks
// (the elementwise rungs' shape), 128.0 / 252.7 us at 16384x8192 (bf16 / f32) against v03's
// 130.8 / 262.7, 253.4 / 503.4 us at 4x2^26 against 260.3 / 527.1; from Python 1.00x / 1.00x
// torch.compile at 16384x8192, 0.99x / 1.00x at 4x2^26 (v03: 0.97x / 0.96x and 0.96x / 0.95x).
// Unaligned rows and rows that are not whole vectors stay on v03, as does the backward.
//
// The outer ops' flat kernel reads x once per row of z, so it runs only while x stays in L2 (8
// MiB at most, bcast::flat_outer_fits); a longer x takes the chunk-major items: at 4x2^26, 176.5 /
// 352.2 us (bf16 / f32, 89.2% / 89.4% of copy) against the flat kernel's 251 / 504 from Python
// (H200, 2026-12-04, docs/results/bench-broadcast-long-x.json).
//
// The peeled kernels are not yet measured. Ladder-only: the v01_naive rungs (one thread per
// element, scalar access: 15-50% of copy at 16384x8192 unaligned) and row_scale_relu's
// v02_vectorized (v03 matches or beats it everywhere; its backward at 4x2^26 measured 3.7% /
// 4.5% of copy, one block per row, against v03's 93.9% / 96.7%).
#include "broadcast/broadcast_op.hpp"

namespace hk {
namespace {

std::vector<Route> add_scalar_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "16-byte accesses, one-shot 128-thread blocks: 100.0% of copy at 16384x8192 bf16, "
                             "level with torch's x + c from Python in bf16 and f32 (H200, 2026-12-03); any alignment "
                             "(peeled)"}};
}

std::vector<Route> outer_add_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "a contiguous output from flat one-shot blocks, else x's chunk in registers written to 4 "
                             "rows; 16-byte stores: 102.5% of copy at 16384x8192 bf16 (H200, 2026-12-03), 1.34x / "
                             "1.00x torch.compile from Python (bf16 / f32); any alignment (peeled)"}};
}

std::vector<Route> outer_mul_relu_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "a contiguous output from flat one-shot blocks, else x's chunk in registers written to 4 "
                             "rows; 16-byte stores: 101.6% of copy at 16384x8192 bf16 (H200, 2026-12-03), 1.36x / "
                             "1.00x torch.compile from Python (bf16 / f32); any alignment (peeled)"}};
}

std::vector<Route> row_scale_relu_dispatch(const BroadcastProblem& p) {
  const Route v03{"v03_oneshot_chunks",
           p.backward ? "a block per (row, chunk), long rows split: 92.4% / 95.9% of copy at 16384x8192, 93.9% / 96.7% "
                        "at 4x2^26 (bf16 / f32, aligned; H200, 2026-11-29); any alignment (peeled)"
                      : "a block per (row, chunk), 8 loads in flight: 91.9% / 91.2% of copy at 16384x8192, 92.2% / "
                        "91.0% at 4x2^26 (bf16 / f32, aligned; H200, 2026-11-29); any alignment (peeled)"};
  if (p.backward) return {v03};
  // v04_flat_vectors declines what it cannot run (unaligned rows, a partial last vector): v03 then.
  return {{"v04_flat_vectors", "the rows as one flat array of 16-byte vectors, one-shot 128 x 2 blocks: 99.4% / "
                               "100.6% of copy at 16384x8192, 100.4% / 101.1% at 4x2^26 (bf16 / f32, aligned; "
                               "H200, 2026-12-04), 0.99-1.00x torch.compile from Python"},
          v03};
}

}  // namespace

HK_REGISTER_DISPATCH(BroadcastProblem, "add_scalar", add_scalar_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "outer_add", outer_add_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "outer_mul_relu", outer_mul_relu_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "row_scale_relu", row_scale_relu_dispatch);

}  // namespace hk
