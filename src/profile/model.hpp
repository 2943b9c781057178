// profile/model.hpp — the collector's data model: the records CUPTI reported, the hopperkit range
// each was launched in, per-kernel aggregation, the table and the JSON.
//
// Nothing here calls CUDA or CUPTI: tests build Traces by hand (tests/cpp/test_profile.cpp) and
// profile/collector.cpp fills them from CUPTI's activity buffers (profile/records.hpp converts).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hk::profile {

// One kernel execution (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).
struct KernelRecord {
  std::string name;  // as CUPTI reports it: the mangled symbol for C++ kernels
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t correlation_id = 0;  // of the runtime or driver call that launched it
  uint32_t device = 0, stream = 0;
  std::array<int32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  int registers_per_thread = 0;
  int static_smem = 0;   // bytes per block
  int dynamic_smem = 0;  // bytes per block
  uint64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

enum class MemKind { kMemcpy, kMemset };

// One memory copy or memset (CUPTI_ACTIVITY_KIND_MEMCPY / MEMSET).
struct MemRecord {
  MemKind kind = MemKind::kMemcpy;
  std::string direction;  // memcpy: HtoD, DtoH, DtoD, HtoH, PtoP or other; memset: empty
  uint64_t bytes = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t correlation_id = 0;          // the driver call that issued it
  uint32_t runtime_correlation_id = 0;  // the runtime call (memcpy records only; 0 = none)
  uint64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

// Names of the hopperkit ranges open on the launching thread, outermost first.
using RangeStack = std::vector<std::string>;

// Everything one collection saw. Attribution: the collector tags the correlation id of each
// runtime and driver API call made inside a hopperkit range with the thread's range stack at
// that moment; every record carries the correlation id of the call that issued it.
class Trace {
 public:
  std::vector<KernelRecord> kernels;
  std::vector<MemRecord> memops;
  uint64_t dropped = 0;  // records CUPTI dropped (buffers full): counts are short when nonzero

  void tag(uint32_t correlation_id, const std::vector<std::string_view>& stack);
  // The ranges open when the call with this correlation id was made; nullptr outside every range.
  const RangeStack* ranges(uint32_t correlation_id) const;
  const RangeStack* ranges(const MemRecord& m) const;
  size_t distinct_stacks() const { return stacks_.size(); }

 private:
  std::vector<RangeStack> stacks_;                        // interned: one entry per distinct stack
  std::unordered_map<std::string, uint32_t> stack_ids_;   // names joined by \x1f -> index in stacks_
  std::unordered_map<uint32_t, uint32_t> stack_of_;       // correlation id -> index in stacks_
};

// True when a range on `stack` matches `range_glob` ('*' and '?'); "" matches every record,
// including those launched outside any range.
bool in_selection(const RangeStack* stack, std::string_view range_glob);

// What the occupancy calculator needs to know about the device (filled from cudaDeviceProp).
struct DeviceLimits {
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int warp_size = 32;
  int max_threads_per_block = 0, max_threads_per_sm = 0;
  int regs_per_block = 0, regs_per_sm = 0;
  int64_t smem_per_block = 0, smem_per_block_optin = 0, smem_per_sm = 0, reserved_smem_per_block = 0;
};

// An *estimate* of achieved occupancy in [0, 1]: the CUDA occupancy calculator's resident blocks
// per SM from registers, shared memory and block size (cuda_occupancy.h), capped by the blocks
// the grid gives its busiest SM, times warps per block over the SM's warp slots. ncu measures the
// real thing (sm__warps_active). -1 when the calculator cannot say (no limits, empty block).
double occupancy_estimate(const KernelRecord& k, const DeviceLimits& d);

// One line of the table: a kernel (grouped by mangled name), or all copies of one direction, or
// all memsets.
struct Row {
  std::string kind;  // "kernel", "memcpy" or "memset"
  std::string name;  // kernels: mangled name; memory rows: "memcpy HtoD", "memset"
  int64_t calls = 0;
  uint64_t total_ns = 0, min_ns = 0, max_ns = 0;
  uint64_t first_start_ns = 0;  // earliest start: the table numbers look-alike names in launch order
  double percent = 0;           // of the selection's GPU time (kernels + copies + memsets)
  uint64_t bytes = 0;           // memory rows: bytes over all calls
  // Kernels: the first call's launch configuration; mixed_config when a later call differed.
  std::array<int32_t, 3> grid{0, 0, 0}, block{0, 0, 0};
  bool mixed_config = false;
  int registers_per_thread = 0, static_smem = 0, dynamic_smem = 0;
  double occupancy = -1;  // occupancy_estimate, time-weighted over the calls; -1 unknown
  double mean_ns() const { return calls ? double(total_ns) / double(calls) : 0.0; }
  bool operator==(const Row&) const = default;
};

struct Summary {
  std::string selection;  // the range glob the rows were selected with ("" = everything)
  std::vector<Row> rows;  // sorted by total GPU time, largest first (ties: by name)
  uint64_t gpu_ns = 0;    // sum of every selected record's duration
  int64_t kernels = 0;    // kernel records selected
  int64_t memops = 0;     // copy and memset records selected
  uint64_t mem_bytes = 0; // bytes copied or set by them
  uint64_t dropped = 0;   // the trace's dropped-record count
  bool operator==(const Summary&) const = default;
};

Summary summarize(const Trace& trace, const DeviceLimits& limits, std::string_view range_glob = "");

// Names. demangle: abi::__cxa_demangle, or the name unchanged when it is not a mangled C++ name.
std::string demangle(std::string_view name);
// The function name alone: no return type, namespaces, template arguments or parameters (what
// ncu calls the "function" name base, which `ncu -k regex:` matches).
std::string base_name(std::string_view demangled);
// Fits a demangled name into `width` characters: drops the return type, parameters and anonymous
// namespaces, then the namespaces, then the template arguments (as <...>), then truncates.
std::string short_name(std::string_view demangled, size_t width);

// The table, one line per row, plus a total line and the occupancy footnote.
std::string format_table(const Summary& s, size_t name_width = 44);

nlohmann::json to_json(const Summary& s);
Summary summary_from_json(const nlohmann::json& j);

}  // namespace hk::profile
