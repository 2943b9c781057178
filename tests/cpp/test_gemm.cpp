// GEMM beyond the registry sweep: bad input (CPU, fake pointers), TMA's rules and the public
// op's fallback, and the public op on the GPU with views the harness does not make (aliased
// C_in, broadcast batch, K = 0).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "gemm/gemm_op.hpp"
#include "hk/hk.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::download;
using hktest::expect_error;
using hktest::fake_ptr;
using hktest::upload;

TEST(GemmBadInput, WrongDtype) {
  TensorView a(fake_ptr(), DType::kF32, {8, 16}), b(fake_ptr(), DType::kF32, {16, 8}), c(fake_ptr(), DType::kF32, {8, 8});
  expect_error(ErrorKind::kType, "a is f32, expected bf16 or f16", [&] { hk::gemm(a, b, c); });
  TensorView ab(fake_ptr(), DType::kBF16, {8, 16}), bh(fake_ptr(), DType::kF16, {16, 8});
  expect_error(ErrorKind::kType, "b is f16 but a is bf16", [&] { hk::gemm(ab, bh, c); });
  TensorView bb(fake_ptr(), DType::kBF16, {16, 8}), ci(fake_ptr(), DType::kI32, {8, 8});
  expect_error(ErrorKind::kType, "c is i32", [&] { hk::gemm(ab, bb, ci); });
  TensorView bias(fake_ptr(), DType::kBF16, {8});
  hk::GemmOptions opt;
  opt.bias = &bias;
  expect_error(ErrorKind::kType, "bias is bf16 but c is f32", [&] { hk::gemm(ab, bb, c, opt); });
}

TEST(GemmBadInput, MismatchedShapes) {
  TensorView a(fake_ptr(), DType::kBF16, {8, 16}), b(fake_ptr(), DType::kBF16, {15, 8}), c(fake_ptr(), DType::kBF16, {8, 8});
  expect_error(ErrorKind::kValue, "K must match, got 16 and 15", [&] { hk::gemm(a, b, c); });
  TensorView b2(fake_ptr(), DType::kBF16, {16, 8}), c2(fake_ptr(), DType::kBF16, {8, 9});
  expect_error(ErrorKind::kValue, "c is [8, 9], expected [8, 8]", [&] { hk::gemm(a, b2, c2); });
  TensorView a3(fake_ptr(), DType::kBF16, {2, 8, 16}), c3(fake_ptr(), DType::kBF16, {3, 8, 8});
  expect_error(ErrorKind::kValue, "batch sizes differ", [&] { hk::gemm(a3, b2, c3); });
  TensorView bias(fake_ptr(), DType::kBF16, {9});
  hk::GemmOptions opt;
  opt.bias = &bias;
  expect_error(ErrorKind::kValue, "bias must be [8]", [&] { hk::gemm(a, b2, c, opt); });
  hk::GemmOptions beta;
  beta.beta = 1.0f;
  expect_error(ErrorKind::kValue, "no c_in", [&] { hk::gemm(a, b2, c, beta); });
}

TEST(GemmBadInput, NullPointerAndLayouts) {
  TensorView a(nullptr, DType::kBF16, {8, 16}), b(fake_ptr(), DType::kBF16, {16, 8}), c(fake_ptr(), DType::kBF16, {8, 8});
  expect_error(ErrorKind::kValue, "a is a null pointer with 128 elements", [&] { hk::gemm(a, b, c); });
  TensorView a2(fake_ptr(), DType::kBF16, {8, 16}, {32, 2});  // no unit stride
  expect_error(ErrorKind::kNotSupported, "unit stride", [&] { hk::gemm(a2, b, c); });
  TensorView ccol(fake_ptr(), DType::kBF16, {8, 8}, {1, 8});  // C must be row-major
  TensorView a3(fake_ptr(), DType::kBF16, {8, 16});
  expect_error(ErrorKind::kNotSupported, "row-major", [&] { hk::gemm(a3, b, ccol); });
  TensorView coverlap(fake_ptr(), DType::kBF16, {8, 8}, {4, 1});
  expect_error(ErrorKind::kValue, "leading stride 4 is smaller", [&] { hk::gemm(a3, b, coverlap); });
}

TEST(GemmBadInput, EmptyOutputIsANoOp) {
  TensorView a(nullptr, DType::kBF16, {0, 16}), b(fake_ptr(), DType::kBF16, {16, 8}), c(nullptr, DType::kBF16, {0, 8});
  EXPECT_NO_THROW(hk::gemm(a, b, c));
}

TEST(GemmTma, MisalignedKIsNotSupportedWithTheReason) {
  hk::GemmProblem p(128, 256, 1001, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(hk::gemm_tma_supports(p, true), "gemm: K*2 bytes must be a multiple of 16 for TMA, got K=1001");
  hk::GemmProblem col(100, 256, 64, 1, DType::kF16, DType::kF16, true, false);
  EXPECT_EQ(hk::gemm_tma_supports(col, true), "gemm: M*2 bytes must be a multiple of 16 for TMA, got M=100");
  hk::GemmProblem padded(128, 256, 64, 1, DType::kBF16, DType::kF32, false, false, 3);
  EXPECT_EQ(hk::gemm_tma_supports(padded, true), "gemm: lda*2 bytes must be a multiple of 16 for TMA, got lda=67");
  hk::GemmProblem out(128, 250, 64, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(hk::gemm_tma_supports(out, true), "gemm: N*2 bytes must be a multiple of 16 for TMA, got N=250");
  EXPECT_EQ(hk::gemm_tma_supports(out, false), "");  // C is stored by threads: any N
  // C's rows padded to 16 bytes but N*2 not a multiple of 16: a TMA store would write into the
  // padding up to the next 16-byte boundary, so the TMA-store rungs decline; thread stores don't.
  hk::GemmProblem odd_n(136, 263, 127, 1, DType::kF16, DType::kF16, false, true, 9);
  EXPECT_EQ(hk::gemm_tma_supports(odd_n, true),
            "gemm: TMA stores write whole 16-byte units: N*2 bytes must be a multiple of 16 when C's rows are padded, "
            "got N=263 with ldc=272");
  EXPECT_EQ(hk::gemm_tma_supports(odd_n, false), "");
  hk::GemmProblem ok(113, 200, 808, 1, DType::kBF16, DType::kF32, true, true);
  ok.m = 120, ok.lda = 120, ok.batch_stride_a = 120 * 808;  // column-major A: M is the leading extent
  EXPECT_EQ(hk::gemm_tma_supports(ok, true), "");
  hk::GemmProblem unaligned(128, 256, 64, 1, DType::kBF16, DType::kBF16, false, true);
  unaligned.align_bytes = 8;
  EXPECT_NE(hk::gemm_tma_supports(unaligned, true).find("16-byte aligned"), std::string::npos);
}

TEST(GemmCpAsync, RulesNameTheReason) {
  hk::GemmProblem k799(113, 203, 799, 1, DType::kBF16, DType::kF32, false, true);
  EXPECT_EQ(hk::gemm_cp_async_supports(k799, 128), "gemm: K*2 bytes must be a multiple of 16 for cp.async, got K=799");
  hk::GemmProblem col(113, 200, 808, 1, DType::kF16, DType::kF16, true, false);
  EXPECT_EQ(hk::gemm_cp_async_supports(col, 128), "gemm: M*2 bytes must be a multiple of 16 for cp.async, got M=113");
  hk::GemmProblem padded(128, 256, 64, 1, DType::kBF16, DType::kBF16, false, false, 3);
  EXPECT_EQ(hk::gemm_cp_async_supports(padded, 128), "gemm: lda*2 bytes must be a multiple of 16 for cp.async, got lda=67");
  hk::GemmProblem batched(64, 72, 136, 3, DType::kBF16, DType::kBF16, false, true, 8);
  EXPECT_EQ(hk::gemm_cp_async_supports(batched, 128), "");
  batched.batch_stride_b = 1001;
  EXPECT_EQ(hk::gemm_cp_async_supports(batched, 128),
            "gemm: b's batch stride must be a multiple of 16 bytes for cp.async, got 1001 elements");
  batched.batch_stride_b = 0;  // a broadcast B: fine for cp.async (TMA refuses it)
  EXPECT_EQ(hk::gemm_cp_async_supports(batched, 128), "");
  hk::GemmProblem unaligned(128, 256, 64, 1, DType::kBF16, DType::kBF16, false, true);
  unaligned.align_bytes = 8;
  EXPECT_EQ(hk::gemm_cp_async_supports(unaligned, 128), "gemm: cp.async needs 16-byte aligned operands, got 8-byte alignment");
  hk::GemmProblem tall(128 * 65536, 8, 64, 1, DType::kBF16, DType::kBF16, false, false);
  EXPECT_NE(hk::gemm_cp_async_supports(tall, 128).find("limited to 65535"), std::string::npos);
  // Odd N is fine: C is stored by threads, and B's leading dim is what cp.async reads.
  hk::GemmProblem odd_n(113, 203, 808, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(hk::gemm_cp_async_supports(odd_n, 128), "");
}

// The dispatch never hands a public call to a teaching rung: TMA-hostile shapes (odd K, N, M,
// unaligned views, broadcast batches, K = 0) go to the packing rung, never down the ladder.
TEST(GemmDispatch, TmaHostileShapesArePackedNotSentDownTheLadder) {
  auto& reg = hk::Registry::get();
  hk::GemmProblem odd_k(4096, 4096, 4095, 1, DType::kBF16, DType::kBF16, false, true);
  hk::Choice c = reg.choose(odd_k);
  EXPECT_EQ(c.variant->name(), "v19_aligned_pack");
  ASSERT_EQ(c.declined.size(), 1u);
  EXPECT_EQ(c.declined[0].first, "v18_stream_k_tail");
  EXPECT_EQ(c.declined[0].second, "gemm: K*2 bytes must be a multiple of 16 for TMA, got K=4095");
  hk::GemmProblem odd_n(113, 203, 808, 1, DType::kF16, DType::kF16, false, false);
  EXPECT_EQ(reg.pick(odd_n).name(), "v19_aligned_pack");
  hk::GemmProblem unaligned(256, 256, 256, 1, DType::kBF16, DType::kBF16, true, false);
  unaligned.align_bytes = 2;
  EXPECT_EQ(reg.pick(unaligned).name(), "v19_aligned_pack");
  hk::GemmProblem broadcast(64, 72, 136, 3, DType::kBF16, DType::kBF16, false, true);
  broadcast.batch_stride_b = 0;
  EXPECT_EQ(reg.pick(broadcast).name(), "v19_aligned_pack");
  hk::GemmProblem k0(8, 8, 0, 1, DType::kBF16, DType::kBF16, false, false);
  EXPECT_EQ(reg.pick(k0).name(), "v19_aligned_pack");
  // A decode shape with a K tail: v17 declines the unaligned rows, the copies then take the
  // decode route.
  hk::GemmProblem decode_tail(16, 4096, 4095, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(reg.pick(decode_tail).name(), "v19_aligned_pack");
  // Past TMA's 32-bit coordinates, cuBLAS (it takes int sizes: M = 2^31 + 1 is beyond both).
  hk::GemmProblem huge(int64_t(1) << 31, 8, 8, 1, DType::kBF16, DType::kBF16, false, false);
  EXPECT_THROW(reg.choose(huge), hk::Error);
}

// `hk bench gemm --shape MxNxK[xBATCH][:layout][:epilogue]`: the layout defaults to nt (x W^T);
// without an explicit epilogue, the fused-epilogue rows come with the default nt 4096^3 only.
TEST(GemmBench, ShapesAndLayouts) {
  const hk::Family* f = hk::Registry::get().family("gemm");
  ASSERT_NE(f, nullptr);
  hk::BenchSelect sel;
  sel.shapes = {"4096x4096x4096:tn", "17x9x33", "64x32x16x3:tt", "8x8x8:nn"};
  sel.dtypes = {DType::kF16};
  std::vector<std::string> keys;
  for (auto& p : f->bench_problems(sel)) keys.push_back(p->key());
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[0], "m4096_n4096_k4096_tn_f16_f16");
  EXPECT_EQ(keys[1], "m17_n9_k33_nt_f16_f16");
  EXPECT_NE(keys[2].find("_tt_f16_f16"), std::string::npos) << keys[2];
  EXPECT_NE(keys[2].find("m64_n32_k16"), std::string::npos) << keys[2];
  EXPECT_EQ(keys[3], "m8_n8_k8_nn_f16_f16");
  sel.shapes = {"4096x4096x4096"};
  sel.dtypes = {DType::kBF16};
  EXPECT_EQ(f->bench_problems(sel).size(), 3u);  // plain, bias + GeLU, ReLU
  sel.shapes = {"4096x4096x4096:nt"};
  EXPECT_EQ(f->bench_problems(sel).size(), 3u);  // an explicit nt is the default layout
  sel.shapes = {"4096x4096x4096:tn"};
  EXPECT_EQ(f->bench_problems(sel).size(), 1u);  // the epilogue rows come with nt only
  sel.shapes = {"64x64x64:nc"};
  expect_error(ErrorKind::kValue, "layout must be", [&] { f->bench_problems(sel); });
  sel.shapes = {"64x64x64:nt:nn"};
  expect_error(ErrorKind::kValue, "each at most once", [&] { f->bench_problems(sel); });
  // An explicit epilogue, after or before the layout: that problem alone.
  sel.shapes = {"64x8192x8192:bias_gelu", "16x256x256:relu:nn", "4096x4096x4096:nt:bias"};
  auto eps = f->bench_problems(sel);
  ASSERT_EQ(eps.size(), 3u);
  EXPECT_EQ(eps[0]->key(), "m64_n8192_k8192_nt_bf16_bf16_bias_gelu");
  EXPECT_EQ(eps[1]->key(), "m16_n256_k256_nn_bf16_bf16_relu");
  EXPECT_EQ(eps[2]->key(), "m4096_n4096_k4096_nt_bf16_bf16_bias");
  sel.shapes = {"64x64:nt"};
  expect_error(ErrorKind::kValue, "shape must be", [&] { f->bench_problems(sel); });
}

// Every test and bench problem is served by a production rung, and the choice is explainable.
TEST(GemmDispatch, EveryProblemTakesAProductionRung) {
  auto& reg = hk::Registry::get();
  const hk::Family* f = reg.family("gemm");
  ASSERT_NE(f, nullptr);
  std::vector<hk::ProblemPtr> all = f->test_problems();
  for (bool quick : {false, true}) {
    hk::BenchSelect sel;
    sel.quick = quick;
    for (auto& p : f->bench_problems(sel)) all.push_back(p);
  }
  for (auto& p : all) {
    hk::Choice c = reg.choose(*p);
    EXPECT_TRUE(c.variant->is(hk::kFlagProduction)) << p->key() << " -> " << c.variant->name();
    EXPECT_FALSE(c.why.empty()) << p->key();
    EXPECT_NE(reg.explain(*p).find(c.variant->name()), std::string::npos);
  }
  // The teaching rungs are ladder-only.
  for (const char* name : {"v01_naive", "v04_register_tiling_2d", "v06_mma_sync_ldmatrix", "v08_wgmma_tma_pipeline",
                           "v16_pingpong_consumers"})
    EXPECT_FALSE(reg.variant("gemm", name)->is(hk::kFlagProduction)) << name;
}

// The wgmma teaching rungs compile what their ladder rows measure, bf16 "nt", and name what they
// decline; the production rungs (v15's kernels under v18) take f16 and every layout.
TEST(GemmTeachingRungs, CompiledForTheirLadderRowsOnly) {
  auto& reg = hk::Registry::get();
  hk::GemmProblem bf16(256, 256, 256, 1, DType::kBF16, DType::kBF16, false, true);
  hk::GemmProblem f16(256, 256, 256, 1, DType::kF16, DType::kF16, false, true);
  hk::GemmProblem tn(256, 256, 256, 1, DType::kBF16, DType::kBF16, true, false);
  for (const char* name : {"v07_wgmma", "v08_wgmma_tma_pipeline", "v09_warp_specialized", "v10_cluster_multicast",
                           "v11_persistent", "v12_tma_store_epilogue", "v13_wgmma_in_flight", "v14_lean_sync_epilogue",
                           "v16_pingpong_consumers"}) {
    const hk::Variant* v = reg.variant("gemm", name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->supports(bf16), "") << name;
    EXPECT_NE(v->supports(f16).find("bf16 inputs only (a teaching rung); got f16"), std::string::npos)
        << name << ": " << v->supports(f16);
    EXPECT_NE(v->supports(tn).find("nt layout only"), std::string::npos) << name << ": " << v->supports(tn);
  }
  for (const char* name : {"v15_fused_fast_epilogue", "v18_stream_k_tail"}) {
    EXPECT_EQ(reg.variant("gemm", name)->supports(f16), "") << name;
    EXPECT_EQ(reg.variant("gemm", name)->supports(tn), "") << name;
  }
}

// v17_skinny_m_splitk, the decode-shape default: what it declines and why, and that pick()
// sends decode shapes to it and everything else on to v18.
TEST(GemmSkinny, SupportsNamesTheReason) {
  const hk::Variant* v = hk::Registry::get().variant("gemm", "v17_skinny_m_splitk");
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->is(hk::kFlagProduction));
  for (int64_t m : {1, 7, 16, 17, 32}) {
    hk::GemmProblem p(m, 263, 136, 1, DType::kBF16, DType::kF32, false, true);
    EXPECT_EQ(v->supports(p), "") << "M=" << m;
  }
  hk::GemmProblem tall(33, 256, 256, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(v->supports(tall), "gemm: v17 serves decode shapes (M <= 32), got M=33");
  hk::GemmProblem nn(16, 256, 256, 1, DType::kBF16, DType::kBF16, false, false);
  EXPECT_EQ(v->supports(nn),
            "gemm: v17 serves the \"nt\" layout (row-major A, column-major B: a [N, K] weight), got \"nn\"");
  hk::GemmProblem k_tail(16, 256, 127, 1, DType::kF16, DType::kF16, false, true);
  EXPECT_EQ(v->supports(k_tail), "gemm: K*2 bytes must be a multiple of 16 for cp.async, got K=127");
  hk::GemmProblem k_padded(16, 256, 127, 1, DType::kF16, DType::kF16, false, true, 9);  // ld 136
  EXPECT_EQ(v->supports(k_padded), "");
  hk::GemmProblem unaligned(16, 256, 256, 1, DType::kBF16, DType::kBF16, false, true);
  unaligned.align_bytes = 8;
  EXPECT_EQ(v->supports(unaligned), "gemm: cp.async needs 16-byte aligned operands, got 8-byte alignment");
  hk::GemmProblem batched(16, 256, 256, 3, DType::kBF16, DType::kBF16, false, true);
  batched.batch_stride_b = 0;  // one weight broadcast over the batch
  EXPECT_EQ(v->supports(batched), "");
  batched.batch_stride_a = 1001;
  EXPECT_EQ(v->supports(batched), "gemm: a's batch stride must be a multiple of 16 bytes for cp.async, got 1001 elements");
}

TEST(GemmSkinny, PickSendsDecodeShapesByEpilogueAndTheRestToV18) {
  auto& reg = hk::Registry::get();
  // A plain decode product: cuBLAS streams B faster than v17 (the dispatch's measured reason).
  hk::GemmProblem decode(16, 8192, 8192, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(reg.pick(decode).name(), "baseline_cublas");
  // The same rows with a fused epilogue: v17, which cuBLAS would need a second pass for.
  hk::GemmProblem decode_gelu = decode;
  decode_gelu.act = hk::GemmActivation::kGelu;
  EXPECT_EQ(reg.pick(decode_gelu).name(), "v17_skinny_m_splitk");
  // The dispatch tries v17 before v18, which can run these shapes too.
  EXPECT_EQ(reg.variant("gemm", "v18_stream_k_tail")->supports(decode_gelu), "");
  // f16 at M = 1, where v17 measured faster than cuBLAS.
  hk::GemmProblem one(1, 4096, 4096, 1, DType::kF16, DType::kF16, false, true);
  EXPECT_EQ(reg.pick(one).name(), "v17_skinny_m_splitk");
  hk::GemmProblem one_bf16(1, 4096, 4096, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(reg.pick(one_bf16).name(), "baseline_cublas");
  // x W with W stored [K, N]: v17 reads nt only, and v18's 128-row tiles ran 0.43x cuBLAS.
  hk::GemmProblem decode_nn(16, 8192, 8192, 1, DType::kBF16, DType::kBF16, false, false);
  EXPECT_EQ(reg.pick(decode_nn).name(), "baseline_cublas");
  decode_nn.has_bias = true;
  EXPECT_EQ(reg.pick(decode_nn).name(), "baseline_cublas");
  // Few output tiles (32 here, for 66 clusters): cuBLAS; with a bias or activation cuBLASLt's
  // fused epilogue, unless C_in or an output dtype other than the input's asks for the pass.
  hk::GemmProblem skinny(64, 8192, 8192, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(reg.pick(skinny).name(), "baseline_cublas");
  skinny.act = hk::GemmActivation::kRelu;
  EXPECT_EQ(reg.pick(skinny).name(), "baseline_cublaslt");
  skinny.beta = 1.0f;
  EXPECT_EQ(reg.pick(skinny).name(), "baseline_cublas");
  hk::GemmProblem skinny_f32(64, 8192, 8192, 1, DType::kBF16, DType::kF32, false, true);
  skinny_f32.has_bias = true;
  EXPECT_EQ(reg.pick(skinny_f32).name(), "baseline_cublas");
  // Small plain products: cuBLAS; with an epilogue over K <= 2048: cuBLASLt's fused epilogue;
  // C_in there, or above 2^36 flops and K = 4096: v18.
  hk::GemmProblem small(2048, 2048, 2048, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(reg.pick(small).name(), "baseline_cublas");
  small.has_bias = true;
  EXPECT_EQ(reg.pick(small).name(), "baseline_cublaslt");
  small.beta = 1.0f;
  EXPECT_EQ(reg.pick(small).name(), "v18_stream_k_tail");
  hk::GemmProblem square(4096, 4096, 4096, 1, DType::kBF16, DType::kBF16, false, true);
  EXPECT_EQ(reg.pick(square).name(), "v18_stream_k_tail");
  square.act = hk::GemmActivation::kGelu;
  square.has_bias = true;
  EXPECT_EQ(reg.pick(square).name(), "v18_stream_k_tail");
}

// C_in aliasing C (in-place C = A B + C) through the public op, default rung and fallback.
TEST(GemmPublic, InPlaceAccumulateIntoC) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (int64_t k : {512, 799}) {  // 799: not TMA-able, exercises the fallback
    hk::GemmProblem p(136, 264, k, 1, DType::kBF16, DType::kF32, false, true);
    p.beta = 1.0f, p.small_int = true;
    auto specs = p.inputs();
    std::vector<hk::HostTensor> in;
    for (size_t i = 0; i < specs.size(); ++i) in.push_back(hk::host::random_tensor(specs[i], 7 + i));
    auto da = upload(specs[0], in[0].values), db = upload(specs[1], in[1].values), dc = upload(specs[2], in[2].values);
    TensorView a(da.get(), DType::kBF16, specs[0].shape, specs[0].strides);
    TensorView b(db.get(), DType::kBF16, specs[1].shape, specs[1].strides);
    TensorView c(dc.get(), DType::kF32, specs[2].shape, specs[2].strides);
    hk::GemmOptions opt;
    opt.beta = 1.0f, opt.c_in = &c;
    hk::gemm(a, b, c, opt);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<hk::HostTensor> out = {{p.outputs()[0], std::vector<double>(p.m * p.n)}};
    p.reference(in, out);
    auto r = hk::bench::compare(p.outputs()[0], download(p.outputs()[0], dc.get()), out[0].values, p.tolerance(0));
    EXPECT_TRUE(r.ok) << "K=" << k << ": " << r.message;
  }
}

// A batch stride of 0 broadcasts one B (a weight) over the batch; K = 0 gives act(bias).
TEST(GemmPublic, BroadcastBatchAndEmptyK) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t batch = 3, m = 64, n = 128, k = 256;
  hk::GemmProblem p(m, n, k, batch, DType::kF16, DType::kF16, false, true);
  p.small_int = true;
  auto specs = p.inputs();
  hk::HostTensor a = hk::host::random_tensor(specs[0], 11);
  hk::TensorSpec b1{"b", DType::kF16, {k, n}, {1, k}, hk::Dist::kSmallInt, 3.0, {}};
  hk::HostTensor b = hk::host::random_tensor(b1, 12);
  auto da = upload(specs[0], a.values), db = upload(b1, b.values);
  hk::bench::DeviceBuffer dc(batch * m * n * 2);
  hk::gemm(TensorView(da.get(), DType::kF16, specs[0].shape, specs[0].strides),
           TensorView(db.get(), DType::kF16, {batch, k, n}, {0, 1, k}),
           TensorView(dc.get(), DType::kF16, {batch, m, n}));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  hk::HostTensor bb{specs[1], {}};
  for (int64_t i = 0; i < batch; ++i) bb.values.insert(bb.values.end(), b.values.begin(), b.values.end());
  std::vector<hk::HostTensor> in = {a, bb}, out = {{p.outputs()[0], std::vector<double>(batch * m * n)}};
  p.reference(in, out);
  hk::TensorSpec cspec{"c", DType::kF16, {batch, m, n}, {}, hk::Dist::kNormal, 1, {}};
  auto r = hk::bench::compare(cspec, download(cspec, dc.get()), out[0].values, p.tolerance(0));
  EXPECT_TRUE(r.ok) << r.message;

  // K = 0: C = relu(bias).
  hk::TensorSpec bias_spec{"bias", DType::kF32, {n}, {}, hk::Dist::kSmallInt, 3.0, {}};
  hk::HostTensor bias = hk::host::random_tensor(bias_spec, 13);
  auto dbias = upload(bias_spec, bias.values);
  hk::bench::DeviceBuffer d0(m * n * 4);
  hk::GemmOptions opt;
  TensorView bias_view(dbias.get(), DType::kF32, {n});
  opt.bias = &bias_view, opt.act = hk::GemmActivation::kRelu;
  hk::gemm(TensorView(da.get(), DType::kF16, {m, 0}), TensorView(db.get(), DType::kF16, {0, n}),
           TensorView(d0.get(), DType::kF32, {m, n}), opt);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  hk::TensorSpec c0{"c", DType::kF32, {m, n}, {}, hk::Dist::kNormal, 1, {}};
  auto got = download(c0, d0.get());
  for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(got[i], std::max(0.0, bias.values[i % n])) << i;
}

// ---- host-side encodings of the Hopper rungs (checkable without a GPU) ----------------------

#include <map>
#include <set>
#include <tuple>

#include "common/ptx/mma_layout.hpp"
#include "common/ptx/smem_desc.hpp"
#include "common/sched/stream_k.hpp"
#include "common/sched/tile_scheduler.hpp"

namespace {

// An element's identity in a simulated operand: (row, col) of the logical matrix.
int element_id(int row, int col) { return row * 1000 + col; }

// ldmatrix.x4 as the PTX ISA defines it, on a simulated shared tile: lane l's register q, half h
// is element ldmatrix_element(l, h, trans) of matrix q, whose rows lanes 8q..8q+7 address.
int simulated_ldmatrix(const std::vector<int>& smem, const std::vector<int>& row_addr, int lane, int q, int h,
                       bool trans) {
  const hk::ptx::RowCol e = hk::ptx::ldmatrix_element(lane, h, trans);
  return smem.at(row_addr.at(8 * q + e.row) + e.col);
}

// The 16-byte bank group (0..7) of each of the 8 rows of matrix q: all different when the
// ldmatrix phase is conflict-free.
std::set<int> bank_groups(const std::vector<int>& row_addr, int q) {
  std::set<int> groups;
  for (int r = 0; r < 8; ++r) groups.insert((row_addr[8 * q + r] * 2 / 16) % 8);
  return groups;
}

}  // namespace

TEST(GemmMmaLayout, LdmatrixRowsProduceTheMmaAFragments) {
  // A 128 x 32 (m, k) tile stored K-major ([m][k], plain ldmatrix) or M-major ([k][m], .trans),
  // padded as v06 pads it; the block at (m0, k0) = (48, 16) (warp row 0, m16 tile 3, k step 1).
  for (bool k_major : {true, false}) {
    const int rows = k_major ? 128 : 32, cols = k_major ? 32 : 128, pitch = hk::ptx::padded_pitch(cols);
    std::vector<int> smem(rows * pitch, -1);
    for (int m = 0; m < 128; ++m)
      for (int k = 0; k < 32; ++k) smem[k_major ? m * pitch + k : k * pitch + m] = element_id(m, k);
    const int m0 = 48, k0 = 16, r0 = k_major ? m0 : k0, c0 = k_major ? k0 : m0;
    std::vector<int> addr(32);
    for (int lane = 0; lane < 32; ++lane) {
      const hk::ptx::RowCol rc = hk::ptx::ldmatrix_a_row(lane, k_major);
      addr[lane] = (r0 + rc.row) * pitch + c0 + rc.col;
      EXPECT_EQ(addr[lane] % 8, 0) << "16-byte aligned rows";
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int q = 0; q < 4; ++q)
        for (int h = 0; h < 2; ++h) {
          const hk::ptx::RowCol want = hk::ptx::mma_a_element(lane, 2 * q + h);
          EXPECT_EQ(simulated_ldmatrix(smem, addr, lane, q, h, !k_major), element_id(m0 + want.row, k0 + want.col))
              << (k_major ? "K-major" : "M-major") << " lane " << lane << " register " << q << " half " << h;
        }
    for (int q = 0; q < 4; ++q) EXPECT_EQ(bank_groups(addr, q).size(), 8u) << "matrix " << q;
  }
}

TEST(GemmMmaLayout, LdmatrixRowsProduceTheMmaBFragments) {
  // A 32 x 128 (k, n) tile stored K-major ([n][k], plain) or N-major ([k][n], .trans); the two
  // n8 blocks at (k0, n0) = (16, 112) (warp column 3, its n8 tiles 2 and 3, k step 1).
  for (bool k_major : {true, false}) {
    const int rows = k_major ? 128 : 32, cols = k_major ? 32 : 128, pitch = hk::ptx::padded_pitch(cols);
    std::vector<int> smem(rows * pitch, -1);
    for (int k = 0; k < 32; ++k)
      for (int n = 0; n < 128; ++n) smem[k_major ? n * pitch + k : k * pitch + n] = element_id(k, n);
    const int k0 = 16, n0 = 112, r0 = k_major ? n0 : k0, c0 = k_major ? k0 : n0;
    std::vector<int> addr(32);
    for (int lane = 0; lane < 32; ++lane) {
      const hk::ptx::RowCol rc = hk::ptx::ldmatrix_b_row(lane, k_major);
      addr[lane] = (r0 + rc.row) * pitch + c0 + rc.col;
      EXPECT_EQ(addr[lane] % 8, 0) << "16-byte aligned rows";
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int q = 0; q < 4; ++q)
        for (int h = 0; h < 2; ++h) {
          // Registers 0, 1: the fragment of n8 block 0; 2, 3: of block 1.
          const hk::ptx::RowCol want = hk::ptx::mma_b_element(lane, 2 * (q % 2) + h);
          EXPECT_EQ(simulated_ldmatrix(smem, addr, lane, q, h, !k_major),
                    element_id(k0 + want.row, n0 + 8 * (q / 2) + want.col))
              << (k_major ? "K-major" : "N-major") << " lane " << lane << " register " << q << " half " << h;
        }
    for (int q = 0; q < 4; ++q) EXPECT_EQ(bank_groups(addr, q).size(), 8u) << "matrix " << q;
  }
}

TEST(GemmMmaLayout, FragmentTablesCoverEachTileOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      auto x = hk::ptx::mma_a_element(lane, e);
      a.insert({x.row, x.col});
    }
    for (int e = 0; e < 4; ++e) {
      auto y = hk::ptx::mma_b_element(lane, e);
      auto z = hk::ptx::mma_c_element(lane, e);
      b.insert({y.row, y.col});
      c.insert({z.row, z.col});
    }
  }
  EXPECT_EQ(a.size(), 256u);  // 16 x 16
  EXPECT_EQ(b.size(), 128u);  // 16 x 8
  EXPECT_EQ(c.size(), 128u);  // 16 x 8
  // Spot checks of the PTX ISA's formulas: lane 5 (g 1, t 1) holds A (1, 2), (9, 3), (9, 10) ...
  EXPECT_EQ(hk::ptx::mma_a_element(5, 0).row, 1);
  EXPECT_EQ(hk::ptx::mma_a_element(5, 0).col, 2);
  EXPECT_EQ(hk::ptx::mma_a_element(5, 3).row, 9);
  EXPECT_EQ(hk::ptx::mma_a_element(5, 3).col, 3);
  EXPECT_EQ(hk::ptx::mma_a_element(5, 6).row, 9);
  EXPECT_EQ(hk::ptx::mma_a_element(5, 6).col, 10);
  // ... B (k 2, n 1) and (k 11, n 1), C (1, 2) and (9, 3).
  EXPECT_EQ(hk::ptx::mma_b_element(5, 0).row, 2);
  EXPECT_EQ(hk::ptx::mma_b_element(5, 3).row, 11);
  EXPECT_EQ(hk::ptx::mma_b_element(5, 3).col, 1);
  EXPECT_EQ(hk::ptx::mma_c_element(5, 3).row, 9);
  EXPECT_EQ(hk::ptx::mma_c_element(5, 3).col, 3);
}

TEST(GemmMmaLayout, PaddedRowsKeepColumnReadsConflictFree) {
  // v05's 16-byte reads down a column (8 threads, 8 consecutive rows) and v06's ldmatrix rows:
  // the 16-byte padding makes any row length that is a multiple of 16 elements an odd number of
  // 16-byte chunks, so 8 consecutive rows start in 8 different bank groups.
  for (int elems : {16, 32, 64, 128, 256}) {
    const int pitch_bytes = hk::ptx::padded_pitch(elems) * 2;
    EXPECT_EQ(pitch_bytes % 16, 0);
    for (int chunk = 0; chunk < elems / 8; ++chunk) {
      std::set<int> groups;
      for (int r = 0; r < 8; ++r) groups.insert((r * pitch_bytes / 16 + chunk) % 8);
      EXPECT_EQ(groups.size(), 8u) << elems << " elements, chunk " << chunk;
    }
  }
}

TEST(GemmWgmmaDescriptor, BitFields) {
  // start 0x12400 >> 4 in bits 0-13, LBO 8192 >> 4 in 16-29, SBO 1024 >> 4 in 32-45, 128B swizzle
  // (1) in bits 62-63, base offset 0.
  const uint64_t d = hk::ptx::make_smem_desc_sw128(0x12400, 8192, 1024);
  EXPECT_EQ(d & 0x3FFF, 0x1240u);
  EXPECT_EQ((d >> 16) & 0x3FFF, 512u);
  EXPECT_EQ((d >> 32) & 0x3FFF, 64u);
  EXPECT_EQ((d >> 49) & 0x7, 0u);
  EXPECT_EQ(d >> 62, 1u);
  EXPECT_EQ(d, uint64_t(0x1240) | uint64_t(512) << 16 | uint64_t(64) << 32 | uint64_t(1) << 62);
  // K steps: +32 bytes (K-major, inside the swizzled row) is +2 in the start field; +2048
  // (MN-major, 16 rows of 128 bytes) is +128; neither touches the other fields.
  EXPECT_EQ(hk::ptx::make_smem_desc_sw128(0x12400 + 32, 16, 1024) - hk::ptx::make_smem_desc_sw128(0x12400, 16, 1024), 2u);
  EXPECT_EQ(hk::ptx::make_smem_desc_sw128(0x12400 + 2048, 8192, 1024) - d, 128u);
  // The whole 227 KB window fits the 14-bit field (addresses are 16-byte units).
  EXPECT_EQ(hk::ptx::make_smem_desc_sw128(232448 - 16, 0, 0) & 0x3FFF, (232448 - 16) >> 4);
}

TEST(GemmWgmmaDescriptor, Swizzle128BMatchesTheTmaPattern) {
  // 16-byte chunk c of row r lands at chunk c ^ (r % 8); bytes inside a chunk stay put; each
  // 1024-byte atom (8 rows) is a permutation of itself.
  for (uint32_t atom = 0; atom < 2; ++atom) {
    std::set<uint32_t> seen;
    for (uint32_t r = 8 * atom; r < 8 * atom + 8; ++r)
      for (uint32_t b = 0; b < 128; ++b) {
        uint32_t off = hk::ptx::swizzle_128b_offset(r, b);
        EXPECT_EQ(off / 128, r);
        EXPECT_EQ((off % 128) / 16, (b / 16) ^ (r % 8));
        EXPECT_EQ(off % 16, b % 16);
        seen.insert(off);
      }
    EXPECT_EQ(seen.size(), 1024u);
  }
  // A warp's epilogue writes (lane l: row l/4, bytes 4(l%4) + 16j) hit 32 different banks.
  for (uint32_t j = 0; j < 8; ++j) {
    std::set<uint32_t> banks;
    for (uint32_t l = 0; l < 32; ++l) banks.insert((hk::ptx::swizzle_128b_offset(l / 4, 4 * (l % 4) + 16 * j) / 4) % 32);
    EXPECT_EQ(banks.size(), 32u) << "column octet " << j;
  }
}

TEST(GemmWgmmaDescriptor, NarrowSwizzles) {
  // 64-byte swizzle: mode 2 in bits 62-63; 32-byte: mode 3; the other fields as for 128 bytes.
  const uint64_t d64 = hk::ptx::make_smem_desc_sw64(0x12400, 8192, 512);
  EXPECT_EQ(d64, uint64_t(0x1240) | uint64_t(512) << 16 | uint64_t(32) << 32 | uint64_t(2) << 62);
  const uint64_t d32 = hk::ptx::make_smem_desc_sw32(0x12400, 16, 256);
  EXPECT_EQ(d32, uint64_t(0x1240) | uint64_t(1) << 16 | uint64_t(16) << 32 | uint64_t(3) << 62);
  EXPECT_EQ(hk::ptx::make_smem_desc_swizzled(0x12400, 8192, 1024, 128), hk::ptx::make_smem_desc_sw128(0x12400, 8192, 1024));
  // The offsets are CuTe's Swizzle<B, 4, 3> (byte bits [4, 4 + B) ^= bits [7, 7 + B)) of the
  // dense row-major offset: B = 2 for 64-byte rows, 1 for 32-byte rows, 3 for 128-byte rows.
  auto sw = [](uint32_t a, uint32_t b) { return a ^ ((a >> 3) & (((1u << b) - 1) << 4)); };
  for (uint32_t r = 0; r < 32; ++r)
    for (uint32_t c = 0; c < 128; ++c) {
      if (c < 32) {
        EXPECT_EQ(hk::ptx::swizzle_32b_offset(r, c), sw(r * 32 + c, 1)) << r << " " << c;
      }
      if (c < 64) {
        EXPECT_EQ(hk::ptx::swizzle_64b_offset(r, c), sw(r * 64 + c, 2)) << r << " " << c;
      }
      EXPECT_EQ(hk::ptx::swizzle_128b_offset(r, c), sw(r * 128 + c, 3)) << r << " " << c;
    }
}

TEST(GemmTileScheduler, CoversEveryTileOnceInGroupedOrder) {
  for (int cluster : {1, 2})
    for (int64_t group : {1, 3, 8})
      for (auto [mb, nb, batch] : {std::tuple<int64_t, int64_t, int64_t>{16, 5, 1}, {7, 3, 2}, {1, 1, 1}, {33, 11, 3}}) {
        auto s = hk::sched::TileScheduler::make(mb, nb, batch, cluster, group);
        std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
        for (int64_t u = 0; u < s.units(); ++u)
          for (int r = 0; r < cluster; ++r) {
            auto t = s.tile(u, r);
            ASSERT_GE(t.batch, 0);
            ASSERT_LT(t.batch, batch);
            ASSERT_LT(t.n_block, nb);
            EXPECT_EQ(t.m_block % cluster, r);  // a cluster's CTAs are stacked along M
            EXPECT_EQ(t.n_block, s.tile(u, 0).n_block);
            if (t.m_block < mb) {
              EXPECT_TRUE(seen.insert({t.batch, t.m_block, t.n_block}).second);
            }
          }
        EXPECT_EQ(int64_t(seen.size()), mb * nb * batch) << "cluster " << cluster << " group " << group;
      }
  // group 1: row-major (N fastest); group 2 over 4 unit-rows and 3 columns: down 2 rows, then right.
  auto rm = hk::sched::TileScheduler::make(4, 3, 1, 1, 1);
  EXPECT_EQ(rm.tile(1, 0).n_block, 1);
  EXPECT_EQ(rm.tile(3, 0).m_block, 1);
  auto g = hk::sched::TileScheduler::make(4, 3, 1, 1, 2);
  std::vector<std::pair<int64_t, int64_t>> order;
  for (int64_t u = 0; u < g.units(); ++u) order.emplace_back(g.tile(u, 0).m_block, g.tile(u, 0).n_block);
  std::vector<std::pair<int64_t, int64_t>> want = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2},
                                                   {2, 0}, {3, 0}, {2, 1}, {3, 1}, {2, 2}, {3, 2}};
  EXPECT_EQ(order, want);
}

// v18's stream-K schedule, simulated: every k-block of every unit is computed exactly once; a
// cluster leaves at most one partial, as its first split piece; the peers a tile's finisher
// waits for (the loop in hopper_gemm_body) are exactly the clusters that left a partial in that
// tile, all below it; and no split happens where the last wave is full or there is only one
// (unless few_units: a grid of more clusters than units splits that one wave).
TEST(GemmStreamK, SplitCoversEveryKBlockOnceAndFinishersFindTheirPeers) {
  using hk::sched::StreamKSplit;
  for (bool few : {false, true})
    for (int64_t clusters : {1, 2, 5, 30, 66})
      for (int64_t units : {1, 3, 9, 26, 65, 66, 67, 70, 131, 132, 133, 256, 896, 1024})
        for (int kb : {1, 2, 9, 16, 19, 64, 128, 392}) {
          const StreamKSplit sp = StreamKSplit::make(units, clusters, kb, true, few);
          const int64_t idle = ((units + clusters - 1) / clusters * clusters - units) * kb;
          const bool split = (units > clusters || (few && units < clusters && units * kb >= clusters)) &&
                             units % clusters != 0 && kb > 1 && idle >= StreamKSplit::kMinIdleKBlocks * clusters;
          ASSERT_EQ(sp.dp_units < units, split)
              << units << " units, " << clusters << " clusters, " << kb << " k-blocks, few_units " << few;
          if (split) {
            EXPECT_EQ(sp.dp_units, units > clusters ? (units / clusters - 1) * clusters : 0);
          }
          std::map<std::pair<int64_t, int>, int> count;     // (unit, k-block) -> times computed
          std::map<int64_t, std::set<int64_t>> partial_by;  // unit -> clusters that left a partial in it
          std::map<int64_t, int64_t> finisher;              // split unit -> the cluster holding its last k-block
          for (int32_t c = 0; c < clusters; ++c) {
            StreamKSplit::Pieces table{};
            sp.pieces(c, table);
            ASSERT_LT(table.count, StreamKSplit::kMaxPieces);  // the range fit the table with room to spare
            int split_pieces = 0, partials = 0;
            sp.for_each_piece(c, &table, [&](int64_t u, int kb0, int kb1) {
              ASSERT_LT(kb0, kb1);
              ASSERT_LE(kb1, kb);
              for (int k = kb0; k < kb1; ++k) ++count[{u, k}];
              if (u < sp.dp_units) {
                EXPECT_EQ(split_pieces, 0) << "whole tiles come before the split pieces";
                EXPECT_TRUE(kb0 == 0 && kb1 == kb);
                return;
              }
              ++split_pieces;
              if (kb1 < kb) {
                EXPECT_EQ(split_pieces, 1) << "a partial is the cluster's first split piece";
                ++partials;
                partial_by[u].insert(c);
              } else {
                finisher[u] = c;
                std::set<int64_t> peers;  // the finisher's wait loop
                const int32_t tile_begin = static_cast<int32_t>(u - sp.dp_units) * kb;
                if (kb0 > 0)
                  for (int32_t p = c - 1; p >= 0 && sp.range_begin(p + 1) > tile_begin; --p) peers.insert(p);
                EXPECT_EQ(peers, partial_by[u]) << "unit " << u << " finished by cluster " << c;
              }
            });
            EXPECT_LE(partials, 1);
          }
          ASSERT_EQ(int64_t(count.size()), units * kb);
          for (auto& [key, n] : count) ASSERT_EQ(n, 1) << "unit " << key.first << " k-block " << key.second;
          for (auto& [u, cs] : partial_by) {
            ASSERT_TRUE(finisher.count(u));
            for (int64_t c : cs) EXPECT_LT(c, finisher[u]);
          }
        }
  // On the H200 (66 clusters of 2): 4096x14336x4096 (896 units, 64 k-blocks) runs 792 units
  // whole and splits 104, the busiest cluster running 12 x 64 + 101 k-blocks instead of 14 x 64;
  // 4096^3 (256 units, 8 k-blocks idle per cluster) and 8192x8192x1024 (1024 units of 16) stay
  // whole.
  const StreamKSplit h = StreamKSplit::make(896, 66, 64, true);
  EXPECT_EQ(h.dp_units, 792);
  EXPECT_EQ(h.range_begin(1), 100);
  EXPECT_EQ(StreamKSplit::make(256, 66, 64, true).dp_units, 256);
  EXPECT_EQ(StreamKSplit::make(1024, 66, 16, true).dp_units, 1024);
  EXPECT_EQ(StreamKSplit::make(896, 66, 64, false).dp_units, 896);
  // conv2d's weight gradient at 8x256x56x56, 3x3: 9 units of 392 k-blocks on a grid of 66
  // clusters split whole (53-54 k-blocks per cluster); without few_units a single partial wave
  // stays whole, and 49 units of 36 (64x256x14x14) idle too little to split.
  EXPECT_EQ(StreamKSplit::make(9, 66, 392, true, true).dp_units, 0);
  EXPECT_EQ(StreamKSplit::make(9, 66, 392, true, true).range_begin(1), 53);
  EXPECT_EQ(StreamKSplit::make(9, 66, 392, true).dp_units, 9);
  EXPECT_EQ(StreamKSplit::make(49, 66, 36, true, true).dp_units, 49);
}

// The cuBLAS peers cache handles, a workspace and plans; release_cached_resources() frees them
// (leak-free sanitizer runs) and the next call must build them again and still be right.
TEST(GemmBaselines, RunAgainAfterReleaseCachedResources) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  auto p = std::make_shared<hk::GemmProblem>(136, 264, 512, 2, DType::kBF16, DType::kBF16, false, true);
  p->act = hk::GemmActivation::kGelu;
  p->has_bias = true;
  hk::bench::Case c(p, 11);
  for (const char* name : {"baseline_cublas", "baseline_cublaslt"}) {
    const hk::Variant* v = hk::Registry::get().variant("gemm", name);
    ASSERT_NE(v, nullptr) << name;
    for (int round = 0; round < 2; ++round) {
      auto r = c.run_and_check(*v);
      EXPECT_TRUE(r.ok) << name << " round " << round << ": " << r.message;
      hk::release_cached_resources();
    }
  }
}
