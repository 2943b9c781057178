// attention beyond the registry sweep: bad input (CPU), the dispatch picks a production rung for
// every test problem (CPU), attrs() rebuild every problem (CPU), the fp64 reference against
// finite differences and by hand (CPU), the tolerance against an emulation of the kernels'
// 16-bit rounding (CPU), the public ops on transposed and padded views and the deterministic
// backward run twice, one-hot rows return V exactly (GPU). Variable length (thd): bad input and
// bad prefix sums (CPU), the reference against per-sequence fixed-length problems (CPU), the
// dispatch per head dim (CPU), the public varlen ops through padded views and with wrong prefix
// sums (GPU).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <limits>
#include <random>

#include "attention/attention_op.hpp"
#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "test_util.hpp"

using hk::AttentionLayout;
using hk::AttentionOptions;
using hk::AttentionProblem;
using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::fake_ptr;

namespace {

TensorView t4(DType dt, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  return TensorView(fake_ptr(), dt, std::move(shape), std::move(strides));
}

// Views with fake pointers laid out as a problem's specs (shape and strides).
std::vector<TensorView> views_of(const std::vector<hk::TensorSpec>& specs) {
  std::vector<TensorView> v;
  for (auto& s : specs) v.emplace_back(fake_ptr(), s.dtype, s.shape, s.strides);
  return v;
}

}  // namespace

TEST(AttentionBadInput, Ranks) {
  auto q = t4(DType::kBF16, {2, 16, 4, 64}), k = t4(DType::kBF16, {2, 16, 4, 64});
  auto o = q;
  auto lse = t4(DType::kF32, {2, 4, 16});
  TensorView q3(fake_ptr(), DType::kBF16, {16, 4, 64});
  expect_error(ErrorKind::kValue, "q must have 4 dimensions", [&] { hk::attention(q3, k, k, o, lse); });
  TensorView k5(fake_ptr(), DType::kBF16, {1, 2, 16, 4, 64});
  expect_error(ErrorKind::kValue, "k must have 4 dimensions", [&] { hk::attention(q, k5, k, o, lse); });
}

TEST(AttentionBadInput, HeadsAndDims) {
  auto q = t4(DType::kBF16, {2, 16, 6, 64}), k = t4(DType::kBF16, {2, 16, 4, 64});
  auto lse = t4(DType::kF32, {2, 6, 16});
  expect_error(ErrorKind::kValue, "multiple of k's and v's (4)", [&] { hk::attention(q, k, k, q, lse); });
  auto q8 = t4(DType::kBF16, {2, 16, 8, 64}), k32 = t4(DType::kBF16, {2, 16, 4, 32});
  auto lse8 = t4(DType::kF32, {2, 8, 16});
  expect_error(ErrorKind::kValue, "head dim 32 but q has 64", [&] { hk::attention(q8, k32, k32, q8, lse8); });
  auto kb = t4(DType::kBF16, {3, 16, 4, 64});
  expect_error(ErrorKind::kValue, "batch 3 but q has 2", [&] { hk::attention(q8, kb, kb, q8, lse8); });
  auto k4 = t4(DType::kBF16, {2, 16, 4, 64}), v5 = t4(DType::kBF16, {2, 17, 4, 64});
  expect_error(ErrorKind::kValue, "v has shape", [&] { hk::attention(q8, k4, v5, q8, lse8); });
  auto o_bad = t4(DType::kBF16, {2, 16, 8, 32});
  expect_error(ErrorKind::kValue, "o has shape", [&] { hk::attention(q8, k4, k4, o_bad, lse8); });
  auto lse_bad = t4(DType::kF32, {2, 16, 8});
  expect_error(ErrorKind::kValue, "lse has shape", [&] { hk::attention(q8, k4, k4, q8, lse_bad); });
}

TEST(AttentionBadInput, Dtypes) {
  auto q = t4(DType::kBF16, {1, 8, 2, 64}), kh = t4(DType::kF16, {1, 8, 2, 64});
  auto lse = t4(DType::kF32, {1, 2, 8});
  expect_error(ErrorKind::kType, "k is f16 but q is bf16", [&] { hk::attention(q, kh, kh, q, lse); });
  auto qf = t4(DType::kF32, {1, 8, 2, 64});
  expect_error(ErrorKind::kType, "expected bf16 or f16", [&] { hk::attention(qf, qf, qf, qf, lse); });
  auto lse16 = t4(DType::kBF16, {1, 2, 8});
  expect_error(ErrorKind::kType, "lse is bf16, expected f32", [&] { hk::attention(q, q, q, q, lse16); });
  expect_error(ErrorKind::kType, "dout is f16 but q is bf16",
               [&] { hk::attention_backward(q, q, q, q, kh, lse, q, q, q); });
  expect_error(ErrorKind::kType, "dk is f16 but k is bf16",
               [&] { hk::attention_backward(q, q, q, q, q, lse, q, kh, q); });
}

// The FP8 forward's own rules: e4m3 q, k, v with f32 [B, Hkv] descales, a bf16 o; e4m3 is not
// taken by the 16-bit entry points (nor by any backward).
TEST(AttentionBadInput, Fp8) {
  auto q8 = t4(DType::kF8E4M3, {2, 8, 4, 64}), k8 = t4(DType::kF8E4M3, {2, 8, 2, 64});
  auto o = t4(DType::kBF16, {2, 8, 4, 64}), lse = t4(DType::kF32, {2, 4, 8});
  TensorView ds(fake_ptr(256), DType::kF32, {2, 2});
  auto fp8 = [&](const TensorView& q, const TensorView& k, const TensorView& d0, const TensorView& out) {
    hk::attention_fp8(q, k, k, d0, ds, ds, out, lse);
  };
  expect_error(ErrorKind::kType, "q is bf16, expected e4m3", [&] { fp8(o, k8, ds, o); });
  expect_error(ErrorKind::kType, "k is bf16, expected e4m3", [&] { hk::attention_fp8(q8, o, k8, ds, ds, ds, o, lse); });
  expect_error(ErrorKind::kType, "o is e4m3, expected bf16", [&] { fp8(q8, k8, ds, q8); });
  TensorView ds16(fake_ptr(256), DType::kF16, {2, 2});
  expect_error(ErrorKind::kType, "q_descale is f16, expected f32", [&] { fp8(q8, k8, ds16, o); });
  TensorView ds_heads(fake_ptr(256), DType::kF32, {2, 4});  // [B, Hq] instead of [B, Hkv]
  expect_error(ErrorKind::kValue, "expected [2x2] (B, Hkv)", [&] { fp8(q8, k8, ds_heads, o); });
  TensorView ds_t(fake_ptr(256), DType::kF32, {2, 2}, {1, 2});
  expect_error(ErrorKind::kNotSupported, "q_descale must be contiguous", [&] { fp8(q8, k8, ds_t, o); });
  auto o_short = t4(DType::kBF16, {2, 7, 4, 64});
  expect_error(ErrorKind::kValue, "o has shape", [&] { fp8(q8, k8, ds, o_short); });
  expect_error(ErrorKind::kType, "FP8 inputs go through attention_fp8", [&] { hk::attention(q8, k8, k8, o, lse); });
  auto* fam = hk::Registry::get().family("attention");
  hk::Attrs bwd;
  bwd.set("backward", true);
  auto lse8 = t4(DType::kF32, {2, 4, 8});
  expect_error(ErrorKind::kType, "FP8 inputs go through attention_fp8",
               [&] { fam->make_problem({q8, k8, k8, q8, q8, lse8}, bwd); });
  hk::Attrs as_fp8;
  as_fp8.set("fp8", true);
  expect_error(ErrorKind::kValue, "attention_fp8: takes 6 inputs", [&] { fam->make_problem({q8, k8, k8}, as_fp8); });
  expect_error(ErrorKind::kType, "q is bf16, expected e4m3", [&] { fam->make_problem({o, k8, k8, ds, ds, ds}, as_fp8); });
  expect_error(ErrorKind::kType, "FP8 inputs go through attention_fp8", [&] { fam->make_problem({q8, k8, k8}, hk::Attrs{}); });
  as_fp8.set("backward", true);
  expect_error(ErrorKind::kNotSupported, "forward only", [&] { fam->make_problem({q8, k8, k8, ds, ds, ds}, as_fp8); });
  hk::Attrs thd_fp8;
  thd_fp8.set("fp8", true);
  thd_fp8.set("layout", std::string("thd"));
  expect_error(ErrorKind::kNotSupported, "thd", [&] { fam->make_problem({q8, k8, k8, ds, ds, ds}, thd_fp8); });
  // No keys: nothing for TMA to describe, so the general rung (O = 0, lse = -inf), not v10.
  AttentionProblem nok(1, 8, 0, 2, 1, 16, DType::kF8E4M3, false);
  EXPECT_EQ(hk::Registry::get().pick(nok).name(), "v02_online_softmax");
}

TEST(AttentionBadInput, LayoutsAndOptions) {
  auto q = t4(DType::kBF16, {1, 8, 2, 64});
  auto lse = t4(DType::kF32, {1, 2, 8});
  auto qt = t4(DType::kBF16, {1, 8, 2, 64}, {1024, 128, 64 * 8 * 2, 2});
  expect_error(ErrorKind::kNotSupported, "contiguous last dimension", [&] { hk::attention(qt, q, q, q, lse); });
  TensorView qn(nullptr, DType::kBF16, {1, 8, 2, 64});
  expect_error(ErrorKind::kValue, "q is a null pointer", [&] { hk::attention(qn, q, q, q, lse); });
  TensorView qm(fake_ptr(1), DType::kBF16, {1, 8, 2, 64});
  expect_error(ErrorKind::kNotSupported, "aligned", [&] { hk::attention(qm, q, q, q, lse); });
  AttentionOptions w;
  w.window_left = -2;
  expect_error(ErrorKind::kValue, "window", [&] { hk::attention(q, q, q, q, lse, w); });
  AttentionOptions c;
  c.softcap = -1;
  expect_error(ErrorKind::kValue, "softcap", [&] { hk::attention(q, q, q, q, lse, c); });
  auto lse_t = t4(DType::kF32, {1, 2, 8}, {16, 1, 2});
  expect_error(ErrorKind::kNotSupported, "lse must be contiguous", [&] { hk::attention(q, q, q, q, lse_t); });
  auto* fam = hk::Registry::get().family("attention");
  expect_error(ErrorKind::kValue, "layout", [&] { fam->make_problem({q, q, q}, hk::Attrs{{"layout", std::string("sbhd")}}); });
  expect_error(ErrorKind::kValue, "takes 6 inputs",
               [&] { fam->make_problem({q, q, q}, hk::Attrs{{"backward", true}}); });
  expect_error(ErrorKind::kValue, "causl", [&] { fam->make_problem({q, q, q}, hk::Attrs{{"causl", true}}); });
}

TEST(AttentionBadInput, EmptyIsANoOp) {
  TensorView q(nullptr, DType::kBF16, {0, 8, 2, 64}), lse(nullptr, DType::kF32, {0, 2, 8});
  EXPECT_NO_THROW(hk::attention(q, q, q, q, lse));
  EXPECT_NO_THROW(hk::attention_backward(q, q, q, q, q, lse, q, q, q));
}

// ---- variable length (thd) --------------------------------------------------------------------

namespace {

TensorView cu_view(int64_t n, DType dt = DType::kI32, std::vector<int64_t> strides = {}) {
  return TensorView(fake_ptr(), dt, {n}, std::move(strides));
}

}  // namespace

TEST(AttentionVarlenBadInput, CuSeqlensAndShapes) {
  // 3 sequences, 100 query rows, 120 key rows
  auto q = t4(DType::kBF16, {100, 4, 64}), k = t4(DType::kBF16, {120, 2, 64});
  auto lse = t4(DType::kF32, {4, 100});
  auto cu = cu_view(4);
  EXPECT_NO_THROW(hk::Registry::get().family("attention")->make_problem(
      {q, k, k, cu, cu}, hk::Attrs{{"layout", std::string("thd")}, {"max_seqlen_q", int64_t(50)},
                                   {"max_seqlen_k", int64_t(60)}}));
  expect_error(ErrorKind::kType, "cu_seqlens_q is f32, expected i32",
               [&] { hk::attention_varlen(q, k, k, cu_view(4, DType::kF32), cu, 50, 60, q, lse); });
  expect_error(ErrorKind::kType, "cu_seqlens_k is bf16",
               [&] { hk::attention_varlen(q, k, k, cu, cu_view(4, DType::kBF16), 50, 60, q, lse); });
  TensorView cu2(fake_ptr(), DType::kI32, {2, 2});
  expect_error(ErrorKind::kValue, "cu_seqlens_q must have 1 dimension",
               [&] { hk::attention_varlen(q, k, k, cu2, cu, 50, 60, q, lse); });
  expect_error(ErrorKind::kValue, "cu_seqlens_k has 5 entries but cu_seqlens_q has 4",
               [&] { hk::attention_varlen(q, k, k, cu, cu_view(5), 50, 60, q, lse); });
  expect_error(ErrorKind::kValue, "at least 1", [&] { hk::attention_varlen(q, k, k, cu_view(0), cu_view(0), 50, 60, q, lse); });
  expect_error(ErrorKind::kNotSupported, "cu_seqlens_q must be contiguous",
               [&] { hk::attention_varlen(q, k, k, cu_view(4, DType::kI32, {2}), cu, 50, 60, q, lse); });
  TensorView cu_null(nullptr, DType::kI32, {4});
  expect_error(ErrorKind::kValue, "cu_seqlens_q is a null pointer",
               [&] { hk::attention_varlen(q, k, k, cu_null, cu, 50, 60, q, lse); });
  TensorView cu_odd(fake_ptr(2), DType::kI32, {4});
  expect_error(ErrorKind::kNotSupported, "4-byte", [&] { hk::attention_varlen(q, k, k, cu_odd, cu, 50, 60, q, lse); });
  expect_error(ErrorKind::kValue, "max_seqlen_q and max_seqlen_k must be >= 0",
               [&] { hk::attention_varlen(q, k, k, cu, cu, -1, 60, q, lse); });
  // packed tensors are rank 3; lse is [Hq, total_q]
  auto q4 = t4(DType::kBF16, {1, 100, 4, 64});
  expect_error(ErrorKind::kValue, "q must have 3 dimensions (total, H, D)",
               [&] { hk::attention_varlen(q4, k, k, cu, cu, 50, 60, q4, lse); });
  auto lse_bad = t4(DType::kF32, {3, 4, 50});
  expect_error(ErrorKind::kValue, "(Hq, total_q)", [&] { hk::attention_varlen(q, k, k, cu, cu, 50, 60, q, lse_bad); });
  auto k6 = t4(DType::kBF16, {120, 3, 64});
  expect_error(ErrorKind::kValue, "multiple of k's and v's (3)", [&] { hk::attention_varlen(q, k6, k6, cu, cu, 50, 60, q, lse); });
  auto dk_bad = t4(DType::kBF16, {119, 2, 64});
  expect_error(ErrorKind::kValue, "dk has shape", [&] {
    hk::attention_varlen_backward(q, k, k, q, q, lse, cu, cu, 50, 60, q, dk_bad, k);
  });
  expect_error(ErrorKind::kType, "cu_seqlens_q is f32", [&] {
    hk::attention_varlen_backward(q, k, k, q, q, lse, cu_view(4, DType::kF32), cu, 50, 60, q, k, k);
  });
  // the packed layout belongs to attention_varlen; max_seqlen to the packed layout
  AttentionOptions thd;
  thd.layout = AttentionLayout::kTHD;
  auto q4b = t4(DType::kBF16, {1, 8, 2, 64});
  auto lse4 = t4(DType::kF32, {1, 2, 8});
  expect_error(ErrorKind::kValue, "attention_varlen", [&] { hk::attention(q4b, q4b, q4b, q4b, lse4, thd); });
  auto* fam = hk::Registry::get().family("attention");
  expect_error(ErrorKind::kValue, "needs max_seqlen_q",
               [&] { fam->make_problem({q, k, k, cu, cu}, hk::Attrs{{"layout", std::string("thd")}}); });
  expect_error(ErrorKind::kValue, "takes 5 inputs",
               [&] { fam->make_problem({q, k, k}, hk::Attrs{{"layout", std::string("thd")}, {"max_seqlen_q", int64_t(1)},
                                                            {"max_seqlen_k", int64_t(1)}}); });
  expect_error(ErrorKind::kValue, "belong to layout",
               [&] { fam->make_problem({q4b, q4b, q4b}, hk::Attrs{{"max_seqlen_q", int64_t(8)}}); });
}

TEST(AttentionVarlenBadInput, EmptyIsANoOp) {
  TensorView q(nullptr, DType::kBF16, {0, 2, 64}), lse(nullptr, DType::kF32, {2, 0});
  auto cu = cu_view(3);
  EXPECT_NO_THROW(hk::attention_varlen(q, q, q, cu, cu, 0, 0, q, lse));
  EXPECT_NO_THROW(hk::attention_varlen_backward(q, q, q, q, q, lse, cu, cu, 0, 0, q, q, q));
  auto cu1 = cu_view(1);  // B = 0
  auto qn = t4(DType::kBF16, {5, 2, 64});
  auto lsen = t4(DType::kF32, {2, 5});
  EXPECT_NO_THROW(hk::attention_varlen(qn, qn, qn, cu1, cu1, 5, 5, qn, lsen));
}

// The reference reads the prefix sums and checks every value (the NumPy / CPU path's errors).
TEST(AttentionVarlenReference, ChecksThePrefixSums) {
  const AttentionProblem p = AttentionProblem::varlen({3, 0, 5}, {4, 1, 2}, 2, 1, 8, DType::kF32);
  auto bad = [&](int which, std::vector<double> cu, const std::string& fragment) {
    std::vector<hk::HostTensor> in;
    uint64_t seed = 3;
    for (auto& spec : p.inputs()) in.push_back(hk::host::random_tensor(spec, seed++));
    in[which].values = cu;
    expect_error(ErrorKind::kValue, fragment, [&] { hktest::run_reference(p, in); });
  };
  bad(3, {0, 3, 2, 8}, "not non-decreasing");
  bad(3, {0, 3, 3, 9}, "is not a row index in [0, 8]");
  bad(3, {-1, 3, 3, 8}, "is not a row index");
  bad(4, {0, 4, 5, 6, 7}, "expected B + 1 = 4");
  bad(3, {0, 0, 0, 8}, "more than max_seqlen 5");
  bad(4, {0, 4.5, 5, 7}, "is not a row index");
}

// Each sequence of a packed problem is the fixed-length problem of its own lengths: the thd
// reference, forward and backward, equals (bit for bit: the same row computations) the bshd
// reference of every sequence, with causal bottom-right aligned per sequence, a window, softcap,
// GQA, and sequences of 0 and 1 rows; lse's [Hq, total_q] and rows outside every sequence too.
TEST(AttentionVarlenReference, EqualsFixedLengthPerSequence) {
  const std::vector<int64_t> lq = {7, 0, 1, 13, 5}, lk = {9, 4, 1, 13, 0};
  const int64_t Hq = 4, Hk = 2, D = 3;
  for (int variant = 0; variant < 3; ++variant)
    for (bool bwd : {false, true}) {
      AttentionProblem p = AttentionProblem::varlen(lq, lk, Hq, Hk, D, DType::kF32, bwd);
      p.causal = variant == 0;
      if (variant == 1) p.window_left = 2, p.window_right = 1;
      if (variant == 2) p.softcap = 1.5, p.scale = 0.8;
      std::vector<hk::HostTensor> in;
      uint64_t seed = 17;
      for (auto& spec : p.inputs()) in.push_back(hk::host::random_tensor(spec, seed++));
      if (bwd)  // finite lse everywhere a row has keys, as the forward would give
        for (auto& v : in[5].values) v = std::isfinite(v) ? v : 0.0;
      auto out = hktest::run_reference(p, in);
      int64_t q0 = 0, k0 = 0;
      for (size_t b = 0; b < lq.size(); ++b) {
        AttentionProblem s(1, lq[b], lk[b], Hq, Hk, D, DType::kF32, bwd);
        s.causal = p.causal, s.window_left = p.window_left, s.window_right = p.window_right;
        s.softcap = p.softcap, s.scale = p.scale;
        std::vector<hk::HostTensor> sin;
        auto specs = s.inputs();
        auto rows = [&](const hk::HostTensor& t, int64_t r0, int64_t n, int64_t h) {
          return std::vector<double>(t.values.begin() + r0 * h * D, t.values.begin() + (r0 + n) * h * D);
        };
        sin.push_back({specs[0], rows(in[0], q0, lq[b], Hq)});
        sin.push_back({specs[1], rows(in[1], k0, lk[b], Hk)});
        sin.push_back({specs[2], rows(in[2], k0, lk[b], Hk)});
        if (bwd) {
          sin.push_back({specs[3], rows(in[3], q0, lq[b], Hq)});
          sin.push_back({specs[4], rows(in[4], q0, lq[b], Hq)});
          std::vector<double> l;
          for (int64_t h = 0; h < Hq; ++h)
            for (int64_t i = 0; i < lq[b]; ++i) l.push_back(in[5].values[h * p.total_q + q0 + i]);
          sin.push_back({specs[5], l});
        }
        auto sout = hktest::run_reference(s, sin);
        const std::string what = p.key() + " sequence " + std::to_string(b);
        if (!bwd) {
          EXPECT_EQ(rows(out[0], q0, lq[b], Hq), sout[0].values) << what;
          for (int64_t h = 0; h < Hq; ++h)
            for (int64_t i = 0; i < lq[b]; ++i)
              EXPECT_EQ(out[1].values[h * p.total_q + q0 + i], sout[1].values[h * lq[b] + i]) << what;
        } else {
          EXPECT_EQ(rows(out[0], q0, lq[b], Hq), sout[0].values) << what;
          EXPECT_EQ(rows(out[1], k0, lk[b], Hk), sout[1].values) << what;
          EXPECT_EQ(rows(out[2], k0, lk[b], Hk), sout[2].values) << what;
        }
        q0 += lq[b], k0 += lk[b];
      }
      // sequence 4 has no key: O = 0, lse = -inf (bottom-right causal or not)
      if (!bwd) {
        for (int64_t h = 0; h < Hq; ++h)
          EXPECT_EQ(out[1].values[h * p.total_q + p.total_q - 1], -std::numeric_limits<double>::infinity());
      }
    }
}

// The sampled reference (bench sizes) gives the full reference's values at every position,
// rows outside every sequence (before cu[0], past cu[B]) included.
TEST(AttentionVarlenReference, SampledEqualsFull) {
  for (bool bwd : {false, true}) {
    AttentionProblem p = AttentionProblem::varlen({7, 0, 1, 13, 5}, {9, 4, 1, 13, 0}, 4, 2, 3, DType::kF32, bwd);
    p.causal = true;
    std::vector<hk::HostTensor> in;
    uint64_t seed = 29;
    for (auto& spec : p.inputs()) in.push_back(hk::host::random_tensor(spec, seed++));
    const size_t cu = bwd ? 6 : 3;
    in[cu].values = {1, 7, 7, 8, 20, 24};  // rows 0 and 25 of 26 belong to no sequence
    if (bwd)
      for (auto& v : in[5].values) v = std::isfinite(v) ? v : 0.0;
    auto full = hktest::run_reference(p, in);
    for (int o = 0; o < int(full.size()); ++o) {
      std::vector<int64_t> flat(full[o].values.size());
      for (size_t i = 0; i < flat.size(); ++i) flat[i] = int64_t(i);
      std::vector<double> vals;
      ASSERT_TRUE(p.reference_at(in, o, flat, vals));
      EXPECT_EQ(vals, full[o].values) << p.key() << " output " << o;
    }
    if (!bwd) {
      EXPECT_EQ(full[1].values[0], -std::numeric_limits<double>::infinity());
    }
  }
}

// The Hopper backward's per-row scratch for thd: every sequence's 64-row blocks lie inside
// thd_rows_pad for any prefix sums (clamped as the kernels clamp them), and with valid prefix
// sums no two sequences share a block.
TEST(AttentionVarlenScratch, SequenceBlocksStayInsideAndApart) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const int batch = 1 + int(rng() % 40);
    const bool valid = trial % 2 == 0;
    std::vector<int32_t> cu(size_t(batch) + 1, 0);
    for (int b = 1; b <= batch; ++b) {
      const int32_t len = int32_t(rng() % (trial % 3 == 0 ? 300 : 70));
      cu[size_t(b)] = valid ? cu[size_t(b) - 1] + len : int32_t(rng() % 900) - 100;  // wrong: any order, negative
    }
    const int64_t total = valid ? cu.back() : int64_t(rng() % 600);
    const int64_t rows = hk::thd_rows_pad(batch, total);
    ASSERT_EQ(rows % 64, 0);
    int64_t prev_end = 0;
    for (int b = 0; b < batch; ++b) {
      int64_t q0 = 0;
      const int64_t len = hk::attn_span(cu.data(), b, total, q0);
      const int64_t start = hk::thd_pad_row0(b, q0), end = start + (len + 63) / 64 * 64;
      ASSERT_EQ(start % 64, 0);
      ASSERT_LE(end, rows) << "trial " << trial << " sequence " << b;
      if (valid) {
        ASSERT_GE(start, prev_end) << "trial " << trial << " sequence " << b;
        prev_end = end;
      }
    }
  }
}

TEST(AttentionVarlenDispatch, PicksByHeadDim) {
  auto& reg = hk::Registry::get();
  auto pick = [&](int64_t d, bool bwd, DType dt = DType::kBF16) {
    AttentionProblem p = AttentionProblem::varlen({100, 0, 1, 300}, {100, 5, 1, 300}, 8, 2, d, dt, bwd);
    p.causal = true;
    return reg.pick(p).name();
  };
  EXPECT_EQ(pick(64, false), "v05_wgmma_tma");
  EXPECT_EQ(pick(128, false), "v05_wgmma_tma");
  EXPECT_EQ(pick(128, false, DType::kF16), "v05_wgmma_tma");
  // other head dims that are multiples of 8: v05 in place (TMA zero-fills the tile's extra columns)
  EXPECT_EQ(pick(96, false), "v05_wgmma_tma");
  EXPECT_EQ(pick(32, false), "v05_wgmma_tma");
  EXPECT_EQ(pick(40, false), "v05_wgmma_tma");
  EXPECT_EQ(pick(37, false), "v08_padded_pack");  // copies padded to 40 for v05
  EXPECT_EQ(pick(256, false), "v05_wgmma_tma");    // the 256-column tile
  EXPECT_EQ(pick(200, false), "v05_wgmma_tma");
  EXPECT_EQ(pick(201, false), "v08_padded_pack");
  // the thd backward: v07 for every D a multiple of 8 up to 256 (TMA zero-fills the extra columns)
  for (int64_t d : {256, 200, 128, 112, 96, 80, 64, 40, 32, 8}) EXPECT_EQ(pick(d, true), "v07_wgmma_backward") << d;
  EXPECT_EQ(pick(128, true, DType::kF16), "v07_wgmma_backward");
  EXPECT_EQ(pick(37, true), "v08_padded_pack");   // copies padded to 40 for v07
  EXPECT_EQ(pick(201, true), "v08_padded_pack");  // padded to 208
  // one long sequence among many short ones: no copies, each sequence runs on its own CTAs
  std::vector<int64_t> lens(64, 16);
  lens[0] = 8192;
  AttentionProblem skew = AttentionProblem::varlen(lens, lens, 4, 4, 128, DType::kBF16, true);
  EXPECT_EQ(reg.pick(skew).name(), "v07_wgmma_backward");
  AttentionProblem p = AttentionProblem::varlen({100}, {100}, 2, 2, 64, DType::kBF16);
  EXPECT_NE(reg.variant("attention", "v01_materialized")->supports(p), "");
  EXPECT_NE(reg.variant("attention", "v06_pingpong_overlap")->supports(p), "");
  EXPECT_EQ(reg.variant("attention", "v02_online_softmax")->supports(p), "");
  // no keys at all: no TMA extent
  AttentionProblem nok = AttentionProblem::varlen({100, 3}, {0, 0}, 2, 2, 64, DType::kBF16);
  EXPECT_NE(reg.variant("attention", "v05_wgmma_tma")->supports(nok), "");
  EXPECT_EQ(reg.pick(nok).name(), "v03_fa2_mma_sync");
  // `hk bench attention --shape SxDxCxV` with V = 1: the 16k tokens as sequences of 3S/2 and S/2
  hk::BenchSelect sel;
  sel.shapes = {"2048x128x1x1"};
  auto bench = reg.family("attention")->bench_problems(sel);
  ASSERT_EQ(bench.size(), 2u);
  EXPECT_EQ(bench[0]->key(), "thd8x3072x3072_t16384x16384_h16x16_d128_bf16_causal_fwd");
  EXPECT_EQ(reg.pick(*bench[0]).name(), "v05_wgmma_tma");
  EXPECT_GT(bench[1]->flops(), hk::Problem::kSampledCheckFlops);  // checked by the sampled reference
  // `--shape SxDxC:bhsd`: SDPA's layout (the default is bshd, FlashAttention's)
  sel.shapes = {"2048x128x1:bhsd", "512x64"};
  bench = reg.family("attention")->bench_problems(sel);
  ASSERT_EQ(bench.size(), 4u);
  EXPECT_NE(bench[0]->key().find("_bhsd"), std::string::npos) << bench[0]->key();
  EXPECT_NE(bench[1]->key().find("_bhsd"), std::string::npos) << bench[1]->key();
  EXPECT_EQ(bench[2]->key().find("_bhsd"), std::string::npos) << bench[2]->key();
  EXPECT_EQ(bench[0]->attrs().get_string("attention", "layout", ""), "bhsd");
  // [B, H, S, D] through strides: q's are (H S D, S D, D) for (b, s, h), k's the same
  auto* bh = dynamic_cast<const AttentionProblem*>(bench[0].get());
  ASSERT_NE(bh, nullptr);
  EXPECT_EQ(bh->str_q.b, 16 * 2048 * 128);
  EXPECT_EQ(bh->str_q.s, 128);
  EXPECT_EQ(bh->str_q.h, 2048 * 128);
  auto* bs = dynamic_cast<const AttentionProblem*>(bench[2].get());
  ASSERT_NE(bs, nullptr);
  EXPECT_EQ(bs->str_q.s, 32 * 64);  // bshd at S = 512, D = 64: Hq = 32 heads per row of s
  // `--dtype e4m3`: the FP8 forward only (no backward problem), served by its tensor-core rung
  sel.shapes = {"4096x128x1"};
  sel.dtypes = {DType::kF8E4M3};
  bench = reg.family("attention")->bench_problems(sel);
  ASSERT_EQ(bench.size(), 1u);
  EXPECT_EQ(bench[0]->key(), "4x4096x4096_h16x16_d128_e4m3_causal_fwd");
  EXPECT_EQ(reg.pick(*bench[0]).name(), "v10_fp8_forward");
  sel.dtypes = {};
  // The quick suite: bf16 forward and backward and the e4m3 forward, one shape
  sel.shapes = {};
  sel.quick = true;
  bench = reg.family("attention")->bench_problems(sel);
  ASSERT_EQ(bench.size(), 3u);
  EXPECT_EQ(bench[0]->key(), "8x2048x2048_h16x16_d128_bf16_causal_fwd");
  EXPECT_EQ(bench[1]->key(), "8x2048x2048_h16x16_d128_bf16_causal_bwd");
  EXPECT_EQ(bench[2]->key(), "8x2048x2048_h16x16_d128_e4m3_causal_fwd");
  EXPECT_EQ(reg.pick(*bench[2]).name(), "v10_fp8_forward");
  sel.quick = false;
  sel.shapes = {"2048x128:bhds"};
  expect_error(ErrorKind::kValue, "layout is bshd or bhsd", [&] { reg.family("attention")->bench_problems(sel); });
  sel.shapes = {"2048x128x1x1:bhsd"};
  expect_error(ErrorKind::kValue, "takes no layout", [&] { reg.family("attention")->bench_problems(sel); });
  // thd's key names the packed sizes; attrs() carry the maxima
  EXPECT_EQ(p.key(), "thd1x100x100_t100x100_h2x2_d64_bf16_fwd");
  EXPECT_EQ(p.attrs().get_int("attention", "max_seqlen_q", -1), 100);
  EXPECT_EQ(p.attrs().get_string("attention", "layout", ""), "thd");
}

// Every test problem (and the bench problems) has a production rung: the public op never
// refuses a valid input.
TEST(AttentionDispatch, EveryProblemGetsAProductionVariant) {
  auto& reg = hk::Registry::get();
  std::vector<hk::ProblemPtr> all = reg.family("attention")->test_problems();
  hk::BenchSelect sel;
  for (auto& p : reg.family("attention")->bench_problems(sel)) all.push_back(p);
  for (auto& p : all) {
    hk::Choice c = reg.choose(*p);
    ASSERT_NE(c.variant, nullptr) << p->key();
    EXPECT_TRUE(c.variant->is(hk::kFlagProduction)) << p->key() << ": " << c.variant->name();
    EXPECT_FALSE(c.why.empty()) << p->key();
  }
  // the general rung accepts every test problem
  const hk::Variant* general = reg.variant("attention", "v02_online_softmax");
  ASSERT_NE(general, nullptr);
  for (auto& p : all) EXPECT_EQ(general->supports(*p), "") << p->key();
  EXPECT_TRUE(reg.variant("attention", "v01_materialized")->is(hk::kFlagReference));
  EXPECT_TRUE(reg.variant("attention", "v01_materialized")->is(hk::kFlagBaseline));
  EXPECT_FALSE(reg.variant("attention", "v01_materialized")->is(hk::kFlagProduction));
}

TEST(AttentionDispatch, PicksByShape) {
  auto& reg = hk::Registry::get();
  auto pick = [&](int64_t d, bool bwd, int64_t pad = 0) {
    AttentionProblem p(2, 1000, 1000, 8, 2, d, DType::kBF16, bwd);
    if (pad) p.str_q = {1000 * 8 * (d + pad), 8 * (d + pad), d + pad};
    return reg.pick(p).name();
  };
  EXPECT_EQ(pick(64, false), "v06_pingpong_overlap");  // 64 columns: ping-pong, one CTA per tile
  {  // masks: the same persistent grid (tiles claimed from a counter, the longest first)
    AttentionProblem c(2, 1000, 1000, 8, 2, 128, DType::kBF16);
    c.causal = true;
    EXPECT_EQ(reg.pick(c).name(), "v09_persistent");
    c.causal = false, c.window_left = 100;
    EXPECT_EQ(reg.pick(c).name(), "v09_persistent");
  }
  EXPECT_EQ(pick(128, false), "v09_persistent");  // above 64 columns: ping-pong on a persistent grid
  EXPECT_EQ(pick(128, false, 8), "v09_persistent");  // padded rows, still 16-byte multiples
  // head dims that are multiples of 8 up to 128: v05 / v06 / v07 in place; others, and rows TMA
  // cannot read: padded copies (v08)
  EXPECT_EQ(pick(96, false), "v09_persistent");
  EXPECT_EQ(pick(72, false), "v09_persistent");
  EXPECT_EQ(pick(80, false), "v09_persistent");
  EXPECT_EQ(pick(32, false), "v06_pingpong_overlap");
  EXPECT_EQ(pick(128, false, 3), "v08_padded_pack");
  // the 256-column tile: D = 136 ... 256 in place, other D up to 256 padded
  EXPECT_EQ(pick(256, false), "v09_persistent");
  EXPECT_EQ(pick(192, false), "v09_persistent");
  EXPECT_EQ(pick(256, false, 3), "v08_padded_pack");
  EXPECT_EQ(pick(250, false), "v08_padded_pack");
  EXPECT_EQ(pick(264, false), "v02_online_softmax");
  EXPECT_EQ(pick(37, false), "v08_padded_pack");
  EXPECT_EQ(pick(64, true), "v07_wgmma_backward");
  EXPECT_EQ(pick(128, true), "v07_wgmma_backward");
  EXPECT_EQ(pick(128, true, 8), "v07_wgmma_backward");  // padded rows, still 16-byte multiples
  EXPECT_EQ(pick(96, true), "v07_wgmma_backward");
  EXPECT_EQ(pick(80, true), "v07_wgmma_backward");
  EXPECT_EQ(pick(37, true), "v08_padded_pack");
  EXPECT_EQ(pick(80, true, 3), "v08_padded_pack");
  EXPECT_EQ(pick(256, true), "v07_wgmma_backward");  // the 256-column tile: dK, dV split by columns
  EXPECT_EQ(pick(136, true), "v07_wgmma_backward");
  EXPECT_EQ(pick(250, true), "v08_padded_pack");
  EXPECT_EQ(pick(264, true), "v02_online_softmax");
  AttentionProblem f32(2, 1000, 1000, 8, 2, 80, DType::kF32);
  EXPECT_EQ(reg.pick(f32).name(), "v02_online_softmax");
  AttentionProblem one(1, 64, 64, 2, 2, 64, DType::kBF16);
  one.str_q.b = 3;  // batch of extent 1: its stride is never used
  EXPECT_EQ(reg.pick(one).name(), "v06_pingpong_overlap");
  EXPECT_TRUE(reg.variant("attention", "v06_pingpong_overlap")->is(hk::kFlagProduction));
  EXPECT_TRUE(reg.variant("attention", "v09_persistent")->is(hk::kFlagProduction));
  AttentionProblem misaligned(1, 64, 64, 2, 2, 64, DType::kBF16);
  misaligned.align_bytes = 4;
  EXPECT_EQ(reg.pick(misaligned).name(), "v08_padded_pack");
}

// make_problem(views laid out as inputs(), attrs()) rebuilds each test problem (the Python
// package's path into the family), and the keys are distinct.
TEST(AttentionFamily, AttrsRebuildEveryProblem) {
  auto* fam = hk::Registry::get().family("attention");
  std::set<std::string> keys;
  for (auto& p : fam->test_problems()) {
    EXPECT_TRUE(keys.insert(p->key()).second) << "duplicate key " << p->key();
    auto outs = p->outputs();
    bool contiguous_out = true;
    for (auto& o : outs) contiguous_out = contiguous_out && o.strides.empty();
    if (!contiguous_out) continue;
    auto rebuilt = fam->make_problem(views_of(p->inputs()), p->attrs());
    EXPECT_EQ(rebuilt->key(), p->key());
  }
}

// Sq = Sk = 1: O = v, lse = the one score. Causal with Sq > Sk: the first Sq - Sk rows see no
// key: O = 0 and lse = -inf; windows by hand.
TEST(AttentionReference, ByHand) {
  AttentionProblem p(1, 1, 1, 1, 1, 2, DType::kF32);
  auto out = hktest::run_reference(p, {{p.inputs()[0], {1, 2}}, {p.inputs()[1], {3, 4}}, {p.inputs()[2], {5, -6}}});
  EXPECT_DOUBLE_EQ(out[0].values[0], 5);
  EXPECT_DOUBLE_EQ(out[0].values[1], -6);
  EXPECT_NEAR(out[1].values[0], 11 / std::sqrt(2.0), 1e-12);

  AttentionProblem c(1, 3, 2, 1, 1, 1, DType::kF32);
  c.causal = true;  // row i sees keys j <= i - 1
  auto oc = hktest::run_reference(c, {{c.inputs()[0], {1, 1, 1}}, {c.inputs()[1], {0, 0}}, {c.inputs()[2], {2, 4}}});
  EXPECT_EQ(oc[0].values[0], 0.0);
  EXPECT_EQ(oc[1].values[0], -std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(oc[0].values[1], 2);  // key 0 only
  EXPECT_DOUBLE_EQ(oc[0].values[2], 3);  // keys 0 and 1, equal scores
  EXPECT_NEAR(oc[1].values[2], std::log(2.0), 1e-15);

  AttentionProblem w(1, 4, 4, 1, 1, 1, DType::kF32);
  w.window_left = 1, w.window_right = 0;  // row i sees i-1 and i
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(w.keys(i).lo, std::max<int64_t>(0, i - 1));
    EXPECT_EQ(w.keys(i).hi, i);
  }
  AttentionProblem br(1, 2, 5, 1, 1, 1, DType::kF32);
  br.causal = true;  // bottom-right: row 0 sees keys 0..3, row 1 keys 0..4
  EXPECT_EQ(br.keys(0).hi, 3);
  EXPECT_EQ(br.keys(1).hi, 4);
}

// The backward reference against central differences of L = sum(dout * O(q, k, v)), with lse
// and o from the forward reference (as the op is used), GQA, causal, a window and softcap.
TEST(AttentionReference, BackwardMatchesFiniteDifferences) {
  for (double cap : {0.0, 2.0}) {
    AttentionProblem f(1, 5, 6, 2, 1, 3, DType::kF32), b(1, 5, 6, 2, 1, 3, DType::kF32, true);
    for (AttentionProblem* p : {&f, &b}) p->causal = true, p->window_left = 3, p->softcap = cap, p->scale = 0.9;
    auto in = hktest::smooth_inputs(f, 7);
    auto fo = hktest::run_reference(f, in);
    auto bin = hktest::smooth_inputs(b, 11);
    for (int i = 0; i < 3; ++i) bin[i].values = in[i].values;
    bin[3].values = fo[0].values;
    bin[5].values = fo[1].values;
    const std::vector<double>& cot = bin[4].values;
    auto grads = hktest::run_reference(b, bin);
    for (int input = 0; input < 3; ++input)
      hktest::expect_matches_fd(f, in, input, cot, grads[input].values,
                                std::string("softcap ") + std::to_string(cap) + " d" + "qkv"[input]);
  }
}

// The tolerance is sound: kernels that round P (and dS) to the 16-bit dtype before the products
// and round each output once — emulated here on the CPU — pass it; dropping one key fails it.
namespace {

struct Emulated {
  std::vector<std::vector<double>> out;
};

// Forward (o) and backward (dq, dk, dv) of a contiguous bshd problem, rounding as the
// tensor-core kernels do; drop_key >= 0 leaves that key out (a wrong kernel).
Emulated emulate(const AttentionProblem& p, const std::vector<hk::HostTensor>& in, int64_t drop_key = -1) {
  const int64_t B = p.batch, Sq = p.seqlen_q, Sk = p.seqlen_k, H = p.heads_q, Hk = p.heads_kv, D = p.head_dim;
  const int64_t G = H / Hk;
  auto rnd = [&](double x) { return hk::host::round_to(p.dtype, x); };
  auto qi = [&](int64_t b, int64_t i, int64_t h) { return ((b * Sq + i) * H + h) * D; };
  auto ki = [&](int64_t b, int64_t j, int64_t h) { return ((b * Sk + j) * Hk + h) * D; };
  const auto &q = in[0].values, &k = in[1].values, &v = in[2].values;
  auto score = [&](int64_t b, int64_t i, int64_t h, int64_t j, double& t) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += q[qi(b, i, h) + d] * k[ki(b, j, h / G) + d];
    s = float(s * p.scale);
    t = 0;
    if (p.softcap > 0) t = std::tanh(s / p.softcap), s = p.softcap * t;
    return s;
  };
  Emulated e;
  if (!p.backward) {
    e.out.assign(1, std::vector<double>(B * Sq * H * D, 0.0));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
          auto kr = p.keys(i);
          double m = -INFINITY, t;
          for (int64_t j = kr.lo; j <= kr.hi; ++j) m = std::max(m, score(b, i, h, j, t));
          double l = 0;
          std::vector<double> acc(D, 0.0);
          for (int64_t j = kr.lo; j <= kr.hi; ++j) {
            if (j == drop_key) continue;
            const double pj = float(std::exp(score(b, i, h, j, t) - m));
            l += pj;
            for (int64_t d = 0; d < D; ++d) acc[d] += rnd(pj) * v[ki(b, j, h / G) + d];
          }
          for (int64_t d = 0; d < D; ++d) e.out[0][qi(b, i, h) + d] = l > 0 ? rnd(acc[d] / l) : 0.0;
        }
    return e;
  }
  const auto &o = in[3].values, &dout = in[4].values, &lse = in[5].values;
  e.out.assign(3, {});
  e.out[0].assign(B * Sq * H * D, 0.0);
  e.out[1].assign(B * Sk * Hk * D, 0.0);
  e.out[2].assign(B * Sk * Hk * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        auto kr = p.keys(i);
        double dl = 0;
        for (int64_t d = 0; d < D; ++d) dl += dout[qi(b, i, h) + d] * o[qi(b, i, h) + d];
        for (int64_t j = kr.lo; j <= kr.hi; ++j) {
          if (j == drop_key) continue;
          double t;
          const double pj = std::exp(score(b, i, h, j, t) - lse[(b * H + h) * Sq + i]);
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += dout[qi(b, i, h) + d] * v[ki(b, j, h / G) + d];
          double ds = pj * (dp - dl) * (p.softcap > 0 ? 1 - t * t : 1.0);
          const double pr = rnd(pj), dsr = rnd(ds);
          for (int64_t d = 0; d < D; ++d) {
            e.out[0][qi(b, i, h) + d] += p.scale * dsr * k[ki(b, j, h / G) + d];
            e.out[1][ki(b, j, h / G) + d] += p.scale * dsr * q[qi(b, i, h) + d];
            e.out[2][ki(b, j, h / G) + d] += pr * dout[qi(b, i, h) + d];
          }
        }
      }
  for (auto& x : e.out)
    for (auto& y : x) y = rnd(y);
  return e;
}

}  // namespace

TEST(AttentionTolerance, CoversSixteenBitRoundingAndCatchesADroppedKey) {
  struct S { int64_t sq, sk, hq, hkv, d; bool causal; DType dt; double cap; };
  const S shapes[] = {{64, 64, 2, 1, 64, true, DType::kBF16, 0},
                      {40, 97, 4, 2, 32, false, DType::kBF16, 0},
                      {97, 40, 2, 2, 16, true, DType::kF16, 0},
                      {64, 64, 2, 1, 64, false, DType::kBF16, 1.5},
                      {300, 7, 2, 1, 64, true, DType::kBF16, 0},
                      {7, 300, 2, 1, 128, true, DType::kF16, 0}};
  for (const S& s : shapes)
    for (bool bwd : {false, true}) {
      AttentionProblem p(1, s.sq, s.sk, s.hq, s.hkv, s.d, s.dt, bwd);
      p.causal = s.causal;
      p.softcap = s.cap;
      if (s.cap > 0) p.scale = 1.0;
      for (uint64_t seed : {1u, 2u, 3u}) {
        std::vector<hk::HostTensor> in;
        uint64_t k = seed * 100;
        for (auto& spec : p.inputs()) in.push_back(hk::host::random_tensor(spec, k++));
        auto ref = hktest::run_reference(p, in);
        std::string last_message;
        auto check = [&](const Emulated& e) {
          bool ok = true;
          for (size_t o = 0; o < e.out.size(); ++o) {
            auto r = hk::bench::compare(p.outputs()[o], e.out[o], ref[o].values, p.tolerance(int(o)));
            ok = ok && r.ok;
            if (!r.ok) last_message = p.key() + ": " + r.message;
          }
          return ok;
        };
        const Emulated good = emulate(p, in);
        EXPECT_TRUE(check(good)) << last_message;
        // with room to spare: the largest error uses at most half of its bound
        for (size_t o = 0; o < good.out.size(); ++o) {
          const hk::Tolerance tol = p.tolerance(int(o));
          double worst = 0;
          for (size_t i = 0; i < good.out[o].size(); ++i) {
            const double r = ref[o].values[i];
            if (std::isfinite(r)) worst = std::max(worst, std::fabs(good.out[o][i] - r) / (tol.atol + tol.rtol * std::fabs(r)));
          }
          EXPECT_LT(worst, 0.5) << p.key() << " output " << o << " seed " << seed;
          if (std::getenv("HK_ATTN_MARGINS")) std::printf("%-40s out %zu: %.3f of the bound\n", p.key().c_str(), o, worst);
        }
        EXPECT_FALSE(check(emulate(p, in, s.sk / 2))) << p.key() << ": dropping key " << s.sk / 2 << " passed";
      }
    }
}

// ---- GPU: the public ops through views --------------------------------------------------------

namespace {

// A problem run through the public op with views whose strides are the problem's.
void run_public(const AttentionProblem& p, hk::bench::Case& c, const AttentionOptions& opt) {
  hk::Operands ops = c.operands();
  if (!p.backward) hk::attention(ops.in[0], ops.in[1], ops.in[2], ops.out[0], ops.out[1], opt);
  else
    hk::attention_backward(ops.in[0], ops.in[1], ops.in[2], ops.in[3], ops.in[4], ops.in[5], ops.out[0], ops.out[1],
                           ops.out[2], opt);
}

AttentionOptions options_of(const AttentionProblem& p) {
  AttentionOptions o;
  o.causal = p.causal, o.scale = p.scale, o.window_left = p.window_left, o.window_right = p.window_right;
  o.softcap = p.softcap, o.layout = p.layout, o.deterministic = p.deterministic;
  return o;
}

}  // namespace

// PyTorch's [B, H, S, D] tensors and FlashAttention's [B, S, H, D] with padded rows, through the
// public op (dispatch included), forward and backward.
TEST(AttentionPublic, LayoutsThroughStrides) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (bool bwd : {false, true})
    for (auto lay : {AttentionLayout::kBSHD, AttentionLayout::kBHSD})
      for (int64_t d : {64, 128, 40}) {
        auto p = std::make_shared<AttentionProblem>(2, 200, 257, 8, 2, d, DType::kBF16, bwd, lay);
        p->causal = true;
        const int64_t row = d + 8;  // padded rows, 16-byte multiples
        if (lay == AttentionLayout::kBSHD) p->str_q = {200 * 8 * row, 8 * row, row};
        else p->str_q = {8 * 200 * row, row, 200 * row};
        hk::bench::Case c(p, 5);
        c.poison_outputs();
        run_public(*p, c, options_of(*p));
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        auto r = c.check();
        EXPECT_TRUE(r.ok) << p->key() << ": " << r.message;
      }
}

// deterministic = true: two runs give the same bytes.
TEST(AttentionPublic, DeterministicBackwardIsBitwiseRepeatable) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (int64_t d : {64, 128, 48, 256}) {
    auto p = std::make_shared<AttentionProblem>(2, 600, 600, 8, 2, d, DType::kBF16, true);
    p->causal = true;
    p->deterministic = true;
    hk::bench::Case c(p, 9);
    std::vector<std::vector<uint8_t>> first;
    for (int run = 0; run < 3; ++run) {
      c.poison_outputs();
      run_public(*p, c, options_of(*p));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      hk::Operands ops = c.operands();
      for (size_t o = 0; o < ops.out.size(); ++o) {
        std::vector<uint8_t> bytes(hk::host::storage_bytes(p->outputs()[o]));
        ASSERT_EQ(cudaMemcpy(bytes.data(), ops.out[o].data, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        if (run == 0) first.push_back(bytes);
        else EXPECT_TRUE(bytes == first[o]) << p->key() << " output " << o << " differs on run " << run;
      }
    }
    auto r = c.check();
    EXPECT_TRUE(r.ok) << p->key() << ": " << r.message;
  }
}

// A one-hot softmax row returns V's row exactly. k = q with entries ~N(0, 100^2): a query's score
// with its own key (|q|^2, about 1.3e6 at D = 128 before scaling) leads every other by more than
// ten standard deviations, so each row's softmax is exactly one-hot, and its one probability must
// be exp2(0) = 1. Computed as exp2(s * c - max * c) it is 2^(half an ulp of max * c) instead, and
// O lands an ulp off V (the backward then carries that ulp into every dS of the row).
TEST(AttentionPublic, OneHotRowsReturnVExactly) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t S = 300, H = 2;
  std::mt19937 rng(11);
  std::normal_distribution<float> big(0.f, 100.f), unit(0.f, 1.f);
  for (int64_t d : {64, 128})
    for (bool causal : {false, true}) {
      const size_t n = size_t(S * H * d);
      std::vector<__nv_bfloat16> q(n), v(n), o(n);
      for (auto& x : q) x = __float2bfloat16(big(rng));
      for (auto& x : v) x = __float2bfloat16(unit(rng));
      hk::bench::DeviceBuffer bq(int64_t(n) * 2), bv(int64_t(n) * 2), bout(int64_t(n) * 2), blse(H * S * 4);
      void *dq = bq.get(), *dv = bv.get(), *dout = bout.get(), *dlse = blse.get();
      ASSERT_EQ(cudaMemcpy(dq, q.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dv, v.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dout, 0xff, n * 2), cudaSuccess);  // NaN: a row not written fails
      const TensorView tq(dq, DType::kBF16, {1, S, H, d}), tv(dv, DType::kBF16, {1, S, H, d});
      const TensorView to(dout, DType::kBF16, {1, S, H, d}), tl(dlse, DType::kF32, {1, H, S});
      AttentionOptions opt;
      opt.causal = causal;
      hk::attention(tq, tq, tv, to, tl, opt);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(o.data(), dout, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      int64_t wrong = 0, first = -1;
      for (size_t i = 0; i < n; ++i)
        if (std::memcmp(&o[i], &v[i], 2) != 0 && wrong++ == 0) first = int64_t(i);
      EXPECT_EQ(wrong, 0) << "D " << d << (causal ? " causal" : "") << ": first at " << first << ", O "
                          << (first < 0 ? 0.f : __bfloat162float(o[size_t(first)])) << " for V "
                          << (first < 0 ? 0.f : __bfloat162float(v[size_t(first)]));
    }
}

// The public varlen ops (dispatch included) on packed tensors with padded rows, forward and
// backward, against the fp64 reference of the same problem.
TEST(AttentionPublic, VarlenThroughPaddedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (bool bwd : {false, true})
    for (int64_t d : {64, 128, 96, 40}) {
      auto p = std::make_shared<AttentionProblem>(
          AttentionProblem::varlen({113, 0, 1, 203, 64}, {150, 7, 1, 203, 0}, 8, 2, d, DType::kBF16, bwd));
      p->causal = true;
      const int64_t row = d + 8;  // padded rows, 16-byte multiples
      p->str_q = {0, 8 * row, row};
      hk::bench::Case c(p, 5);
      c.poison_outputs();
      hk::Operands ops = c.operands();
      AttentionOptions opt = options_of(*p);
      if (!bwd)
        hk::attention_varlen(ops.in[0], ops.in[1], ops.in[2], ops.in[3], ops.in[4], p->seqlen_q, p->seqlen_k,
                             ops.out[0], ops.out[1], opt);
      else
        hk::attention_varlen_backward(ops.in[0], ops.in[1], ops.in[2], ops.in[3], ops.in[4], ops.in[5], ops.in[6],
                                      ops.in[7], p->seqlen_q, p->seqlen_k, ops.out[0], ops.out[1], ops.out[2], opt);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      auto r = c.check();
      EXPECT_TRUE(r.ok) << p->key() << ": " << r.message;
    }
}

// Wrong prefix sums (decreasing, past the total, sequences longer than max_seqlen) are not read
// on the host (that would synchronize); the kernels clamp them. The forward and the backward
// (v05, v07) run with such sums, and no byte outside the outputs changes: guard bands of a
// known pattern before and after each output stay intact (memcheck sees any read outside).
TEST(AttentionPublic, VarlenWrongPrefixSumsStayInBounds) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t total = 200, H = 2, d = 128, guard = 4096;  // guard: elements each side
  const int64_t n = total * H * d;
  std::mt19937 rng(5);
  std::normal_distribution<float> unit(0.f, 1.f);
  std::vector<__nv_bfloat16> host(static_cast<size_t>(n));
  std::vector<hk::bench::DeviceBuffer> allocs;
  // A tensor of `count` elements of `bytes` each inside guard bands of 0x5a bytes.
  auto guarded = [&](int64_t count, int64_t bytes, bool random) {
    allocs.emplace_back((count + 2 * guard) * bytes);
    char* base = static_cast<char*>(allocs.back().get());
    EXPECT_EQ(cudaMemset(base, 0x5a, size_t((count + 2 * guard) * bytes)), cudaSuccess);
    char* p = base + guard * bytes;
    if (random) {
      for (auto& x : host) x = __float2bfloat16(unit(rng));
      EXPECT_EQ(cudaMemcpy(p, host.data(), size_t(count * bytes), cudaMemcpyHostToDevice), cudaSuccess);
    }
    return p;
  };
  auto guards_intact = [&](char* p, int64_t count, int64_t bytes) {
    std::vector<unsigned char> before(size_t(guard * bytes)), after(size_t(guard * bytes));
    EXPECT_EQ(cudaMemcpy(before.data(), p - guard * bytes, before.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(after.data(), p + count * bytes, after.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t changed = 0;
    for (unsigned char c : before) changed += c != 0x5a;
    for (unsigned char c : after) changed += c != 0x5a;
    return changed;
  };
  const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> sums = {
      {{0, 150, 60, 400}, {0, 250, 100, 50}},  // decreasing, past the total
      {{0, 200, 200, 200}, {0, 10, 200, 200}},  // one sequence longer than max_seqlen
      {{-5, 0, 130, 190}, {7, 3, 150, 150}},    // negative, and stopping short of the total
  };
  for (const auto& [cq, ck] : sums) {
    char* q = guarded(n, 2, true);
    char* k = guarded(n, 2, true);
    char* v = guarded(n, 2, true);
    char* dout = guarded(n, 2, true);
    char* o = guarded(n, 2, false);
    char* lse = guarded(H * total, 4, false);
    char *dq = guarded(n, 2, false), *dk = guarded(n, 2, false), *dv = guarded(n, 2, false);
    char* cu = guarded(8, 4, false);
    ASSERT_EQ(cudaMemcpy(cu, cq.data(), 16, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(cu + 16, ck.data(), 16, cudaMemcpyHostToDevice), cudaSuccess);
    auto tv = [&](char* p) { return TensorView(p, DType::kBF16, {total, H, d}); };
    const TensorView tl(lse, DType::kF32, {H, total}), cuq(cu, DType::kI32, {4}), cuk(cu + 16, DType::kI32, {4});
    AttentionOptions opt;
    opt.causal = true;
    for (bool det : {false, true}) {
      opt.deterministic = det;
      hk::attention_varlen(tv(q), tv(k), tv(v), cuq, cuk, 128, 128, tv(o), tl, opt);
      hk::attention_varlen_backward(tv(q), tv(k), tv(v), tv(o), tv(dout), tl, cuq, cuk, 128, 128, tv(dq), tv(dk),
                                    tv(dv), opt);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    for (char* p : {o, dq, dk, dv}) EXPECT_EQ(guards_intact(p, n, 2), 0) << "cu_q " << cq[1] << ", " << cq[2];
    EXPECT_EQ(guards_intact(lse, H * total, 4), 0);
    allocs.clear();
  }
}

// The fp64 references of every test problem, timed (the GPU sweep computes each once per rung
// that runs it; keep the total small). Run with --gtest_also_run_disabled_tests.
TEST(AttentionReference, DISABLED_CostOfEveryTestProblem) {
  double total = 0;
  for (auto& p : hk::Registry::get().family("attention")->test_problems()) {
    std::vector<hk::HostTensor> in;
    uint64_t seed = 1;
    for (auto& spec : p->inputs()) in.push_back(hk::host::random_tensor(spec, seed++));
    auto t0 = std::chrono::steady_clock::now();
    hktest::run_reference(*p, in);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += s;
    if (s > 0.2) std::printf("%8.3f s  %s\n", s, p->key().c_str());
  }
  std::printf("total %.2f s over %zu problems\n", total, hk::Registry::get().family("attention")->test_problems().size());
}
