// gemm/baseline_cublas.cu
//
// Baseline: cublasGemmStridedBatchedEx (f32 compute) — the peer every speedup divides by.
// cuBLAS computes C = alpha A B + beta C in place and has no bias or activation, so with an
// epilogue (beta, bias or act) it writes alpha A B to an f32 workspace and one elementwise
// kernel applies the epilogue and rounds once: what a user without a fused GEMM would run.
// Row-major C = A B is issued as column-major C^T = B^T A^T.
// Needs: M, N, K, leading dims and batch below 2^31 (cuBLAS takes int); K >= 1.
// Run:   hk bench gemm --variant baseline_cublas --shape 4096x4096x4096
#include <cublas_v2.h>

#include <climits>
#include <memory>

#include "common/launch.cuh"
#include "core/cublas.hpp"
#include "gemm/epilogue.cuh"
#include "core/scratch.hpp"

namespace hk::gemm_baseline_cublas {
namespace {

constexpr int kThreads = 256;

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    HK_THROW(kCuda, "gemm/baseline_cublas: ", what, " failed: ", cublasGetStatusString(s));
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

// c = act(ws + beta c_in + bias) over the whole output; ws is f32 [batch, m, n], alpha applied.
__global__ void __launch_bounds__(kThreads) gemm_baseline_cublas_epilogue_kernel(const GemmArgs g, const float* ws) {
  const int64_t total = g.batch * g.m * g.n;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t col = i % g.n, row = (i / g.n) % g.m, bi = i / (g.n * g.m);
    gemm_impl::epilogue_store(g, ws[i], bi, row, col);
  }
}

void gemm_baseline_cublas_launch(const GemmArgs& g, cudaStream_t stream) {
  cublasHandle_t h = detail::cublas_handle();
  check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  const bool fused = g.c_in || g.bias || g.act != GemmActivation::kNone;
  // The f32 product for the epilogue, in the stream's cached workspace.
  std::unique_ptr<detail::StreamWorkspace> workspace;
  if (fused) workspace = std::make_unique<detail::StreamWorkspace>(stream, "gemm_cublas_f32_product", g.batch * g.m * g.n * sizeof(float));
  float* ws = workspace ? static_cast<float*>(workspace->get()) : nullptr;
  const float alpha = g.alpha, beta = 0.0f;
  const cudaDataType_t tin = cuda_type(g.in_dtype);
  // C^T (N x M, column-major) = op(B') op(A'), where B's memory read column-major is B^T when B
  // is row-major (no transpose needed) and B itself when B is column-major (transpose it).
  check_cublas(cublasGemmStridedBatchedEx(
                   h, g.b_col ? CUBLAS_OP_T : CUBLAS_OP_N, g.a_col ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.n), int(g.m),
                   int(g.k), &alpha, g.b, tin, int(g.ldb), g.batch_stride_b, g.a, tin, int(g.lda), g.batch_stride_a,
                   &beta, fused ? static_cast<void*>(ws) : g.c, fused ? CUDA_R_32F : cuda_type(g.out_dtype),
                   fused ? int(g.n) : int(g.ldc), fused ? g.m * g.n : g.batch_stride_c, int(g.batch),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
  if (!fused) return;
  GemmArgs e = g;
  e.alpha = 1.0f;  // already applied by cuBLAS
  static const int resident = resident_grid(gemm_baseline_cublas_epilogue_kernel, kThreads);
  int blocks = static_cast<int>(std::min<int64_t>(resident, ceil_div(g.batch * g.m * g.n, kThreads)));
  gemm_baseline_cublas_epilogue_kernel<<<blocks, kThreads, 0, stream>>>(e, ws);
  HK_CHECK_LAUNCH("gemm_baseline_cublas_epilogue_kernel");
}

std::string gemm_baseline_cublas_supports(const GemmProblem& p) {
  if (p.k < 1) return "cuBLAS path needs K >= 1, got K=0";
  for (int64_t v : {p.m, p.n, p.k, p.batch, p.lda, p.ldb, p.ldc})
    if (v > INT_MAX) return "cuBLAS takes int sizes and leading dims, got " + std::to_string(v);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "baseline_cublas",
                    "cublasGemmStridedBatchedEx (f32 compute); epilogue as a separate kernel", 70, kFlagBaseline | kFlagProduction,
                    gemm_baseline_cublas_supports, gemm_baseline_cublas_launch);

}  // namespace hk::gemm_baseline_cublas
