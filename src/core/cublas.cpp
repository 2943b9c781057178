#include "core/cublas.hpp"

#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/capture.hpp"  // RelaxedCapture
#include "hk/device.hpp"
#include "hk/error.hpp"

namespace hk {
namespace detail {
namespace {

struct Releases {
  std::mutex mu;
  std::vector<std::function<void()>> fns;
};
// Never destroyed: static destructors run in no useful order against the CUDA runtime's own
// teardown, so caches are freed by release_cached_resources() or by the process's exit.
Releases& releases() {
  static auto* r = new Releases;
  return *r;
}

struct Handles {
  std::mutex mu;
  std::map<std::pair<std::thread::id, int>, cublasHandle_t> by_thread_device;
};
Handles& handles() {
  static auto* h = [] {
    auto* s = new Handles;
    on_release([s] {
      std::lock_guard<std::mutex> lock(s->mu);
      for (auto& [key, h] : s->by_thread_device) cublasDestroy(h);
      s->by_thread_device.clear();
    });
    return s;
  }();
  return *h;
}

struct LtHandle {
  std::mutex mu;
  cublasLtHandle_t handle = nullptr;
};
LtHandle& lt_handle() {
  static auto* h = [] {
    auto* s = new LtHandle;
    on_release([s] {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->handle) cublasLtDestroy(s->handle);
      s->handle = nullptr;
    });
    return s;
  }();
  return *h;
}

}  // namespace

cublasLtHandle_t cublaslt_handle() {
  LtHandle& s = lt_handle();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.handle) {
    RelaxedCapture relaxed;  // the handle allocates; a first call may come under a graph capture
    const cublasStatus_t st = cublasLtCreate(&s.handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      s.handle = nullptr;
      HK_THROW(kCuda, "cublasLtCreate failed: ", cublasGetStatusString(st));
    }
  }
  return s.handle;
}

cublasHandle_t cublas_handle() {
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  Handles& s = handles();
  std::lock_guard<std::mutex> lock(s.mu);
  auto [it, fresh] = s.by_thread_device.try_emplace({std::this_thread::get_id(), dev}, nullptr);
  if (fresh) {
    RelaxedCapture relaxed;
    cublasStatus_t st = cublasCreate(&it->second);
    if (st != CUBLAS_STATUS_SUCCESS) {
      s.by_thread_device.erase(it);
      HK_THROW(kCuda, "cublasCreate failed: ", cublasGetStatusString(st));
    }
  }
  return it->second;
}

void on_release(std::function<void()> release) {
  Releases& r = releases();
  std::lock_guard<std::mutex> lock(r.mu);
  r.fns.push_back(std::move(release));
}

}  // namespace detail

void release_cached_resources() {
  detail::Releases& r = detail::releases();
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    fns = r.fns;
  }
  for (auto& fn : fns) fn();
}

}  // namespace hk
