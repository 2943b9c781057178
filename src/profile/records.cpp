#include "profile/records.hpp"

namespace hk::profile {
namespace {

const char* direction(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";  // CUDA arrays and unknown
  }
}

}  // namespace

bool append_record(Trace& trace, const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      KernelRecord r;
      r.name = k->name ? k->name : "<unnamed kernel>";
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.correlation_id = k->correlationId;
      r.device = k->deviceId;
      r.stream = k->streamId;
      r.grid = {k->gridX, k->gridY, k->gridZ};
      r.block = {k->blockX, k->blockY, k->blockZ};
      r.registers_per_thread = k->registersPerThread;
      r.static_smem = k->staticSharedMemory;
      r.dynamic_smem = k->dynamicSharedMemory;
      trace.kernels.push_back(std::move(r));
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      trace.memops.push_back(MemRecord{MemKind::kMemcpy, direction(c->copyKind), c->bytes, c->start, c->end,
                                       c->correlationId, c->runtimeCorrelationId});
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      trace.memops.push_back(MemRecord{MemKind::kMemset, "", s->bytes, s->start, s->end, s->correlationId, 0});
      return true;
    }
    default: return false;
  }
}

}  // namespace hk::profile
