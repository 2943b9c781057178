// gemm/baseline_cublaslt.cu
//
// Peer: cublasLtMatmul with its fused epilogues (BIAS, RELU, RELU_BIAS, GELU, GELU_BIAS; Lt's
// GeLU is the tanh form), D separate from C so C_in is read without a copy. The heuristic's
// first algorithm is cached per problem shape, layout and operand alignment, so the timed call
// is one cublasLtMatmul. Row-major D = A B is issued as column-major D^T = B^T A^T; the bias
// (per column of D) is then per row of D^T, which is what Lt's bias epilogue broadcasts.
// Needs: M, N, K, leading dims and batch below 2^31; K >= 1.
// Run:   hk bench gemm --variant baseline_cublaslt --shape 4096x4096x4096
#include <cublasLt.h>

#include <climits>
#include <map>
#include <mutex>

#include "common/launch.cuh"
#include "core/cublas.hpp"
#include "core/scratch.hpp"
#include "gemm/epilogue.cuh"

namespace hk::gemm_baseline_cublaslt {
namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    HK_THROW(kCuda, "gemm/baseline_cublaslt: ", what, " failed: ", cublasGetStatusString(s));
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

int pointer_alignment(const void* p) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && addr % (2 * a) == 0) a *= 2;
  return a;
}

// Descriptors and the chosen algorithm for one problem, cached until
// hk::release_cached_resources().
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// The plans: built on first use, guarded by `mu` (a plan's bias pointer is set per call on the
// shared descriptor). The handle and the workspace are core/cublas.hpp's.
struct Lt {
  std::mutex mu;
  std::map<std::string, Plan> plans;

  void release() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [key, p] : plans) {
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c, p.d}) cublasLtMatrixLayoutDestroy(l);
      cublasLtMatmulDescDestroy(p.op);
    }
    plans.clear();
  }
};

// Never destroyed (see core/cublas.cpp); emptied by hk::release_cached_resources().
Lt& lt() {
  static Lt* state = [] {
    auto* s = new Lt;
    detail::on_release([s] { s->release(); });
    return s;
  }();
  return *state;
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t batch_stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), ld), "cublasLtMatrixLayoutCreate");
  int32_t count = static_cast<int32_t>(batch);
  check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), "batch count");
  check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                            sizeof(batch_stride)),
           "batch stride");
  return l;
}

// Under lt().mu.
Plan make_plan(const GemmArgs& g, int align_a, int align_b, int align_c, int align_d) {
  Plan p;
  check_lt(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // D^T = op(B') op(A'): see baseline_cublas.cu for the mapping.
  cublasOperation_t ta = g.b_col ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.a_col ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB");
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.act == GemmActivation::kRelu) epi = g.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else if (g.act == GemmActivation::kGelu) epi = g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  else if (g.bias) epi = CUBLASLT_EPILOGUE_BIAS;
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "EPILOGUE");
  if (g.bias) {
    int32_t bias_type = cuda_type(g.out_dtype);
    int64_t bias_stride = 0;  // one bias for every batch
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
             "BIAS_DATA_TYPE");
    check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride,
                                            sizeof(bias_stride)),
             "BIAS_BATCH_STRIDE");
  }
  const cudaDataType_t tin = cuda_type(g.in_dtype), tout = cuda_type(g.out_dtype);
  // Stored (column-major) shapes: B' is N x K (row-major B) or K x N (column-major B).
  p.a = g.b_col ? make_layout(tin, g.k, g.n, g.ldb, g.batch, g.batch_stride_b)
                : make_layout(tin, g.n, g.k, g.ldb, g.batch, g.batch_stride_b);
  p.b = g.a_col ? make_layout(tin, g.m, g.k, g.lda, g.batch, g.batch_stride_a)
                : make_layout(tin, g.k, g.m, g.lda, g.batch, g.batch_stride_a);
  p.d = make_layout(tout, g.n, g.m, g.ldc, g.batch, g.batch_stride_c);
  p.c = g.c_in ? make_layout(tout, g.n, g.m, g.ldc_in, g.batch, g.batch_stride_c_in)
               : make_layout(tout, g.n, g.m, g.ldc, g.batch, g.batch_stride_c);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  uint64_t ws = detail::kCublasLtWorkspaceBytes;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
           "MAX_WORKSPACE_BYTES");
  // Lt assumes 256-byte aligned operands unless told otherwise (B' is our A and so on).
  uint32_t al[4] = {uint32_t(align_b), uint32_t(align_a), uint32_t(align_c), uint32_t(align_d)};
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4), "ALIGN_A");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4), "ALIGN_B");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4), "ALIGN_C");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], 4), "ALIGN_D");
  // Split-K partial sums stay in f32 (in the workspace): by default Lt may also reduce them in
  // the output type, which rounds each partial to bf16/f16 before the sum.
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                                sizeof(reduction)),
           "REDUCTION_SCHEME_MASK");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check_lt(cublasLtMatmulAlgoGetHeuristic(detail::cublaslt_handle(), p.op, p.a, p.b, p.c, p.d, pref, 1, &result, &found),
           "cublasLtMatmulAlgoGetHeuristic");
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) HK_THROW(kNotSupported, "gemm/baseline_cublaslt: no cuBLASLt algorithm for this problem");
  p.algo = result.algo;
  return p;
}

void gemm_baseline_cublaslt_launch(const GemmArgs& g, cudaStream_t stream) {
  Lt& s = lt();
  const void* c = g.c_in ? g.c_in : g.c;
  int al_a = pointer_alignment(g.a), al_b = pointer_alignment(g.b), al_c = pointer_alignment(c),
      al_d = pointer_alignment(g.c);
  std::string key = std::to_string(g.m) + "_" + std::to_string(g.n) + "_" + std::to_string(g.k) + "_" +
                    std::to_string(g.batch) + "_" + std::to_string(g.lda) + "_" + std::to_string(g.ldb) + "_" +
                    std::to_string(g.ldc) + "_" + std::to_string(g.ldc_in) + "_" + std::to_string(g.batch_stride_a) +
                    "_" + std::to_string(g.batch_stride_b) + "_" + std::to_string(g.batch_stride_c) + "_" +
                    std::to_string(g.batch_stride_c_in) + "_" + std::to_string(g.a_col) + std::to_string(g.b_col) +
                    "_" + std::to_string(int(g.in_dtype)) + std::to_string(int(g.out_dtype)) + "_" +
                    std::to_string(int(g.act)) + std::to_string(g.bias != nullptr) + std::to_string(g.c_in != nullptr) +
                    "_" + std::to_string(al_a) + "_" + std::to_string(al_b) + "_" + std::to_string(al_c) + "_" +
                    std::to_string(al_d);
  Plan plan;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.plans.find(key);
    if (it == s.plans.end()) it = s.plans.emplace(key, make_plan(g, al_a, al_b, al_c, al_d)).first;
    plan = it->second;
    // The bias pointer changes per call; the descriptor is shared, so set it under the lock.
    if (g.bias)
      check_lt(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)),
               "BIAS_POINTER");
    const float alpha = g.alpha, beta = g.c_in ? g.beta : 0.0f;
    detail::StreamWorkspace ws(stream, detail::kCublasLtWorkspaceKey, detail::kCublasLtWorkspaceBytes);
    check_lt(cublasLtMatmul(detail::cublaslt_handle(), plan.op, &alpha, g.b, plan.a, g.a, plan.b, &beta, c, plan.c,
                            g.c, plan.d, &plan.algo, ws.get(), detail::kCublasLtWorkspaceBytes, stream),
             "cublasLtMatmul");
  }
}

std::string gemm_baseline_cublaslt_supports(const GemmProblem& p) {
  if (p.k < 1) return "cuBLASLt path needs K >= 1, got K=0";
  for (int64_t v : {p.m, p.n, p.k, p.batch, p.lda, p.ldb, p.ldc})
    if (v > INT_MAX) return "cuBLASLt takes 32-bit batch counts and sizes below 2^31, got " + std::to_string(v);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "baseline_cublaslt",
                    "cublasLtMatmul with fused BIAS/RELU/GELU epilogues, cached heuristic choice", 70, kFlagProduction,
                    gemm_baseline_cublaslt_supports, gemm_baseline_cublaslt_launch);

}  // namespace hk::gemm_baseline_cublaslt
