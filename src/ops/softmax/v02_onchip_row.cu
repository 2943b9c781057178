// softmax/v02_onchip_row.cu
//
// Rung 2 (default for rows up to 16384): the row is read once into registers (32 elements per
// thread per operand, kept in the input dtype: 16 registers for bf16, 32 for f32; 16 elements
// for backward f32, which holds two operands), reduced there, and the
// result written once: 2 bytes of traffic per byte of x forward (x in, y out), 3 backward
// (y, dy in, dx out) — the minimum. 16-byte loads and stores; the row's scalar head and tail
// (unaligned starts, odd T) are one extra register on the first lanes. Rows of <= 1024
// elements take a warp each (8 rows per block, shuffle reductions only); longer rows a block
// of ceil(T / 32) threads rounded to a warp.
// Forward math (softmax/softmax_common.cuh), lean because the rung was issue-bound (ncu at 16384x8192 bf16:
// issue slots 79.5% busy, DRAM 66.8%, 159.5 us = 80% of copy): the max compares packed bf16x2 /
// f16x2 pairs (HMNMX2.NAN) of the raw slice; vectors past the row end hold -inf, neutral in the
// max and the sum, so only the stores check bounds; exp(x - m) is one FFMA (x log2e + (32 -
// m log2e)) and one MUFU.EX2 (ex2.approx.ftz), the 2^32 bias keeping subnormal outputs exact
// and cancelling against the sum; rows with |max| > 2^23 (or NaN / inf) take the exact
// (x - m) form in a uniform branch; 1 / sum is one MUFU.RCP per row; vector offsets are 32-bit.
// SASS per row per thread (32 elements, sm_90a): bf16 block-per-row 979 -> 454 instructions
// (30.6 -> 14.2 per element; f16 964 -> 453, f32 954 -> 524; warp-per-row bf16 958 -> 408).
// ptxas keeps the 32 exponentials across the sum's reduction (58 registers bf16), so the output
// pass is one FMUL and half an F2FP per element; forward is held to 64 registers (2 blocks of
// 512) so that f32 keeps 4 blocks of 256 (76 registers unbounded).
// Adds over v01: one read instead of three (forward) or two (backward), vector access, and a
// thread count sized to the row.
// Any alignment: rows are split at their own phase (head, 16-byte vectors, tail), which serves
// every operand when their rows share a 16-byte phase (rows_share_phase: always for cudaMalloc'd
// operands with equal strides). Operands whose rows start at different phases take a second
// instantiation (kAny) that splits at the output's phase — 16-byte stores — and reads the
// inputs with the widest loads their phase allows (load_vec_any: 8-, 4- or 2-byte loads).
// Needs: T <= 16384 (512 threads x 32 elements; backward f32 8192); otherwise supports() says
// why and the public op falls through to v04 or v06.
// Run:   hk bench softmax --variant v02_onchip_row --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "softmax/softmax_common.cuh"
#include "softmax/softmax_op.hpp"

namespace hk::softmax_v02_onchip_row {
namespace {

constexpr int kMaxThreads = 512;
constexpr int kWarpRowsBlock = 256;  // warp-per-row mode: 8 rows per block
// Forward: at most 64 registers (2 blocks of 512 threads per SM). Backward: no minimum (0),
// its register counts as before (an explicit 1 made ptxas take more: f16 57 -> 82).
// kAny (inputs at another phase than the output) is not held to 64: its multi-width loads need
// more registers than the 16-byte path (f32 forward spilled at 64).
template <bool kBackward, bool kAny = false>
constexpr int kMinBlocks = kBackward || kAny ? 0 : 2;

template <class T, bool kBackward, bool kWarpRows, bool kAny>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks<kBackward, kAny>) softmax_v02_kernel(const T* __restrict__ a, const T* __restrict__ dy,
                                                                  T* __restrict__ out, int64_t rows, int64_t cols,
                                                                  int64_t ld_a, int64_t ld_dy, int64_t ld_out) {
  constexpr int kV = kVec16<T>;
  constexpr int kPer = kOnChipElems<T, kBackward> / kV;  // 16-byte vectors per thread
  using V = Vec<T, kV>;
  const int lane = kWarpRows ? threadIdx.x & 31 : threadIdx.x;
  const int nl = kWarpRows ? 32 : blockDim.x;
  const int64_t groups = kWarpRows ? blockDim.x / 32 : 1;
  const int64_t first = kWarpRows ? blockIdx.x * groups + threadIdx.x / 32 : blockIdx.x;
  auto reduce = [](float v, auto op) {
    if constexpr (kWarpRows) return warp_reduce(v, op);
    else return block_reduce_any(v, op);
  };
  for (int64_t r = first; r < rows; r += gridDim.x * groups) {
    const T* ar = a + r * ld_a;
    const T* dr = kBackward ? dy + r * ld_dy : nullptr;
    T* o = out + r * ld_out;
    // Every operand's row has this split (same phase), or (kAny) the output's does.
    const RowSplit s = kAny ? row_split(static_cast<const T*>(o), cols) : row_split(ar, cols);
    const int nvec = static_cast<int>(s.nvec);  // T <= 16384: 32-bit vector indices
    const int step = nl * kV;                   // elements between this thread's vectors
    V va[kPer], vd[kBackward ? kPer : 1];       // (kPer, kV) the row slice of this thread
    unsigned valid = 0;                         // bit k: vector k lies in the row
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (lane + k * nl < nvec) {
        valid |= 1u << k;
        va[k] = load_stream_at<kAny, T, kV>(ar + s.head + lane * kV + k * step);
        if constexpr (kBackward) vd[k] = load_stream_at<kAny, T, kV>(dr + s.head + lane * kV + k * step);
      } else if constexpr (!kBackward) {
        va[k] = neg_inf_vec<T>();  // neutral in the max and the sum: no bounds check per pass
      }
    }
    const bool has_edge = lane < s.edges();
    const int64_t edge = has_edge ? s.edge<kV>(lane) : 0;
    const float ea = has_edge ? to_f32(ar[edge]) : 0.f;
    if constexpr (!kBackward) {
      const float m = reduce(max_nan(slice_max<T>(va), has_edge ? ea : MaxOp::kIdentity), MaxOp{});
      T* ob = o + s.head + lane * kV;
      with_row_exp(m, [&](auto ex) {
        // Each pass widens the slice afresh (opaque): f32 copies kept across the reduction
        // would double the slice's registers.
        float sum = has_edge ? ex(ea) : 0.f, f[kV];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          opaque(va[k]);
          widen(va[k], f);
          float part = ex(f[0]);
#pragma unroll
          for (int j = 1; j < kV; ++j) part += ex(f[j]);
          sum += part;
        }
        const float inv = inv_sum(reduce(sum, SumOp{}));
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          opaque(va[k]);
          widen(va[k], f);
          V w;
#pragma unroll
          for (int j = 0; j < kV; ++j) w.v[j] = from_f32<T>(ex(f[j]) * inv);
          if ((valid >> k) & 1u) store_stream<T, kV>(ob + k * step, w);
        }
        if (has_edge) o[edge] = from_f32<T>(ex(ea) * inv);
      });
    } else {
      const float ed = has_edge ? to_f32(dr[edge]) : 0.f;
      float dot = ea * ed;
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        if ((valid >> k) & 1u)
#pragma unroll
          for (int j = 0; j < kV; ++j) dot += to_f32(va[k].v[j]) * to_f32(vd[k].v[j]);
      dot = reduce(dot, SumOp{});
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if ((valid >> k) & 1u) {
          V w;
#pragma unroll
          for (int j = 0; j < kV; ++j) w.v[j] = from_f32<T>(to_f32(va[k].v[j]) * (to_f32(vd[k].v[j]) - dot));
          store_stream<T, kV>(o + s.head + lane * kV + k * step, w);
        }
      }
      if (has_edge) o[edge] = from_f32<T>(ea * (ed - dot));
    }
  }
}

template <class T, bool kBackward, bool kAny>
void launch_typed(const SoftmaxArgs& a, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const int64_t threads = ceil_div(ceil_div(ceil_div(a.cols, kV), kOnChipElems<T, kBackward> / kV), 32) * 32;
  const T* x = static_cast<const T*>(a.a);
  const T* d = static_cast<const T*>(a.dy);
  T* o = static_cast<T*>(a.out);
  if (threads <= 32) {
    auto kernel = softmax_v02_kernel<T, kBackward, true, kAny>;
    static const int resident = resident_grid(kernel, kWarpRowsBlock);
    const int blocks = static_cast<int>(std::min<int64_t>(resident, ceil_div(a.rows, kWarpRowsBlock / 32)));
    kernel<<<blocks, kWarpRowsBlock, 0, stream>>>(x, d, o, a.rows, a.cols, a.ld_a, a.ld_dy, a.ld_out);
  } else {
    const int blocks = static_cast<int>(std::min<int64_t>(a.rows, 0x7FFFFFFF));
    softmax_v02_kernel<T, kBackward, false, kAny><<<blocks, static_cast<unsigned>(threads), 0, stream>>>(
        x, d, o, a.rows, a.cols, a.ld_a, a.ld_dy, a.ld_out);
  }
  HK_CHECK_LAUNCH("softmax_v02_kernel");
}

void softmax_v02_launch(const SoftmaxArgs& a, cudaStream_t stream) {
  dispatch_softmax(a, "softmax/v02_onchip_row", [&](auto t, auto bwd, auto any) {
    launch_typed<decltype(t), decltype(bwd)::value, decltype(any)::value>(a, stream);
  });
}

std::string softmax_v02_supports(const SoftmaxProblem& p) {
  const int per_thread = p.backward && p.dtype == DType::kF32 ? kOnChipElems<float, true> : kOnChipElems<float, false>;
  const int64_t max_cols = int64_t(kMaxThreads) * per_thread;
  if (p.cols > max_cols)
    return "rows of " + std::to_string(p.cols) + " elements do not fit on chip (at most " + std::to_string(max_cols) +
           ": 512 threads x " + std::to_string(per_thread) + ")";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(SoftmaxProblem, SoftmaxArgs, "softmax", "v02_onchip_row",
                    "row held in registers: one read, one write; warp per short row, block per long row; any alignment (peeled)", 70,
                    kFlagProduction, softmax_v02_supports, softmax_v02_launch);

}  // namespace hk::softmax_v02_onchip_row
