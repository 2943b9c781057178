// profile/records.hpp — CUPTI activity records -> the data model (profile/model.hpp).
//
// Reads the record structs only and calls no CUPTI function, so tests can feed it records built
// by hand. The struct versions are the ones this CUDA toolkit's CUPTI emits (Kernel10,
// Memcpy6, Memset4); the collector and this file are built against the same headers.
#pragma once

#include <cupti_activity.h>

#include "profile/model.hpp"

namespace hk::profile {

// Appends a kernel, memcpy or memset record to `trace`; returns false (and appends nothing) for
// any other kind.
bool append_record(Trace& trace, const CUpti_Activity* record);

}  // namespace hk::profile
