// common/ptx/mma_layout.hpp — the host-checkable half of mma.cuh: which matrix element each
// lane holds in the fragments of mma.sync.m16n8k16 (16-bit inputs, f32 accumulators), which
// element ldmatrix hands each lane, and which shared-memory row each lane addresses so that
// ldmatrix.x4 produces exactly those fragments — as constexpr functions, unit-tested on the CPU
// in tests/cpp/test_gemm.cpp by simulating ldmatrix against the fragment tables.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), lane l,
// g = l / 4, t = l % 4; a 32-bit register holds two 16-bit elements, the lower index first:
//   A (16 x 16, m x k): element e (0..7) is at m = g + 8 ((e / 2) % 2), k = 2t + e % 2 + 8 (e / 4)
//   B (16 x 8,  k x n): element e (0..3) is at k = 2t + e % 2 + 8 (e / 2), n = g
//   C (16 x 8,  m x n): element e (0..3) is at m = g + 8 (e / 2), n = 2t + e % 2
// ldmatrix.m8n8.x4.b16: lane l gives the address of row l % 8 of matrix l / 8 (16 contiguous
// bytes); register q of lane l receives matrix q's elements (l / 4, 2 (l % 4)) and
// (l / 4, 2 (l % 4) + 1) as (row, column) of the rows as stored, or with .trans the elements
// (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4): the stored rows are the matrix's columns.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace hk::ptx {

struct RowCol {
  int row = 0, col = 0;
};

HK_HOST_DEVICE constexpr RowCol mma_a_element(int lane, int e) {
  return {lane / 4 + 8 * ((e / 2) % 2), 2 * (lane % 4) + e % 2 + 8 * (e / 4)};
}
HK_HOST_DEVICE constexpr RowCol mma_b_element(int lane, int e) {  // (k, n)
  return {2 * (lane % 4) + e % 2 + 8 * (e / 2), lane / 4};
}
HK_HOST_DEVICE constexpr RowCol mma_c_element(int lane, int e) {
  return {lane / 4 + 8 * (e / 2), 2 * (lane % 4) + e % 2};
}

// (stored row, column) inside its 8x8 matrix of half h (0, 1) of the register lane receives.
HK_HOST_DEVICE constexpr RowCol ldmatrix_element(int lane, int h, bool trans) {
  return trans ? RowCol{2 * (lane % 4) + h, lane / 4} : RowCol{lane / 4, 2 * (lane % 4) + h};
}

// The row each lane addresses for one ldmatrix.x4 that loads an A fragment (a 16 x 16 block of
// (m, k)), as (stored row, stored column) from the block's corner. K-major tiles store rows of
// m (K contiguous; plain ldmatrix), M-major tiles rows of k (M contiguous; .trans). Matrix q
// covers m 8 (q % 2) .. +7 and k 8 (q / 2) .. +7: registers 0..3 are A's four fragment registers.
HK_HOST_DEVICE constexpr RowCol ldmatrix_a_row(int lane, bool k_major) {
  const int q = lane / 8, r = lane % 8;
  return k_major ? RowCol{r + 8 * (q % 2), 8 * (q / 2)} : RowCol{r + 8 * (q / 2), 8 * (q % 2)};
}

// The same for B fragments of two adjacent 8-column blocks (a 16 x 16 block of (k, n)):
// registers 0, 1 are the first block's fragment (n 0..7), 2, 3 the second's (n 8..15). Matrix q
// covers k 8 (q % 2) .. +7 and n 8 (q / 2) .. +7. K-major tiles store rows of n (plain),
// N-major tiles rows of k (.trans).
HK_HOST_DEVICE constexpr RowCol ldmatrix_b_row(int lane, bool k_major) {
  const int q = lane / 8, r = lane % 8;
  return k_major ? RowCol{r + 8 * (q / 2), 8 * (q % 2)} : RowCol{r + 8 * (q % 2), 8 * (q / 2)};
}

// Row pitch (in 16-bit elements) of a shared tile whose rows hold `elems` elements, padded by 16
// bytes: with elems a multiple of 16 the pitch is an odd number of 16-byte chunks, so the 8 rows
// one ldmatrix matrix (or 8 threads' 16-byte loads down a column) touch fall in 8 different
// 16-byte bank groups, and every row start stays 16-byte aligned for cp.async.
HK_HOST_DEVICE constexpr int padded_pitch(int elems) { return elems + 8; }

}  // namespace hk::ptx
