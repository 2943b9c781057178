// GeLU beyond the registry sweep: bad input (CPU), empty tensors, the public op's fallback, and
// one tensor past 2^31 elements per variant (GPU).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <cmath>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "gelu/gelu_op.hpp"
#include "hk/hk.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
using hktest::fake_ptr;

TEST(GeluBadInput, WrongDtype) {
  TensorView x(fake_ptr(), DType::kI32, {16}), y(fake_ptr(), DType::kI32, {16});
  expect_error(ErrorKind::kType, "i32", [&] { hk::gelu(x, y); });
  TensorView xb(fake_ptr(), DType::kBF16, {16}), yf(fake_ptr(), DType::kF32, {16});
  expect_error(ErrorKind::kType, "y is f32 but x is bf16", [&] { hk::gelu(xb, yf); });
}

TEST(GeluBadInput, MismatchedShapes) {
  TensorView x(fake_ptr(), DType::kBF16, {4, 8}), y(fake_ptr(), DType::kBF16, {8, 4});
  expect_error(ErrorKind::kValue, "[8x4]", [&] { hk::gelu(x, y); });
  TensorView dy(fake_ptr(), DType::kBF16, {4, 9});
  expect_error(ErrorKind::kValue, "dy has shape [4x9]", [&] { hk::gelu_backward(x, dy, x); });
}

TEST(GeluBadInput, NullPointerWithElements) {
  TensorView x(nullptr, DType::kF32, {5}), y(fake_ptr(), DType::kF32, {5});
  expect_error(ErrorKind::kValue, "null pointer with 5 elements", [&] { hk::gelu(x, y); });
}

TEST(GeluBadInput, NonContiguous) {
  TensorView x(fake_ptr(), DType::kF32, {4, 4}, {8, 1}), y(fake_ptr(), DType::kF32, {4, 4}, {8, 1});
  expect_error(ErrorKind::kNotSupported, "contiguous", [&] { hk::gelu(x, y); });
}

// Misaligned operands run the vectorized rung (peeled); the naive rungs are ladder-only.
TEST(GeluDispatch, MisalignedOperandsTakeTheVectorizedRung) {
  auto& reg = hk::Registry::get();
  const hk::Variant* v = reg.variant("gelu", "v03_vectorized");
  ASSERT_NE(v, nullptr);
  TensorView x(fake_ptr(2), DType::kBF16, {64}), y(fake_ptr(), DType::kBF16, {64});
  hk::GeluProblem p({64}, DType::kBF16, hk::GeluApprox::kTanh, false);
  p.align_bytes = std::min(x.alignment(), y.alignment());
  EXPECT_EQ(p.align_bytes, 2);
  EXPECT_EQ(v->supports(p), "");
  EXPECT_EQ(reg.choose(p).variant->name(), "v03_vectorized");
  for (const char* name : {"v01_unfused", "v02_fused"})
    EXPECT_FALSE(reg.variant("gelu", name)->is(hk::kFlagProduction)) << name;
}

TEST(GeluBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 128}), y(nullptr, DType::kBF16, {0, 128});
  EXPECT_NO_THROW(hk::gelu(x, y));
  EXPECT_NO_THROW(hk::gelu_backward(x, x, y, hk::GeluApprox::kNone));
}

TEST(GeluDispatch, DefaultIsTheVectorizedRung) {
  hk::GeluProblem p({4096}, DType::kBF16, hk::GeluApprox::kTanh, false);
  EXPECT_EQ(hk::Registry::get().choose(p).variant->name(), "v03_vectorized");
}

// Public op on the GPU on views offset into larger buffers: every operand at its own element
// offset (so its own 16-byte phase), forward and backward, bf16 and f32, odd lengths (a head,
// a body and a tail) and lengths shorter than one vector.
TEST(GeluPublic, MatchesReferenceOnMisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  struct Off { int64_t x, g, o; };
  const Off offsets[] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 0}, {0, 0, 3}, {2, 5, 1}, {3, 3, 7}, {4, 2, 6}};
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const int64_t es = dt == DType::kF32 ? 4 : 2;
    for (int64_t n : {int64_t(10007), int64_t(5)}) {
      for (bool bwd : {false, true}) {
        for (const Off& off : offsets) {
          auto p = std::make_shared<hk::GeluProblem>(std::vector<int64_t>{n}, dt, hk::GeluApprox::kTanh, bwd);
          const auto specs = p->inputs();
          std::vector<hk::HostTensor> in;
          std::vector<hk::bench::DeviceBuffer> bufs;
          std::vector<TensorView> views;
          const int64_t in_off[2] = {off.x, off.g};
          for (size_t i = 0; i < specs.size(); ++i) {
            in.push_back(hk::host::random_tensor(specs[i], 99 + i + 7 * off.o));
            std::vector<uint8_t> bytes;
            hk::host::encode(specs[i], in.back().values, bytes);
            bufs.emplace_back((n + 8) * es);
            char* ptr = static_cast<char*>(bufs.back().get()) + es * in_off[i];
            ASSERT_EQ(cudaMemcpy(ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
            views.emplace_back(ptr, dt, std::vector<int64_t>{n});
          }
          hk::bench::DeviceBuffer ob((n + 8) * es);
          ASSERT_EQ(cudaMemset(ob.get(), 0xFF, (n + 8) * es), cudaSuccess);
          char* op = static_cast<char*>(ob.get()) + es * off.o;
          TensorView out(op, dt, {n});
          if (bwd) hk::gelu_backward(views[0], views[1], out);
          else hk::gelu(views[0], out);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<uint8_t> ys((n + 8) * es);
          ASSERT_EQ(cudaMemcpy(ys.data(), ob.get(), ys.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          // Nothing outside the view is written.
          for (int64_t b = 0; b < (n + 8) * es; ++b)
            if (b < es * off.o || b >= es * (off.o + n)) {
              ASSERT_EQ(ys[b], 0xFF) << "byte " << b << " written";
            }
          const hk::TensorSpec ospec = p->outputs()[0];
          std::vector<uint8_t> body(ys.begin() + es * off.o, ys.begin() + es * (off.o + n));
          std::vector<double> got;
          hk::host::decode(ospec, body, got);
          std::vector<hk::HostTensor> ref = {{ospec, std::vector<double>(n)}};
          p->reference(in, ref);
          auto r = hk::bench::compare(ospec, got, ref[0].values, p->tolerance(0));
          EXPECT_TRUE(r.ok) << p->key() << " offsets x " << off.x << " dy " << off.g << " out " << off.o << ": "
                            << r.message;
        }
      }
    }
  }
}

// Past 2^31 elements: every bf16 input is one of 2^16 bit patterns, so the fp64 reference is a
// table and the whole output is checked. Needs ~9 GB of device memory (v01: ~35 GB).
TEST(GeluLarge, PastTwoToThe31Elements) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t n = (int64_t(1) << 31) + 4101;
  hk::GeluProblem p({n}, DType::kBF16, hk::GeluApprox::kTanh, false);
  std::vector<uint16_t> xs(n);
  hk::host::parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint64_t h = (uint64_t(i) * 0x9E3779B97F4A7C15ull) >> 40;
      // finite bf16 with |x| < 16: exponent field below 0x83, any mantissa, either sign
      xs[i] = static_cast<uint16_t>(((h & 1) << 15) | ((0x70 + (h >> 1) % 0x13) << 7) | ((h >> 8) & 0x7F));
    }
  });
  std::vector<double> table(1 << 16);
  {
    std::vector<hk::HostTensor> in = {{p.inputs()[0], std::vector<double>(1 << 16)}};
    for (int b = 0; b < (1 << 16); ++b) {
      __nv_bfloat16_raw raw{static_cast<unsigned short>(b)};
      in[0].values[b] = static_cast<double>(__bfloat162float(__nv_bfloat16(raw)));
    }
    std::vector<hk::HostTensor> out = {{p.outputs()[0], std::vector<double>(1 << 16)}};
    hk::GeluProblem small({1 << 16}, DType::kBF16, hk::GeluApprox::kTanh, false);
    small.reference(in, out);
    table = out[0].values;
  }
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  hk::bench::DeviceBuffer dx(n * 2), dy(n * 2);
  ASSERT_EQ(cudaMemcpy(dx.get(), xs.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  for (const hk::Variant* v : hk::Registry::get().variants("gelu")) {
    if (v->is(hk::kFlagReference) && free_b < size_t(3 * n * 4 + 2 * n * 2 + (1ull << 30))) {
      ADD_FAILURE() << v->name() << " needs " << 3 * n * 4 / 1e9 << " GB of temporaries, free " << free_b / 1e9;
      continue;
    }
    ASSERT_EQ(cudaMemset(dy.get(), 0xFF, n * 2), cudaSuccess);
    v->run(p, hk::Operands{{TensorView(dx.get(), DType::kBF16, {n})}, {TensorView(dy.get(), DType::kBF16, {n})}}, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> ys(n);
    ASSERT_EQ(cudaMemcpy(ys.data(), dy.get(), n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    std::atomic<int64_t> bad{0}, first{-1};
    hk::Tolerance tol = p.tolerance(0);
    hk::host::parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        __nv_bfloat16_raw raw{ys[i]};
        double got = __bfloat162float(__nv_bfloat16(raw)), want = table[xs[i]];
        if (!(std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want))) {
          int64_t expect = -1;
          first.compare_exchange_strong(expect, i);
          ++bad;
        }
      }
    });
    EXPECT_EQ(bad.load(), 0) << v->name() << ": a mismatch at element " << first.load() << " of " << n;
  }
}

TEST(GeluDispatch, EveryTestAndBenchProblemGetsAProductionRung) {
  expect_production_choice("gelu");
}
