// gemm_fp8/baseline_cublaslt.cu
//
// cublasLtMatmul on FP8 operands (CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2) with f32 scale pointers in
// every scaling mode: per-tensor (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F), row-wise
// (OUTER_VEC_32F) and DeepSeek-V3 block-wise (VEC128_32F on A's 1 x 128 tiles, BLK128x128_32F on
// B's 128 x 128 tiles); a BIAS epilogue for the bias; f32 accumulation with Lt's default
// (promoted, non-"fast") accumulation. Row-major D = sa sb A B^T is issued as column-major
// D^T = B A^T: Lt's "A" is our B ([N, K], K contiguous: op T) and its "B" our A (op N), the TN
// form Lt's FP8 kernels require, so Lt's A scale is sb and its B scale sa.
// Block-wise scale layouts (measured against the fp64 product, H200, cuBLASLt 13.0): Lt reads
// sa M-major ([K/128][M], the transpose of this op's [M, K/128]) and sb as [N/128][K/128] row-major
// with its rows padded to a multiple of 4 floats (16 bytes).
// Scales in any other strides are copied into that layout first (M K/128 + N/128 K/128 floats,
// one small kernel). Lt's block-scaled kernels take K a multiple of 128 and M a multiple of 4
// (the M-major sa has no leading-dimension attribute, so its columns must stay 16-byte aligned);
// the heuristic declines the rest.
// Serves the public op where it is the fastest route (dispatch.cpp): Lt's nvjet kernels run
// per-tensor 4096^3 at 1.4x this library's own wgmma kernels (H200, 2026-12-03, docs/gemm_fp8.md).
// The heuristic's first algorithm is cached per problem; supports() asks the heuristic (when a
// GPU is present) whether any algorithm exists, so a pairing Lt lacks (e5m2 x e5m2) or a mode
// this cuBLASLt does not run on the device is declined rather than failed.
// Needs: A and B K-major, 16-byte aligned, row strides and K multiples of 16; contiguous
// row-wise scales; M, N, K below 2^31.
// Run:   hk bench gemm_fp8 --variant baseline_cublaslt --shape 4096x4096x4096:tensor
#include <cublasLt.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <optional>

#include "common/launch.cuh"
#include "core/cublas.hpp"
#include "core/scratch.hpp"
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk {
namespace gemm_fp8_baseline_cublaslt {
namespace {

std::string lt_error(cublasStatus_t s, const char* what) {
  return std::string("gemm_fp8/baseline_cublaslt: ") + what + " failed: " + cublasGetStatusString(s);
}

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) HK_THROW(kCuda, lt_error(s, what));
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kF8E4M3: return CUDA_R_8F_E4M3;
    case DType::kF8E5M2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_16BF;
  }
}

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string error;  // why the heuristic found no algorithm ("" when it did)
};

struct Lt {
  std::mutex mu;
  std::map<std::string, Plan> plans;

  void release() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [key, p] : plans) {
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.d})
        if (l) cublasLtMatrixLayoutDestroy(l);
      if (p.op) cublasLtMatmulDescDestroy(p.op);
    }
    plans.clear();
  }
};

// Never destroyed; emptied by hk::release_cached_resources().
Lt& lt() {
  static Lt* state = [] {
    auto* s = new Lt;
    detail::on_release([s] { s->release(); });
    return s;
  }();
  return *state;
}

// Whether D's rows are whole 16-byte units (its base is the problem's d_align_bytes): cuBLASLt's
// FP8 kernels need 16-byte aligned C and D, and a heuristic asked for less (4 bytes) finds none
// ("the requested functionality is not supported", H200, CUDA 13.0, 2026-12-02).
bool d_rows_16b(const GemmFp8Problem& p) { return (p.ldd * dtype_bits(p.out_dtype) / 8) % 16 == 0; }

std::string plan_key(const GemmFp8Problem& p) {
  std::string key = p.key();
  for (int64_t v : {p.a_s0, p.b_s0, p.ldd, int64_t(p.align_bytes), int64_t(p.d_align_bytes), int64_t(p.has_bias),
                    int64_t(p.scaling), int64_t(p.fast_accum)})
    key.append(1, '_').append(std::to_string(v));
  return key;
}

// Under lt().mu. A plan whose heuristic found nothing keeps the reason.
Plan make_plan(const GemmFp8Problem& p) {
  Plan plan;
  auto fail = [&](cublasStatus_t st, const char* what) {
    if (st != CUBLAS_STATUS_SUCCESS && plan.error.empty()) plan.error = lt_error(st, what);
    return st == CUBLAS_STATUS_SUCCESS;
  };
  check_lt(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB");
  if (p.scaling != Fp8Scaling::kTensor) {
    // Lt's A is our B (sb), Lt's B our A (sa).
    const bool block = p.scaling == Fp8Scaling::kBlock;
    const int32_t mode_a = block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const int32_t mode_b = block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof(mode_a)), "A_SCALE_MODE");
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof(mode_b)), "B_SCALE_MODE");
  }
  if (p.fast_accum) {  // the accumulation over all of K in the tensor cores (no promotion)
    const int8_t fast = 1;
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)), "FAST_ACCUM");
  }
  if (p.has_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = cuda_type(p.out_dtype);
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "EPILOGUE");
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
         "BIAS_DATA_TYPE");
  }
  auto layout = [&](cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    check_lt(cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), ld), "cublasLtMatrixLayoutCreate");
    return l;
  };
  plan.a = layout(cuda_type(p.b_dtype), p.k, p.n, p.b_s0);  // our B: K x N column-major, op T
  plan.b = layout(cuda_type(p.a_dtype), p.k, p.m, p.a_s0);  // our A: K x M column-major, op N
  plan.d = layout(cuda_type(p.out_dtype), p.n, p.m, p.ldd);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  uint64_t ws = detail::kCublasLtWorkspaceBytes;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
           "MAX_WORKSPACE_BYTES");
  const uint32_t al_in = uint32_t(std::min(p.align_bytes, 256)), al_d = d_rows_16b(p) ? 16 : 4;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_in, 4), "ALIGN_A");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_in, 4), "ALIGN_B");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, 4), "ALIGN_C");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, 4), "ALIGN_D");
  // The heuristic refuses a null scale pointer in the vector and block modes ("an unsupported
  // value or parameter"); it only needs one to be set. The real pointers are set per call.
  if (p.scaling != Fp8Scaling::kTensor) {
    const void* placeholder = reinterpret_cast<const void*>(uintptr_t(256));
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder, sizeof(placeholder)),
         "A_SCALE_POINTER");
    fail(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder, sizeof(placeholder)),
         "B_SCALE_POINTER");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (plan.error.empty() &&
      fail(cublasLtMatmulAlgoGetHeuristic(detail::cublaslt_handle(), plan.op, plan.a, plan.b, plan.d, plan.d, pref, 1, &result, &found),
           "cublasLtMatmulAlgoGetHeuristic") &&
      found == 0)
    plan.error = "gemm_fp8/baseline_cublaslt: cuBLASLt has no algorithm for this problem on this device";
  cublasLtMatmulPreferenceDestroy(pref);
  plan.algo = result.algo;
  return plan;
}

// The cached plan of p (built on first use), under lt().mu.
const Plan& plan_of(const GemmFp8Problem& p) {
  Lt& s = lt();
  const std::string key = plan_key(p);
  auto it = s.plans.find(key);
  if (it == s.plans.end()) it = s.plans.emplace(key, make_plan(p)).first;
  return it->second;
}

// Whether block-wise scales already lie as Lt reads them: sa M-major ([K/128][M]), sb
// [N/128][K/128] row-major with rows of sb_lt_ld(kb) floats (measured: a row stride of K/128 when
// that is not a multiple of 4 reads the wrong scales).
int64_t sb_lt_ld(int64_t kb) { return (kb + 3) / 4 * 4; }
bool sa_lt_layout(const GemmFp8Args& g, int64_t kb) { return (g.m == 1 || g.sa_s0 == 1) && (kb == 1 || g.sa_s1 == g.m); }
bool sb_lt_layout(const GemmFp8Args& g, int64_t nb, int64_t kb) {
  return (kb == 1 || g.sb_s1 == 1) && (nb == 1 || g.sb_s0 == sb_lt_ld(kb));
}

// sa_out[kb][i] = sa[i, kb] (when sa_out is set) and sb_out[j][kb] = sb[j, kb] (rows ldb apart,
// when sb_out is set), from scales in any strides; one thread per value.
__global__ void gemm_fp8_lt_block_scales_kernel(const float* __restrict__ sa, int64_t sa_s0, int64_t sa_s1,
                                                float* __restrict__ sa_out, int64_t m, const float* __restrict__ sb,
                                                int64_t sb_s0, int64_t sb_s1, float* __restrict__ sb_out, int64_t nb,
                                                int64_t kb, int64_t ldb) {
  const int64_t na = sa_out ? m * kb : 0, total = na + (sb_out ? nb * kb : 0);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    if (i < na) {
      const int64_t k = i / m, r = i % m;
      sa_out[i] = sa[r * sa_s0 + k * sa_s1];
    } else {
      const int64_t j = (i - na) / kb, k = (i - na) % kb;
      sb_out[j * ldb + k] = sb[j * sb_s0 + k * sb_s1];
    }
  }
}

void gemm_fp8_baseline_cublaslt_launch(const GemmFp8Args& g, cudaStream_t stream) {
  Lt& s = lt();
  const GemmFp8Problem p = gemm_fp8_problem_of(g);
  std::lock_guard<std::mutex> lock(s.mu);
  const Plan& plan = plan_of(p);
  if (!plan.error.empty()) HK_THROW(kNotSupported, plan.error);
  if (d_rows_16b(p) && reinterpret_cast<uintptr_t>(g.d) % 16 != 0)
    HK_THROW(kNotSupported, "gemm_fp8/baseline_cublaslt: cuBLASLt's FP8 kernels need D 16-byte aligned");
  // Block-wise scales in other strides: copied into Lt's layouts (queued before the matmul; the
  // workspace is released after both are queued).
  const float *sa = g.sa, *sb = g.sb;
  std::optional<detail::StreamWorkspace> scales;
  if (g.scaling == Fp8Scaling::kBlock) {
    const int64_t kb = p.k_blocks(), nb = p.n_blocks();
    const bool copy_a = !sa_lt_layout(g, kb), copy_b = !sb_lt_layout(g, nb, kb);
    if (copy_a || copy_b) {
      const int64_t na = copy_a ? (g.m * kb + 63) / 64 * 64 : 0;  // keeps sb's copy 256-byte aligned
      scales.emplace(stream, "gemm_fp8_lt_block_scales", std::max<int64_t>(na + (copy_b ? nb * sb_lt_ld(kb) : 0), 64) * 4);
      float* sa_out = copy_a ? static_cast<float*>(scales->get()) : nullptr;
      float* sb_out = copy_b ? static_cast<float*>(scales->get()) + na : nullptr;
      const int64_t items = (copy_a ? g.m * kb : 0) + (copy_b ? nb * kb : 0);
      gemm_fp8_lt_block_scales_kernel<<<grid_for(ceil_div(items, 256)), 256, 0, stream>>>(
          g.sa, g.sa_s0, g.sa_s1, sa_out, g.m, g.sb, g.sb_s0, g.sb_s1, sb_out, nb, kb, sb_lt_ld(kb));
      HK_CHECK_LAUNCH("gemm_fp8_lt_block_scales_kernel");
      if (copy_a) sa = sa_out;
      if (copy_b) sb = sb_out;
    }
  }
  // Pointers change per call; the descriptor is shared, so they are set under the lock.
  check_lt(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof(sb)),
           "A_SCALE_POINTER");
  check_lt(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof(sa)),
           "B_SCALE_POINTER");
  if (g.bias)
    check_lt(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)),
             "BIAS_POINTER");
  const float alpha = 1.0f, beta = 0.0f;
  detail::StreamWorkspace ws(stream, detail::kCublasLtWorkspaceKey, detail::kCublasLtWorkspaceBytes);
  check_lt(cublasLtMatmul(detail::cublaslt_handle(), plan.op, &alpha, g.b, plan.a, g.a, plan.b, &beta, g.d, plan.d,
                          g.d, plan.d, &plan.algo, ws.get(), detail::kCublasLtWorkspaceBytes, stream),
           "cublasLtMatmul");
}

std::string gemm_fp8_baseline_cublaslt_supports(const GemmFp8Problem& p) {
  if (p.a_s1 != 1 || p.b_s1 != 1) return "gemm_fp8: cuBLASLt's FP8 kernels need A and B K-major (the TN form)";
  if (p.k % 16 != 0 || p.a_s0 % 16 != 0 || p.b_s0 % 16 != 0 || p.align_bytes < 16)
    return "gemm_fp8: cuBLASLt's FP8 kernels need K, the row strides and the bases of A and B in 16-byte units, got "
           "K=" + std::to_string(p.k);
  if (d_rows_16b(p) && p.d_align_bytes < 16)
    return "gemm_fp8: cuBLASLt's FP8 kernels need D 16-byte aligned, got " + std::to_string(p.d_align_bytes) +
           "-byte alignment";
  if (p.scaling == Fp8Scaling::kRow && ((p.sa_s0 != 1 && p.m > 1) || (p.sb_s0 != 1 && p.n > 1)))
    return "gemm_fp8: cuBLASLt's row-wise scale vectors must be contiguous";
  if (p.scaling == Fp8Scaling::kBlock && (p.k % kFp8ScaleBlock != 0 || p.m % 4 != 0))
    return "gemm_fp8: cuBLASLt's block-scaled kernels need K a multiple of 128 and M a multiple of 4, got " +
           std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k);
  for (int64_t v : {p.m, p.n, p.k, p.a_s0, p.b_s0, p.ldd})
    if (v > INT_MAX) return "gemm_fp8: cuBLASLt takes sizes below 2^31, got " + std::to_string(v);
  if (!no_gpu_reason().empty()) return "";  // the heuristic needs a device; the rules above are what is known
  std::lock_guard<std::mutex> lock(lt().mu);
  return plan_of(p).error;
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "baseline_cublaslt",
                    "cublasLtMatmul on e4m3/e5m2 with per-tensor, outer-vector (row-wise) or 1x128 / 128x128 "
                    "block f32 scales, BIAS epilogue, cached heuristic choice",
                    90, kFlagBaseline | kFlagProduction, gemm_fp8_baseline_cublaslt_supports, gemm_fp8_baseline_cublaslt_launch);

}  // namespace gemm_fp8_baseline_cublaslt
}  // namespace hk
