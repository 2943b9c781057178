// profile/collector.cpp — CUPTI Activity API for the records, CUPTI callback API for attribution.
//
// How a kernel finds its range. CUPTI only sees NVTX ranges through NVTX injection: the
// environment variable NVTX_INJECTION64_PATH must name libcupti before the process's first NVTX
// call, and nsys/ncu set it to their own library. That misses every range when anything touched
// NVTX before the collector started (a Python import, an earlier op) and leaves registered-string
// handles to resolve. So the collector does not read NVTX. hopperkit's ranges (core/trace.hpp)
// emit NVTX for nsys/ncu *and* keep a thread-local stack of their names; CUPTI's callback API
// calls us on the launching thread at the entry of every runtime and driver API call, with the
// correlation id that the resulting kernel, memcpy or memset record will carry, and we tag that
// id with the stack open at that moment. Both domains are tagged because a record carries the id
// of whichever call issued it: <<<>>> and cudaLaunchKernel are runtime calls, library kernels
// (cuBLAS) come through driver calls, memcpy records carry both ids and memset records only the
// driver call's. Calls made outside any hopperkit range are not tagged, so the cost outside
// ranges is CUPTI's callback dispatch alone. Ranges opened by other code's own NVTX calls are not
// seen; such code can open an hk::trace::Range instead.
#include "profile/collector.hpp"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fmt/format.h>

#include <cstdlib>
#include <iterator>
#include <mutex>

#include "core/trace.hpp"
#include "hk/error.hpp"
#include "profile/records.hpp"

namespace hk::profile {
namespace {

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr size_t kBufferAlign = 8;  // CUPTI's requirement for activity buffers

// What the callbacks write into. g_mu guards the trace and the flag and is never held across a
// CUPTI or CUDA call (CUPTI may call back on the same thread).
std::mutex g_mu;
Trace g_trace;
bool g_running = false;
// Serializes start() and stop(), and owns the subscriber handle between them.
std::mutex g_lifecycle_mu;
CUpti_SubscriberHandle g_subscriber = nullptr;

const char* result_string(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "unknown CUPTI error";
}

const char* kind_name(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    default: return "activity";
  }
}

void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  const std::vector<std::string_view>& open = trace::open_ranges();
  if (open.empty()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_running) g_trace.tag(cb->correlationId, open);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;  // a null buffer makes CUPTI drop records (and count them)
  *max_records = 0;                    // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* record = nullptr;
    while (g_running && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
      append_record(g_trace, record);
    size_t dropped = 0;
    if (g_running && cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
      g_trace.dropped += dropped;
  }
  std::free(buffer);
}

void stop_cupti(int enabled_kinds) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (int i = 0; i < enabled_kinds; ++i) cuptiActivityDisable(kKinds[i]);
  cuptiUnsubscribe(g_subscriber);
  g_subscriber = nullptr;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

}  // namespace

std::unique_ptr<Collector> Collector::start(std::string* why) {
  std::lock_guard<std::mutex> lifecycle(g_lifecycle_mu);
  if (g_subscriber) {
    *why = "a collector is already running in this process";
    return nullptr;
  }
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "hopperkit profile";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof holder;
  CUptiResult r = cuptiSubscribe_v2(&g_subscriber, on_api_call, nullptr, &params);
  if (r != CUPTI_SUCCESS) {
    g_subscriber = nullptr;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      *why = fmt::format("another CUPTI client owns this process ({}); the collector stays off under ncu, nsys, "
                         "compute-sanitizer and cuda-gdb",
                         holder[0] ? holder : "a profiler or debugger");
    else
      *why = fmt::format("cuptiSubscribe failed: {}", result_string(r));
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_trace = Trace{};
    g_running = true;
  }
  auto fail = [&](const std::string& what, CUptiResult res, int enabled_kinds) -> std::unique_ptr<Collector> {
    *why = fmt::format("{} failed: {}; another profiler (ncu, compute-sanitizer) may own activity tracing", what,
                       result_string(res));
    stop_cupti(enabled_kinds);
    std::lock_guard<std::mutex> lock(g_mu);
    g_running = false;
    return nullptr;
  };
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API})
    if ((r = cuptiEnableDomain(1, g_subscriber, d)) != CUPTI_SUCCESS) return fail("cuptiEnableDomain", r, 0);
  if ((r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
    return fail("cuptiActivityRegisterCallbacks", r, 0);
  for (int i = 0; i < int(std::size(kKinds)); ++i)
    if ((r = cuptiActivityEnable(kKinds[i])) != CUPTI_SUCCESS)
      return fail(fmt::format("cuptiActivityEnable({})", kind_name(kKinds[i])), r, i);
  return std::unique_ptr<Collector>(new Collector());
}

Trace Collector::stop() {
  if (!running_) HK_THROW(kValue, "profile: Collector::stop() called twice");
  running_ = false;
  std::lock_guard<std::mutex> lifecycle(g_lifecycle_mu);
  // Records of work still running would be missing; a failed synchronize still stops CUPTI.
  cudaError_t sync = cudaDeviceSynchronize();
  stop_cupti(int(std::size(kKinds)));
  Trace out;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_running = false;
    out = std::move(g_trace);
    g_trace = Trace{};
  }
  HK_CHECK_CUDA(sync);
  return out;
}

Collector::~Collector() {
  if (!running_) return;
  try {
    stop();
  } catch (const Error&) {
    // A destructor must not throw; the trace is discarded anyway.
  }
}

DeviceLimits current_device_limits() {
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  HK_CHECK_CUDA(cudaGetDeviceProperties(&p, dev));
  DeviceLimits d;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.warp_size = p.warpSize;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  d.regs_per_block = p.regsPerBlock;
  d.regs_per_sm = p.regsPerMultiprocessor;
  d.smem_per_block = static_cast<int64_t>(p.sharedMemPerBlock);
  d.smem_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  d.smem_per_sm = static_cast<int64_t>(p.sharedMemPerMultiprocessor);
  d.reserved_smem_per_block = static_cast<int64_t>(p.reservedSharedMemPerBlock);
  return d;
}

}  // namespace hk::profile
