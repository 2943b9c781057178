// gemm_fp8/v04_aligned_pack.cu
//
// Rung 4: any layout. An operand the TMA rungs cannot read as given — K not a multiple of 16
// (rows not whole 16-byte units), a padded row stride that is not, an unaligned base, or a
// weight stored [K, N] row-major (N-contiguous: the transposed view) — is copied once into
// K-major scratch with 16-byte rows, then the route the dispatch picks for K-major operands
// runs on the copy (cuBLASLt where it takes the problem, else v05 for few tiles over a long K,
// else v08, or v07 for a D TMA cannot store). The scales are read where they are (any strides), and so is D (any leading
// stride: the wgmma rungs store from registers).
// Adds over v02/v03: the op's whole contract (any M, N, K >= 1, any strides) at the price of one
// pass over the repacked operand (M K or N K bytes read and written; a transposed B is read with
// strided byte loads, which L2 absorbs).
// Needs: sm_90a; M, N, K below 2^31.
// Run:   hk bench gemm_fp8 --variant v04_aligned_pack --shape 4095x4096x4095:tensor
#include <algorithm>

#include "common/launch.cuh"
#include "core/scratch.hpp"
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk::gemm_fp8_v04_aligned_pack {
namespace {

constexpr int kChunk = 16;  // bytes of one destination row a thread writes

// dst[r, kk] = src[r * s0 + kk * s1] for r < rows, kk < k; dst rows are ld bytes apart. One
// thread per 16-byte chunk of a destination row, consecutive threads along the row.
__global__ void gemm_fp8_v04_pack_kernel(const uint8_t* __restrict__ src, int64_t s0, int64_t s1, uint8_t* __restrict__ dst,
                                         int64_t ld, int64_t rows, int64_t k) {
  const int64_t chunks = (k + kChunk - 1) / kChunk;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * chunks; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks, k0 = (i % chunks) * kChunk;
    const uint8_t* s = src + r * s0 + k0 * s1;
    uint8_t v[kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) v[c] = k0 + c < k ? s[c * s1] : uint8_t(0);
    uint4 w;
    memcpy(&w, v, kChunk);
    *reinterpret_cast<uint4*>(dst + r * ld + k0) = w;  // ld and the base are multiples of 16
  }
}

bool tma_ready(const void* p, int64_t s0, int64_t s1) {
  return s1 == 1 && s0 % 16 == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The family's dispatch, asked again for the K-major operands: cuBLASLt where it takes them, else
// v05 for few tiles over a long K, else v08 (v07 for a D TMA cannot store).
void run_k_major(const GemmFp8Args& q, cudaStream_t stream) {
  const GemmFp8Problem p = gemm_fp8_problem_of(q);
  const Choice choice = Registry::get().choose(p);
  if (choice.variant->name() == "v04_aligned_pack")
    HK_THROW(kInternal, "gemm_fp8/v04_aligned_pack: the K-major copy of ", p.key(), " is still not TMA-readable");
  Operands ops;
  ops.in = {TensorView(q.a, q.a_dtype, {}), TensorView(q.sa, DType::kF32, {}), TensorView(q.b, q.b_dtype, {}),
            TensorView(q.sb, DType::kF32, {})};
  if (q.bias) ops.in.emplace_back(q.bias, q.out_dtype, std::vector<int64_t>{});
  ops.out = {TensorView(q.d, q.out_dtype, {})};
  choice.variant->run(p, ops, stream);
}

void gemm_fp8_v04_launch(const GemmFp8Args& g, cudaStream_t stream) {
  GemmFp8Args q = g;
  const int64_t ld = (g.k + 15) / 16 * 16;  // K rounded up to 16-byte rows
  const bool pack_a = !tma_ready(g.a, g.a_s0, g.a_s1), pack_b = !tma_ready(g.b, g.b_s0, g.b_s1);
  const int64_t bytes_a = pack_a ? (g.m * ld + 255) / 256 * 256 : 0, bytes_b = pack_b ? g.n * ld : 0;
  if (pack_a || pack_b) {
    detail::StreamWorkspace ws(stream, "gemm_fp8_v04_operands", std::max<int64_t>(bytes_a + bytes_b, 256));
    uint8_t* next = static_cast<uint8_t*>(ws.get());
    auto pack = [&](const void* src, int64_t s0, int64_t s1, int64_t rows, const void*& ptr, int64_t& q0, int64_t& q1) {
      const int64_t items = rows * ((g.k + kChunk - 1) / kChunk);
      gemm_fp8_v04_pack_kernel<<<grid_for(ceil_div(items, 256)), 256, 0, stream>>>(static_cast<const uint8_t*>(src), s0,
                                                                                   s1, next, ld, rows, g.k);
      HK_CHECK_LAUNCH("gemm_fp8_v04_pack_kernel");
      ptr = next, q0 = ld, q1 = 1;
      next += rows * ld;
    };
    if (pack_a) {
      pack(g.a, g.a_s0, g.a_s1, g.m, q.a, q.a_s0, q.a_s1);
      next = static_cast<uint8_t*>(ws.get()) + bytes_a;
    }
    if (pack_b) pack(g.b, g.b_s0, g.b_s1, g.n, q.b, q.b_s0, q.b_s1);
    run_k_major(q, stream);
    return;  // the workspace is released after the launches that use it are queued
  }
  run_k_major(q, stream);
}

std::string gemm_fp8_v04_supports(const GemmFp8Problem& p) {
  for (int64_t v : {p.m, p.n, p.k})
    if (v > INT32_MAX) return "gemm_fp8: TMA coordinates are 32-bit, got a dimension of 2^31 or more";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v04_aligned_pack",
                    "any layout: operands TMA cannot read K-major are copied into 16-byte-row scratch (a [K, N] "
                    "weight transposed), then cuBLASLt, v05, v08 or v07 run on the copies",
                    90, kFlagProduction, gemm_fp8_v04_supports, gemm_fp8_v04_launch);

}  // namespace hk::gemm_fp8_v04_aligned_pack
