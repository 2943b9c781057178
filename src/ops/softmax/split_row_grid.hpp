// softmax/split_row_grid.hpp — softmax v06's three kernels (partial, finalize, apply) as one call
// that v07 also makes: v07 launches the same kernels, its apply pass on another grid, so they are
// compiled once, in v06_split_row_grid.cu (docs/design.md §7).
#pragma once

#include <cuda_runtime_api.h>

#include "softmax/softmax_op.hpp"

namespace hk {

// How the apply pass (y = exp(x - max) / sum, dx = y (dy - dot)) covers a row: v06's resident
// chunks (two waves of 256-thread blocks, each walking ~1/S of a row, 4 vectors per operand in
// flight per thread), or one short-lived block per 128 x 2 vectors (v07).
enum class SoftmaxApplyGrid { kResidentChunks, kOneShot128x2 };

// Any rows, columns and alignment (the contract of v06_split_row_grid).
void softmax_split_row_grid(const SoftmaxArgs& a, cudaStream_t stream, SoftmaxApplyGrid grid);

}  // namespace hk
