// weighted_sum/baseline_cublas.cu
//
// Baseline: what a user would otherwise call — cuBLAS. The row-major [rows, D] x with row
// stride ld is a column-major D x rows matrix with leading dimension ld, so
//   y  = x_cm^T w          cublasGemmEx(T, N, m=rows, n=1, k=D)      (a GEMV through GemmEx:
//                          cublasSgemv / GemvEx take f32 only, GemmEx takes f16/bf16 too)
//   dx = w dy^T            cublasGemmEx(N, T, m=D, n=rows, k=1)      (rank-1 outer product)
//   dw = x_cm dy           cublasGemmEx(N, N, m=D, n=1, k=rows)
// all with f32 compute (CUBLAS_COMPUTE_32F: no TF32), outputs in the input dtype.
// Needs: rows, D and row strides below 2^31 (cuBLAS takes int dimensions).
// Run:   hk bench weighted_sum --variant baseline_cublas --shape 16384x8192
#include <cublas_v2.h>

#include "common/launch.cuh"
#include "core/cublas.hpp"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk::weighted_sum_baseline_cublas {
namespace {

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) HK_THROW(kCuda, "weighted_sum/baseline_cublas: ", what, " failed with status ", int(st));
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: HK_THROW(kType, "weighted_sum/baseline_cublas: dtype ", to_string(dt), " is not f32, f16 or bf16");
  }
}

void weighted_sum_cublas_launch(const WeightedSumArgs& a, cudaStream_t stream) {
  cublasHandle_t h = detail::cublas_handle();
  check(cublasSetStream(h, stream), "cublasSetStream");
  const cudaDataType_t t = cuda_type(a.dtype);
  const float one = 1.f, zero = 0.f;
  const int rows = static_cast<int>(a.rows), dim = static_cast<int>(a.dim);
  if (!a.backward) {
    check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, 1, dim, &one, a.x, t, static_cast<int>(a.ld_x), a.w, t, dim,
                       &zero, a.y, t, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (y = x w)");
    return;
  }
  check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, dim, rows, 1, &one, a.w, t, dim, a.dy, t, rows, &zero, a.dx, t,
                     static_cast<int>(a.ld_dx), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (dx = w dy^T)");
  check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, 1, rows, &one, a.x, t, static_cast<int>(a.ld_x), a.dy, t, rows,
                     &zero, a.dw, t, dim, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (dw = x^T dy)");
}

std::string weighted_sum_cublas_supports(const WeightedSumProblem& p) {
  const int64_t lim = 0x7FFFFFFF;
  if (p.rows > lim || p.dim > lim || p.ld_x > lim || p.ld_dx > lim)
    return "cuBLAS takes int dimensions: rows, D and row strides must be below 2^31";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(WeightedSumProblem, WeightedSumArgs, "weighted_sum", "baseline_cublas",
                    "cuBLAS GemmEx as GEMV (forward), rank-1 GEMM and GEMV (backward), f32 compute", 70,
                    kFlagBaseline | kFlagProduction, weighted_sum_cublas_supports, weighted_sum_cublas_launch);

}  // namespace hk::weighted_sum_baseline_cublas
