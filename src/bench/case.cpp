#include "bench/case.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cmath>
#include <mutex>

#include "core/host.hpp"

namespace hk::bench {

DeviceBuffer::DeviceBuffer(int64_t bytes) : bytes_(bytes) {
  if (bytes > 0) HK_CHECK_CUDA(cudaMalloc(&ptr_, static_cast<size_t>(bytes)));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

// cudaMemcpy between device memory and a host buffer of `bytes`, with the host buffer
// page-locked for the copy: a pageable copy goes through the driver's staging buffer, and hk
// bench copies every variant's 2^27-2^28-element output. Registering costs a page walk, a few
// ms for 256 MB; if it fails the copy runs pageable. (With it, a full check of a 2^27-element
// softmax output took 0.09 s on a 16-core H200 host, 2026-11.)
static void copy_pinned(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return;
  // Registered for this copy only, and unregistered even when the copy throws: a buffer left
  // registered would be freed or reused while still page-locked.
  struct Pin {
    void* host = nullptr;
    ~Pin() {
      if (host) (void)cudaHostUnregister(host);
    }
  } pin;
  void* host = kind == cudaMemcpyHostToDevice ? const_cast<void*>(src) : dst;
  if (bytes >= (size_t(1) << 20) && cudaHostRegister(host, bytes, cudaHostRegisterDefault) == cudaSuccess)
    pin.host = host;
  else
    (void)cudaGetLastError();  // a refused registration leaves an error behind
  HK_CHECK_CUDA(cudaMemcpy(dst, src, bytes, kind));
  // NOTE: from pageable memory cudaMemcpy returns once the data is staged, before the DMA into
  // device memory has finished; the legacy stream orders it only against itself. A kernel on a
  // non-blocking stream (the graph tests' capture stream) could read the inputs before they land.
  if (kind == cudaMemcpyHostToDevice && !pin.host) HK_CHECK_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
}

Case::Case(ProblemPtr problem, uint64_t seed) : problem_(std::move(problem)) {
  in_specs_ = problem_->inputs();
  out_specs_ = problem_->outputs();
  for (auto& spec : in_specs_) in_dev_.emplace_back(host::storage_bytes(spec));
  for (auto& spec : out_specs_) out_dev_.emplace_back(host::storage_bytes(spec));
  for (size_t i = 0; i < in_specs_.size(); ++i)
    operands_.in.emplace_back(in_dev_[i].get(), in_specs_[i].dtype, in_specs_[i].shape, in_specs_[i].strides);
  for (size_t i = 0; i < out_specs_.size(); ++i)
    operands_.out.emplace_back(out_dev_[i].get(), out_specs_[i].dtype, out_specs_[i].shape, out_specs_[i].strides);
  storage_.resize(out_specs_.size());
  got_.resize(out_specs_.size());
  refresh_inputs(seed);
}

void Case::refresh_inputs(uint64_t seed) {
  const auto& specs = in_specs_;
  in_host_.clear();
  for (size_t i = 0; i < specs.size(); ++i) {
    in_host_.push_back(host::random_tensor(specs[i], seed * 131 + i));
    std::vector<uint8_t> storage;
    host::encode(specs[i], in_host_.back().values, storage);
    copy_pinned(in_dev_[i].get(), storage.data(), storage.size(), cudaMemcpyHostToDevice);
  }
  ref_ready_ = false;
}

void Case::poison_outputs(cudaStream_t stream) {
  for (auto& b : out_dev_)
    if (b.bytes() > 0) HK_CHECK_CUDA(cudaMemsetAsync(b.get(), host::kPoisonByte, b.bytes(), stream));
}

static std::string coords(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> c(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    c[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return fmt::format("[{}]", fmt::join(c, ", "));
}

CheckResult compare(const TensorSpec& spec, const std::vector<double>& got,
                    const std::vector<double>& ref, const Tolerance& tol,
                    const std::vector<int64_t>& flat) {
  CheckResult r;
  r.checked = static_cast<int64_t>(ref.size());
  std::atomic<int64_t> bad{0};
  std::mutex mu;
  int64_t first = -1;
  double max_err = 0;
  host::parallel_for(r.checked, [&](int64_t b, int64_t e) {
    int64_t local_bad = 0, local_first = -1;
    double local_max = 0;
    for (int64_t i = b; i < e; ++i) {
      double g = got[i], x = ref[i];
      bool ok;
      if (std::isnan(x)) ok = std::isnan(g);
      else if (std::isinf(x)) ok = g == x;
      else {
        double err = std::fabs(g - x);
        ok = err <= tol.atol + tol.rtol * std::fabs(x);  // false for NaN g
        if (std::isfinite(err)) local_max = std::max(local_max, err);
        else ok = false;
      }
      if (!ok) {
        if (local_first < 0) local_first = i;
        ++local_bad;
      }
    }
    bad += local_bad;
    std::lock_guard<std::mutex> lock(mu);
    max_err = std::max(max_err, local_max);
    if (local_first >= 0 && (first < 0 || local_first < first)) first = local_first;
  });
  r.mismatches = bad;
  r.max_abs_err = max_err;
  if (first >= 0) {
    r.ok = false;
    r.message = fmt::format("{}{}: got {:.9g}, expected {:.9g} (bound {:.3g}); {} of {} {}elements differ",
                            spec.name, coords(spec.shape, flat.empty() ? first : flat[first]), got[first],
                            ref[first], tol.atol + tol.rtol * std::fabs(ref[first]), r.mismatches,
                            r.checked, flat.empty() ? "" : "sampled ");
  }
  return r;
}

CheckResult Case::check() {
  if (!ref_ready_ && problem_->flops() > Problem::kSampledCheckFlops) {
    // Try the sampled reference: corners plus 2^16 random positions per output.
    ref_.clear();
    sample_.clear();
    bool ok = true;
    for (size_t o = 0; o < out_specs_.size() && ok; ++o) {
      int64_t n = 1;
      for (int64_t d : out_specs_[o].shape) n *= d;
      std::vector<int64_t> flat;
      if (n > 0) {
        flat = {0, n - 1};
        if (out_specs_[o].shape.size() >= 2) {
          int64_t cols = out_specs_[o].shape.back();
          flat.push_back(cols - 1);
          flat.push_back(n - cols);
        }
        host::Rng rng(0x5EED + o);
        for (int k = 0; k < (1 << 16) && k < n; ++k) flat.push_back(static_cast<int64_t>(rng.next() % uint64_t(n)));
      }
      HostTensor t{out_specs_[o], {}};
      ok = problem_->reference_at(in_host_, static_cast<int>(o), flat, t.values);
      ref_.push_back(std::move(t));
      sample_.push_back(std::move(flat));
    }
    if (ok) ref_ready_ = true;
    else sample_.clear();
  }
  if (!ref_ready_) {
    ref_.clear();
    sample_.clear();
    for (auto& spec : out_specs_) {
      HostTensor t{spec, {}};
      int64_t n = 1;
      for (int64_t d : spec.shape) n *= d;
      t.values.assign(n, std::nan(""));
      ref_.push_back(std::move(t));
    }
    problem_->reference(in_host_, ref_);
    ref_ready_ = true;
  }
  CheckResult total;
  for (size_t i = 0; i < out_specs_.size(); ++i) {
    const TensorSpec& spec = out_specs_[i];
    // Buffers kept across checks: `hk bench` checks every variant of a 2^28-element problem,
    // and fresh gigabyte vectors cost more page faults than the copy and the compare.
    std::vector<uint8_t>& storage = storage_[i];
    std::vector<double>& got = got_[i];
    storage.resize(out_dev_[i].bytes());
    copy_pinned(storage.data(), out_dev_[i].get(), storage.size(), cudaMemcpyDeviceToHost);
    host::decode(spec, storage, got);
    std::vector<double> picked;
    if (!sample_.empty()) {
      picked.resize(sample_[i].size());
      for (size_t k = 0; k < picked.size(); ++k) picked[k] = got[sample_[i][k]];
    }
    CheckResult r = compare(spec, sample_.empty() ? got : picked, ref_[i].values,
                            problem_->tolerance(static_cast<int>(i)),
                            sample_.empty() ? std::vector<int64_t>{} : sample_[i]);
    total.checked += r.checked;
    total.mismatches += r.mismatches;
    total.max_abs_err = std::max(total.max_abs_err, r.max_abs_err);
    if (!r.ok && total.ok) {
      total.ok = false;
      total.message = r.message;
    }
    // Padding between strided rows must still be poison: nothing may write outside the view.
    // NOTE: skipped for explicit strides that are contiguous (no padding to check): the offset
    // walk took ~1.5 s per 2^27-element output on a 16-core H200 host (2026-11: rmsnorm's and the
    // broadcast ops' outputs carry their row stride explicitly; softmax's, without it, 0.09 s).
    if (!spec.strides.empty() && spec.strides != contiguous_strides(spec.shape) && spec.dtype != DType::kI4) {
      std::vector<uint8_t> touched(storage.size(), 0);
      int esize = dtype_bits(spec.dtype) / 8;
      for (int64_t off : host::storage_offsets(spec))
        for (int k = 0; k < esize; ++k) touched[off * esize + k] = 1;
      for (size_t b = 0; b < storage.size(); ++b)
        if (!touched[b] && storage[b] != host::kPoisonByte) {
          if (total.ok) total.message = fmt::format("{}: byte {} of the padding between rows was written", spec.name, b);
          total.ok = false;
          ++total.mismatches;
          break;
        }
    }
  }
  return total;
}

CheckResult Case::run_and_check(const Variant& v, cudaStream_t stream) {
  poison_outputs(stream);
  v.run(*problem_, operands(), stream);
  HK_CHECK_CUDA(cudaStreamSynchronize(stream));
  return check();
}

}  // namespace hk::bench
