// gemm_w4a16/baseline_cublas_dequant.cu
//
// Baseline: what a user does without a fused kernel — dequantise W into a dense [N, K] matrix
// of x's dtype (scratch), then one cuBLAS GEMM, y = x Wd^T. The dequantisation kernel gives the
// same weights as the fused rungs, bit for bit (w4a16.cuh); cuBLAS accumulates in f32
// (CUBLAS_COMPUTE_32F). Each weight costs 4.5 bytes of traffic (the packed read, a 16-bit write
// and its re-read) against the fused rungs' 0.5, which at decode shapes is nearly all the time.
// Needs: M, N, K and the row strides below 2^31 (cuBLAS takes int dimensions); any alignment,
// either layout.
// Run:   hk bench gemm_w4a16 --variant baseline_cublas_dequant --shape 4096x4096x4096
#include <cublas_v2.h>

#include "common/launch.cuh"
#include "core/cublas.hpp"
#include "core/scratch.hpp"
#include "gemm_w4a16/w4a16.cuh"

namespace hk::gemm_w4a16_baseline_cublas_dequant {
namespace {

// One thread per packed word: eight weights, one 16-byte store into the dense [N, K] matrix.
template <class T>
__global__ void gemm_w4a16_baseline_dequant_kernel(W4A16Args a, T* __restrict__ wd) {
  const int64_t words = a.k / 8, total = a.n * words;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = idx / words, w = idx % words;
    const uint32_t word = static_cast<uint32_t>(__ldg(a.qweight + w4a16::word_index(a, n, w)));
    const w4a16::GroupParams<T> gp = w4a16::group_params<T>(a, n, (w * 8) / a.group);
    w4a16::T2<T> p[4];  // p[j] = (w_j, w_{j+4})
    w4a16::dequant_word<T>(word, gp, p);
    const uint32_t u0 = w4a16::as_u32<T>(p[0]), u1 = w4a16::as_u32<T>(p[1]);
    const uint32_t u2 = w4a16::as_u32<T>(p[2]), u3 = w4a16::as_u32<T>(p[3]);
    uint4 out;  // w0..w7 in order: low halves first, then the high ones
    out.x = __byte_perm(u0, u1, 0x5410);
    out.y = __byte_perm(u2, u3, 0x5410);
    out.z = __byte_perm(u0, u1, 0x7632);
    out.w = __byte_perm(u2, u3, 0x7632);
    *reinterpret_cast<uint4*>(wd + n * a.k + w * 8) = out;
  }
}

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    HK_THROW(kCuda, "gemm_w4a16/baseline_cublas_dequant: ", what, " failed with status ", int(st));
}

void gemm_w4a16_baseline_launch(const W4A16Args& a, cudaStream_t stream) {
  w4a16::dispatch_dtype(a.dtype, "gemm_w4a16/baseline_cublas_dequant", [&](auto t) {
    using T = decltype(t);
    detail::StreamWorkspace ws(stream, "gemm_w4a16/baseline_cublas_dequant", size_t(a.n * a.k) * sizeof(T));
    T* wd = static_cast<T*>(ws.get());
    const int threads = 256;
    gemm_w4a16_baseline_dequant_kernel<T><<<grid_for(ceil_div(a.n * (a.k / 8), threads)), threads, 0, stream>>>(a, wd);
    HK_CHECK_LAUNCH("gemm_w4a16_baseline_dequant_kernel");
    cublasHandle_t h = detail::cublas_handle();
    check(cublasSetStream(h, stream), "cublasSetStream");
    const cudaDataType_t ct = std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;
    const float one = 1.f, zero = 0.f;
    // Column-major view: y^T [N, M] (ld_y) = Wd^T-as-stored [K, N] transposed times x^T [K, M] (ld_x).
    check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(a.n), int(a.m), int(a.k), &one, wd, ct, int(a.k), a.x, ct,
                       int(a.ld_x), &zero, a.y, ct, int(a.ld_y), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (y = x Wd^T)");
  });
}

std::string gemm_w4a16_baseline_supports(const W4A16Problem& p) {
  const int64_t lim = 0x7FFFFFFF;
  if (p.m > lim || p.n > lim || p.k > lim || p.ld_x > lim || p.ld_y > lim)
    return "cuBLAS takes int dimensions: M, N, K and the row strides must be below 2^31";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "baseline_cublas_dequant",
                    "dequantise W to x's dtype in scratch, then cuBLAS GemmEx (f32 compute)", 80,
                    kFlagBaseline | kFlagProduction, gemm_w4a16_baseline_supports, gemm_w4a16_baseline_launch);

}  // namespace hk::gemm_w4a16_baseline_cublas_dequant
