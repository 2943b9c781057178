// bench/case.hpp — one problem made real on the device: fresh random inputs, poisoned outputs,
// the fp64 reference, and the check. Shared by the test binary and `hk bench` (verify-then-time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hk/registry.hpp"

namespace hk::bench {

// Owns one cudaMalloc'd allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  int64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

struct CheckResult {
  bool ok = true;
  int64_t checked = 0;
  int64_t mismatches = 0;
  double max_abs_err = 0;
  std::string message;  // first mismatch: output name, coordinates, got, expected, bound
};

class Case {
 public:
  Case(ProblemPtr problem, uint64_t seed);
  const Problem& problem() const { return *problem_; }
  ProblemPtr problem_ptr() const { return problem_; }
  // The device buffers as the variants take them. Built once: a problem's input specs may be
  // costly to make (attention's backward lists a value per lse row), and hk bench hands these to
  // every timed launch.
  const Operands& operands() const { return operands_; }
  // Draws fresh inputs (new seed) and uploads them; the reference is recomputed lazily.
  void refresh_inputs(uint64_t seed);
  void poison_outputs(cudaStream_t stream = nullptr);
  // Downloads every output, compares with the fp64 reference under the problem's tolerance
  // and checks that strided padding still holds the poison pattern.
  CheckResult check();
  // poison, run `v`, synchronize, check.
  CheckResult run_and_check(const Variant& v, cudaStream_t stream = nullptr);

 private:
  ProblemPtr problem_;
  std::vector<HostTensor> in_host_;
  std::vector<TensorSpec> in_specs_, out_specs_;
  std::vector<DeviceBuffer> in_dev_, out_dev_;
  Operands operands_;
  std::vector<HostTensor> ref_;
  bool ref_ready_ = false;
  // Sampled check (Problem::reference_at): positions per output; empty = full reference.
  std::vector<std::vector<int64_t>> sample_;
  // Per output: the downloaded bytes and their decoded values, reused by every check.
  std::vector<std::vector<uint8_t>> storage_;
  std::vector<std::vector<double>> got_;
};

// Compares logical values: NaN must meet NaN, Inf the same Inf, finite |got-ref| <= atol+rtol|ref|.
// With `flat` non-empty, got[k] and ref[k] belong to flat position flat[k] (a sampled check).
CheckResult compare(const TensorSpec& spec, const std::vector<double>& got,
                    const std::vector<double>& ref, const Tolerance& tol,
                    const std::vector<int64_t>& flat = {});

}  // namespace hk::bench
