// attention v07_wgmma_backward beyond the registry sweep: which problems it takes and what the
// dispatch picks (CPU); on the GPU, problems with several 64-row query blocks and 128-key blocks
// (Sq != Sk both ways, causal, windows, key blocks no query sees, GQA 4:1, softcap, f16, padded
// operands and outputs) against the fp64 reference, atomic and deterministic, and the
// deterministic mode bitwise repeatable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attention/attention_op.hpp"
#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"

using hk::AttentionLayout;
using hk::AttentionProblem;
using hk::DType;

namespace {

const hk::Variant* v07() { return hk::Registry::get().variant("attention", "v07_wgmma_backward"); }

struct Shape {
  int64_t b, sq, sk, hq, hkv, d;
  bool causal = false;
  int64_t wl = -1, wr = -1;
  double softcap = 0, scale = 0;
  DType dtype = DType::kBF16;
  int64_t pad = 0;  // extra elements per (s, h) row of every operand, outputs included
  AttentionLayout layout = AttentionLayout::kBSHD;
};

std::shared_ptr<AttentionProblem> make(const Shape& s, bool deterministic) {
  auto p = std::make_shared<AttentionProblem>(s.b, s.sq, s.sk, s.hq, s.hkv, s.d, s.dtype, true, s.layout);
  p->causal = s.causal;
  p->window_left = s.wl, p->window_right = s.wr;
  p->softcap = s.softcap;
  if (s.scale > 0) p->scale = s.scale;
  p->deterministic = deterministic;
  if (s.pad > 0) {
    auto padded = [&](int64_t seq, int64_t heads) -> hk::AttnStrides {
      const int64_t row = s.d + s.pad;
      if (s.layout == AttentionLayout::kBSHD) return {seq * heads * row, heads * row, row};
      return {heads * seq * row, row, seq * row};
    };
    p->str_q = p->str_o = p->str_do = p->str_dq = padded(s.sq, s.hq);
    p->str_k = p->str_v = p->str_dk = p->str_dv = padded(s.sk, s.hkv);
  }
  return p;
}

// A braced list, not push_back: gcc 13 at -O3 reports a false -Wstringop-overflow in the
// vector's reallocation path for this aggregate.
std::vector<Shape> shapes() {
  using L = AttentionLayout;
  constexpr DType bf16 = DType::kBF16, f16 = DType::kF16;
  return {
      {1, 400, 520, 4, 1, 128, true},                   // GQA 4:1, 7 query x 5 key blocks, Sq < Sk
      {1, 520, 400, 4, 1, 64, true},                    // Sq > Sk: the first 120 rows see no key
      {2, 333, 270, 8, 2, 64, false, 100, 20},          // window, Sq > Sk
      {1, 270, 333, 4, 1, 128, true, 70},               // causal with a left window
      {1, 100, 500, 4, 1, 128, false, 10, -1},          // key blocks 0-2: no query sees them
      {1, 256, 384, 2, 2, 128, false, -1, -1, 8.0, 0.5},  // softcap, large scores
      {1, 300, 300, 4, 1, 64, true, -1, -1, 0, 0, f16},
      {1, 200, 330, 4, 1, 128, true, -1, -1, 0, 0, f16},
      {2, 200, 330, 4, 1, 128, true, -1, -1, 0, 0, bf16, 8, L::kBHSD},   // padded rows, bhsd
      {1, 129, 257, 8, 2, 64, false, -1, -1, 0, 0, bf16, 24, L::kBSHD},  // padded rows
      // the 16- and 32-column tiles: 32- and 64-byte rows, dQ tiles of D columns; D = 8 and 24
      // with TMA's zero fill past D
      {1, 400, 520, 4, 1, 16, true},                    // GQA 4:1, 7 query x 5 key blocks
      {2, 333, 270, 8, 2, 32, false, 100, 20},          // window, Sq > Sk
      {1, 256, 384, 2, 2, 16, false, -1, -1, 8.0, 0.5},  // softcap, large scores
      {1, 300, 300, 4, 1, 32, true, -1, -1, 0, 0, f16},
      {1, 129, 257, 8, 2, 24, false, -1, -1, 0, 0, bf16, 8, L::kBHSD},  // padded rows, bhsd
      {1, 200, 330, 2, 1, 8, true},
      // the 256-column tile: 64 keys per CTA, dK / dV / dQ columns split between the warpgroups
      {1, 400, 520, 4, 1, 256, true},                           // GQA 4:1, 7 query x 9 key blocks
      {2, 333, 270, 8, 2, 256, false, 100, 20},                 // window, Sq > Sk
      {1, 256, 384, 2, 2, 256, false, -1, -1, 8.0, 0.5},        // softcap, large scores
      {1, 200, 330, 4, 1, 192, true, -1, -1, 0, 0, f16},        // D = 192: a whole chunk zero-filled
      {1, 200, 330, 4, 1, 136, true, -1, -1, 0, 0, bf16, 8, L::kBHSD},  // D = 136, padded rows, bhsd
  };
}

std::vector<std::vector<uint8_t>> download(const AttentionProblem& p, hk::bench::Case& c) {
  std::vector<std::vector<uint8_t>> out;
  hk::Operands ops = c.operands();
  for (size_t o = 0; o < ops.out.size(); ++o) {
    std::vector<uint8_t> bytes(hk::host::storage_bytes(p.outputs()[o]));
    EXPECT_EQ(cudaMemcpy(bytes.data(), ops.out[o].data, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace

TEST(AttentionV07, SupportsAndDispatch) {
  const hk::Variant* v = v07();
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->is(hk::kFlagProduction));
  auto& reg = hk::Registry::get();
  for (const Shape& s : shapes())
    for (bool det : {false, true}) {
      auto p = make(s, det);
      EXPECT_EQ(v->supports(*p), "") << p->key();
      EXPECT_EQ(reg.pick(*p).name(), "v07_wgmma_backward") << p->key();
    }
  auto declined = [&](AttentionProblem p, const std::string& part) {
    const std::string why = v->supports(p);
    EXPECT_NE(why.find(part), std::string::npos) << p.key() << ": \"" << why << "\"";
  };
  declined(AttentionProblem(1, 64, 64, 2, 2, 64, DType::kBF16, false), "backward only");
  declined(AttentionProblem(1, 64, 64, 2, 2, 100, DType::kBF16, true), "multiple of 8 up to 256");
  declined(AttentionProblem(1, 64, 64, 2, 2, 264, DType::kF16, true), "multiple of 8 up to 256");
  declined(AttentionProblem(1, 64, 64, 2, 2, 64, DType::kF32, true), "bf16 or f16");
  declined(AttentionProblem(1, 64, 0, 2, 2, 64, DType::kBF16, true), "empty");
  AttentionProblem rows3(1, 100, 100, 2, 1, 64, DType::kBF16, true);
  rows3.str_k = {100 * 67, 67, 67};  // rows of 67 elements: not 16-byte multiples
  declined(rows3, "multiples of 8");
  AttentionProblem mis(1, 64, 64, 2, 2, 128, DType::kBF16, true);
  mis.align_bytes = 8;
  declined(mis, "aligned");
  // what the public backward runs instead
  EXPECT_EQ(reg.pick(rows3).name(), "v08_padded_pack");  // copies with 16-byte rows, v07 on them
  EXPECT_EQ(reg.pick(AttentionProblem(1, 64, 64, 2, 2, 96, DType::kBF16, true)).name(), "v07_wgmma_backward");
  EXPECT_EQ(reg.pick(AttentionProblem(1, 64, 64, 2, 2, 100, DType::kBF16, true)).name(), "v08_padded_pack");
}

// The backward's visiting rule (attention_op.hpp) over small lengths and every kind of window:
// the CTA of key block n visits query block m exactly when some row of m sees some key of n
// (attn_key_range, the mask itself), the CTAs that visit a block are consecutive, and the last
// of them is attn_bwd_last_key_block. The deterministic mode's turns count down from that
// block, so a wrong answer there would leave a CTA waiting for a turn that never comes.
TEST(AttentionV07, VisitingRuleMatchesTheMask) {
  const int64_t lens[] = {1, 2, 63, 64, 65, 100, 127, 128, 129, 200, 257, 300};
  const int64_t windows[][2] = {{-1, -1}, {-1, 0}, {0, 0}, {10, -1}, {100, 20}, {70, 0}, {0, 5}, {200, 300}, {5, 1000}, {-1, 3}};
  constexpr int bm = 64;
  int checked = 0;
  for (int bn : {64, 128})
    for (int64_t sq : lens)
      for (int64_t sk : lens)
        for (const auto& w : windows) {
          const int64_t wl = w[0], wr = w[1];
          const int nb = static_cast<int>((sk + bn - 1) / bn), mb = static_cast<int>((sq + bm - 1) / bm);
          std::vector<std::vector<bool>> visits(mb, std::vector<bool>(nb, false));
          for (int n = 0; n < nb; ++n) {
            int lo, hi;
            hk::attn_bwd_query_blocks(sq, sk, wl, wr, bm, bn, n, lo, hi);
            ASSERT_LE(0, lo);
            ASSERT_LE(hi, mb);
            for (int m = 0; m < mb; ++m) {
              bool sees = false;  // some row of block m sees some key of block n
              for (int64_t i = int64_t(m) * bm; i < std::min<int64_t>(sq, (m + 1) * int64_t(bm)); ++i) {
                const hk::KeyRange r = hk::attn_key_range(i, sq, sk, wl, wr);
                sees = sees || (r.lo <= r.hi && r.lo < (n + 1) * int64_t(bn) && r.hi >= n * int64_t(bn));
              }
              visits[m][n] = m >= lo && m < hi;
              ASSERT_EQ(visits[m][n], sees) << "Sq " << sq << " Sk " << sk << " window (" << wl << ", " << wr
                                            << ") key block " << n << " of " << bn << ", query block " << m;
            }
          }
          for (int m = 0; m < mb; ++m) {
            int first = -1, last = -1;
            for (int n = 0; n < nb; ++n)
              if (visits[m][n]) {
                if (first < 0) first = n;
                ASSERT_EQ(last, n == first ? -1 : n - 1) << "the CTAs visiting block " << m << " are not consecutive";
                last = n;
              }
            if (last >= 0) {
              EXPECT_EQ(hk::attn_bwd_last_key_block(sq, sk, wr, bm, bn, m), last)
                  << "Sq " << sq << " Sk " << sk << " window (" << wl << ", " << wr << ") query block " << m;
              ++checked;
            }
          }
        }
  EXPECT_GT(checked, 5000);
}

// Every shape, atomic and deterministic dQ, against the fp64 reference.
TEST(AttentionV07, SeveralBlocksMasksGqaAndPaddingMatchTheReference) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  uint64_t seed = 31;
  for (const Shape& s : shapes())
    for (bool det : {false, true}) {
      auto p = make(s, det);
      hk::bench::Case c(p, seed++);
      auto r = c.run_and_check(*v07());
      EXPECT_TRUE(r.ok) << p->key() << ": " << r.message;
    }
}

// deterministic = true: the same bytes on every run (dQ's additions take turns in key-block
// order; dK and dV are summed in registers).
TEST(AttentionV07, DeterministicIsBitwiseRepeatable) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (const Shape& s : {Shape{2, 520, 520, 8, 2, 64, true}, Shape{1, 450, 700, 8, 2, 128, false},
                         Shape{1, 100, 500, 4, 1, 64, false, 10, -1}, Shape{1, 450, 700, 8, 2, 256, true},
                         Shape{2, 333, 270, 8, 2, 128, false, 100, 20}, Shape{2, 520, 520, 8, 2, 16, true},
                         Shape{1, 450, 700, 8, 2, 32, false}})
  {
    auto p = make(s, true);
    hk::bench::Case c(p, 77);
    std::vector<std::vector<uint8_t>> first;
    for (int run = 0; run < 3; ++run) {
      auto r = c.run_and_check(*v07());
      EXPECT_TRUE(r.ok) << p->key() << ": " << r.message;
      auto bytes = download(*p, c);
      if (run == 0) first = bytes;
      else
        for (size_t o = 0; o < bytes.size(); ++o)
          EXPECT_TRUE(bytes[o] == first[o]) << p->key() << " output " << o << " differs on run " << run;
    }
  }
}
