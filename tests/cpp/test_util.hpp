// Helpers shared by the tests: typed-error expectation, fake device pointers, fresh host inputs
// for a problem, central finite differences of a forward reference, and host <-> device copies
// of a strided tensor.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"

namespace hktest {

// Every problem the tests and `hk bench` (quick and full suites) pose: the public op's dispatch
// chooses a production rung for it, with a reason. No device is needed: supports() checks the
// SM only when a GPU is present.
inline void expect_production_choice(const std::string& family) {
  auto& reg = hk::Registry::get();
  const hk::Family* f = reg.family(family);
  ASSERT_NE(f, nullptr) << family;
  ASSERT_TRUE(reg.has_dispatch(family)) << family;
  std::vector<hk::ProblemPtr> problems = f->test_problems();
  for (bool quick : {true, false}) {
    hk::BenchSelect sel;
    sel.quick = quick;
    for (auto& p : f->bench_problems(sel)) problems.push_back(p);
  }
  ASSERT_FALSE(problems.empty()) << family;
  for (auto& p : problems) {
    try {
      hk::Choice c = reg.choose(*p);
      ASSERT_NE(c.variant, nullptr) << family << " " << p->key();
      EXPECT_TRUE(c.variant->is(hk::kFlagProduction)) << family << " " << p->key() << ": " << c.variant->name();
      EXPECT_FALSE(c.why.empty()) << family << " " << p->key() << ": " << c.variant->name();
    } catch (const hk::Error& e) {
      ADD_FAILURE() << family << " " << p->key() << ": " << e.what();
    }
  }
}


// A fake, never-dereferenced device address: validation must reject before any launch.
inline void* fake_ptr(uintptr_t offset = 0) { return reinterpret_cast<void*>(uintptr_t(1) << 40 | offset); }

template <class F>
void expect_error(hk::ErrorKind kind, const std::string& fragment, F&& f) {
  try {
    f();
    ADD_FAILURE() << "no hk::Error thrown (expected " << hk::to_string(kind) << ")";
  } catch (const hk::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// Random inputs for `p` without the specials (finite differences need smooth, finite points).
inline std::vector<hk::HostTensor> smooth_inputs(const hk::Problem& p, uint64_t seed) {
  std::vector<hk::HostTensor> in;
  for (auto spec : p.inputs()) {
    spec.specials.clear();
    in.push_back(hk::host::random_tensor(spec, seed++));
  }
  return in;
}

inline std::vector<hk::HostTensor> run_reference(const hk::Problem& p, const std::vector<hk::HostTensor>& in) {
  std::vector<hk::HostTensor> out;
  for (auto& spec : p.outputs()) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    out.push_back({spec, std::vector<double>(n, std::nan(""))});
  }
  p.reference(in, out);
  return out;
}

// L = sum_k out[0][k] * cot[k]; returns dL/d in[input][i] by central differences.
inline double fd_grad(const hk::Problem& fwd, std::vector<hk::HostTensor> in, int input, int64_t i,
                      const std::vector<double>& cot, double h = 1e-6) {
  auto loss = [&](double delta) {
    auto moved = in;
    moved[input].values[i] += delta;
    auto out = run_reference(fwd, moved);
    double l = 0;
    for (size_t k = 0; k < cot.size(); ++k) l += out[0].values[k] * cot[k];
    return l;
  };
  return (loss(h) - loss(-h)) / (2 * h);
}

// Every element of `analytic` against finite differences of input `input` of `fwd`.
inline void expect_matches_fd(const hk::Problem& fwd, const std::vector<hk::HostTensor>& in, int input,
                              const std::vector<double>& cot, const std::vector<double>& analytic,
                              const std::string& what) {
  ASSERT_EQ(analytic.size(), in[input].values.size()) << what;
  for (size_t i = 0; i < analytic.size(); ++i) {
    double fd = fd_grad(fwd, in, input, static_cast<int64_t>(i), cot);
    EXPECT_NEAR(analytic[i], fd, 1e-6 * (1 + std::fabs(fd))) << what << "[" << i << "]";
  }
}

// Uploads `spec`'s values (logical order) into fresh device storage laid out with its strides.
inline hk::bench::DeviceBuffer upload(const hk::TensorSpec& spec, const std::vector<double>& values) {
  std::vector<uint8_t> storage;
  hk::host::encode(spec, values, storage);
  hk::bench::DeviceBuffer buf(std::max<int64_t>(int64_t(storage.size()), 16));
  if (!storage.empty()) {
    EXPECT_EQ(cudaMemcpy(buf.get(), storage.data(), storage.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  return buf;
}

// Reads `spec`'s values (logical order) back from device storage laid out with its strides.
inline std::vector<double> download(const hk::TensorSpec& spec, const void* p) {
  std::vector<uint8_t> storage(hk::host::storage_bytes(spec));
  EXPECT_EQ(cudaMemcpy(storage.data(), p, storage.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> got;
  hk::host::decode(spec, storage, got);
  return got;
}

}  // namespace hktest
