// softmax/v07_oneshot_apply.cu
//
// Rung 7: v06's split rows with the apply pass run as the elementwise maps run: one short-lived
// block per 128 x 2 16-byte vectors of a row, not two waves of resident blocks each walking ~1/S
// of a row.
// Adds over v06: the apply pass (y = exp(x - max) / sum forward, dx = y (dy - dot) backward) is
// an elementwise map once the row statistics are known, and v06 runs it as a resident
// grid-stride loop (4 vectors per operand in flight per thread, loads, then stores, then loads):
// the loop shape that docs/decisions.md measured at 0.94-0.96x torch for x + 1 where one-shot
// 128 x 2 blocks ran 0.99-1.00x. From Python v06's backward at 4x2^26 ran 0.87x / 0.93x
// torch.compile (f32 / bf16: 1415 / 688 us against 1236 / 641, docs/results/bench-torch.json),
// whose apply is a flat Triton kernel over the same bytes (y and dy read twice, dx written once).
// The partial and finalize kernels are v06's, unchanged, and so is the item order (the apply
// walks the chunks in the reverse of the partial kernel's order, so the last ones read are
// still in L2): this rung calls v06's launcher with another apply grid (softmax/split_row_grid.hpp),
// so the kernels are compiled once.
// Measured (hk bench, H200, 2026-12-04, 4x2^26; `hk bench softmax --budget-ms 400 --variant
// 'public,v06*,v07*' --shape 4x67108864 --dtype bf16,f32`), bf16 / f32: forward 385.0 / 748.2 us
// (66.1% / 68.0% of copy) against v06's 408.8 / 801.0 (62.2% / 63.5%); backward 619.3 / 1241.2
// us (61.6% / 61.5%) against 677.2 / 1406.6 (56.3% / 54.2%). From Python
// (`python -m hopperkit.bench --op softmax_backward --problem 4x67108864 --samples 20`, the same
// day) the backward ran 1.02x / 0.99x torch.compile (629.8 / 1251.9 us against 641.9 / 1242.5).
// One-shot blocks of 256 x 4 (v06's own apply kernel, one block per 1024 vectors; measured beside
// it and then deleted) sat between the two: forward 393.8 / 767.8, backward 624.0 /
// 1250.0 us.
// Needs: nothing beyond the op contract (any rows, columns and alignment, as v06).
// Run:   hk bench softmax --variant 'v0[67]*' --shape 4x67108864 --dtype bf16,f32
#include "softmax/softmax_op.hpp"
#include "softmax/split_row_grid.hpp"

namespace hk::softmax_v07_oneshot_apply {
namespace {

void softmax_v07_launch(const SoftmaxArgs& a, cudaStream_t stream) {
  softmax_split_row_grid(a, stream, SoftmaxApplyGrid::kOneShot128x2);
}

}  // namespace

HK_REGISTER_VARIANT(SoftmaxProblem, SoftmaxArgs, "softmax", "v07_oneshot_apply",
                    "v06's split rows, the apply pass as one-shot 128-thread blocks of 2 vectors per thread; any "
                    "alignment (peeled)",
                    90, kFlagProduction, nullptr, softmax_v07_launch);

}  // namespace hk::softmax_v07_oneshot_apply
