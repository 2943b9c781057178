#include "profile/model.hpp"

#include <cuda_occupancy.h>
#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include "bench/bench.hpp"

namespace hk::profile {

void Trace::tag(uint32_t correlation_id, const std::vector<std::string_view>& stack) {
  std::string key;
  for (std::string_view name : stack) {
    key.append(name);
    key.push_back('\x1f');
  }
  auto [it, fresh] = stack_ids_.try_emplace(std::move(key), static_cast<uint32_t>(stacks_.size()));
  if (fresh) stacks_.emplace_back(stack.begin(), stack.end());
  stack_of_[correlation_id] = it->second;
}

const RangeStack* Trace::ranges(uint32_t correlation_id) const {
  auto it = stack_of_.find(correlation_id);
  return it == stack_of_.end() ? nullptr : &stacks_[it->second];
}

const RangeStack* Trace::ranges(const MemRecord& m) const {
  if (const RangeStack* s = ranges(m.correlation_id)) return s;
  return m.runtime_correlation_id ? ranges(m.runtime_correlation_id) : nullptr;
}

bool in_selection(const RangeStack* stack, std::string_view range_glob) {
  if (range_glob.empty()) return true;
  if (!stack) return false;
  for (const std::string& name : *stack)
    if (bench::glob_match(range_glob, name)) return true;
  return false;
}

double occupancy_estimate(const KernelRecord& k, const DeviceLimits& d) {
  const int64_t threads = int64_t(k.block[0]) * k.block[1] * k.block[2];
  const int64_t blocks = int64_t(k.grid[0]) * k.grid[1] * k.grid[2];
  if (threads <= 0 || blocks <= 0 || d.sm_count <= 0 || d.max_threads_per_sm <= 0 || d.warp_size <= 0) return -1;
  cudaOccDeviceProp prop;
  prop.computeMajor = d.cc_major;
  prop.computeMinor = d.cc_minor;
  prop.maxThreadsPerBlock = d.max_threads_per_block;
  prop.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  prop.regsPerBlock = d.regs_per_block;
  prop.regsPerMultiprocessor = d.regs_per_sm;
  prop.warpSize = d.warp_size;
  prop.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  prop.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  prop.numSms = d.sm_count;
  prop.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  prop.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);
  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = d.max_threads_per_block;
  attr.numRegs = k.registers_per_thread;
  attr.sharedSizeBytes = static_cast<size_t>(k.static_smem);
  attr.maxDynamicSharedSizeBytes = static_cast<size_t>(k.dynamic_smem);
  attr.numBlockBarriers = 1;
  // A launch past the default 48 KiB per block must have opted in (cudaFuncSetAttribute).
  attr.shmemLimitConfig = int64_t(k.static_smem) + k.dynamic_smem > d.smem_per_block ? FUNC_SHMEM_LIMIT_OPTIN
                                                                                     : FUNC_SHMEM_LIMIT_DEFAULT;
  cudaOccDeviceState state;  // default carveout: the driver picks the one that fits
  cudaOccResult result;
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, static_cast<int>(threads),
                                              static_cast<size_t>(k.dynamic_smem)) != CUDA_OCC_SUCCESS)
    return -1;
  // A grid smaller than a full wave leaves each SM fewer blocks than the calculator allows.
  const int64_t busiest_sm_blocks = (blocks + d.sm_count - 1) / d.sm_count;
  const int64_t resident = std::min<int64_t>(result.activeBlocksPerMultiprocessor, busiest_sm_blocks);
  const int64_t warps_per_block = (threads + d.warp_size - 1) / d.warp_size;
  const double warp_slots = double(d.max_threads_per_sm / d.warp_size);
  return std::min(1.0, double(resident * warps_per_block) / warp_slots);
}

namespace {

// Occupancy accumulates time-weighted: a long call at low occupancy counts for more.
struct RowBuilder {
  Row row;
  double occ_weighted = 0, occ_weight = 0;
};

void add_call(RowBuilder& b, uint64_t dur, uint64_t start) {
  Row& r = b.row;
  if (r.calls == 0) {
    r.min_ns = r.max_ns = dur;
    r.first_start_ns = start;
  }
  ++r.calls;
  r.total_ns += dur;
  r.min_ns = std::min(r.min_ns, dur);
  r.max_ns = std::max(r.max_ns, dur);
  r.first_start_ns = std::min(r.first_start_ns, start);
}

}  // namespace

Summary summarize(const Trace& trace, const DeviceLimits& limits, std::string_view range_glob) {
  Summary s;
  s.selection = std::string(range_glob);
  s.dropped = trace.dropped;
  std::vector<RowBuilder> builders;
  std::map<std::string, size_t> index;  // kind + '\0' + name -> builder
  auto builder = [&](const std::string& kind, const std::string& name) -> RowBuilder& {
    auto [it, fresh] = index.try_emplace(kind + '\0' + name, builders.size());
    if (fresh) {
      builders.emplace_back();
      builders.back().row.kind = kind;
      builders.back().row.name = name;
    }
    return builders[it->second];
  };

  for (const KernelRecord& k : trace.kernels) {
    if (!in_selection(trace.ranges(k.correlation_id), range_glob)) continue;
    ++s.kernels;
    RowBuilder& b = builder("kernel", k.name);
    Row& r = b.row;
    if (r.calls == 0) {
      r.grid = k.grid;
      r.block = k.block;
      r.registers_per_thread = k.registers_per_thread;
      r.static_smem = k.static_smem;
      r.dynamic_smem = k.dynamic_smem;
    } else if (r.grid != k.grid || r.block != k.block || r.registers_per_thread != k.registers_per_thread ||
               r.static_smem != k.static_smem || r.dynamic_smem != k.dynamic_smem) {
      r.mixed_config = true;
    }
    const uint64_t dur = k.duration_ns();
    add_call(b, dur, k.start_ns);
    const double occ = occupancy_estimate(k, limits);
    if (occ >= 0) {
      const double w = double(std::max<uint64_t>(dur, 1));
      b.occ_weighted += occ * w;
      b.occ_weight += w;
    }
  }
  for (const MemRecord& m : trace.memops) {
    if (!in_selection(trace.ranges(m), range_glob)) continue;
    ++s.memops;
    s.mem_bytes += m.bytes;
    const bool copy = m.kind == MemKind::kMemcpy;
    RowBuilder& b = builder(copy ? "memcpy" : "memset", copy ? "memcpy " + m.direction : "memset");
    add_call(b, m.duration_ns(), m.start_ns);
    b.row.bytes += m.bytes;
  }

  for (RowBuilder& b : builders) {
    if (b.occ_weight > 0) b.row.occupancy = b.occ_weighted / b.occ_weight;
    s.gpu_ns += b.row.total_ns;
    s.rows.push_back(std::move(b.row));
  }
  for (Row& r : s.rows) r.percent = s.gpu_ns ? 100.0 * double(r.total_ns) / double(s.gpu_ns) : 0.0;
  std::sort(s.rows.begin(), s.rows.end(), [](const Row& a, const Row& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.name < b.name;
  });
  return s;
}

// ---- names -------------------------------------------------------------------------------

std::string demangle(std::string_view name) {
  std::string n(name);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(n.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : n;
}

namespace {

bool opens(char c) { return c == '<' || c == '(' || c == '{' || c == '['; }
bool closes(char c) { return c == '>' || c == ')' || c == '}' || c == ']'; }

// "void ns::(anonymous namespace)::f<T>(args)" -> "ns::f<T>".
std::string qualified_name(std::string_view demangled) {
  std::string s(demangled);
  static constexpr std::string_view kAnon = "(anonymous namespace)::";
  for (size_t at; (at = s.find(kAnon)) != std::string::npos;) s.erase(at, kAnon.size());
  // The parameter list is the parenthesised group that ends the name.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      else if (s[i] == '(' && --depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  // The return type (template functions only) ends at the last space outside any brackets.
  int depth = 0;
  size_t cut = std::string::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if (opens(s[i])) ++depth;
    else if (closes(s[i])) --depth;
    else if (s[i] == ' ' && depth == 0) cut = i;
  }
  if (cut != std::string::npos) s.erase(0, cut + 1);
  return s;
}

// "ns::inner::f<a::b>" -> "f<a::b>"
std::string last_component(const std::string& q) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < q.size(); ++i) {
    if (opens(q[i])) ++depth;
    else if (closes(q[i])) --depth;
    else if (depth == 0 && q[i] == ':' && q[i + 1] == ':') start = i + 2;
  }
  return q.substr(start);
}

// "f<a::b>" -> "f"
std::string without_template_args(const std::string& component) {
  return component.substr(0, component.find('<'));
}

}  // namespace

std::string base_name(std::string_view demangled) {
  return without_template_args(last_component(qualified_name(demangled)));
}

std::string short_name(std::string_view demangled, size_t width) {
  std::string q = qualified_name(demangled);
  if (q.size() <= width) return q;
  std::string last = last_component(q);
  if (last.size() <= width) return last;
  std::string base = without_template_args(last);
  if (base.size() < last.size()) base += "<...>";
  if (base.size() <= width) return base;
  return width > 3 ? base.substr(0, width - 3) + "..." : base.substr(0, width);
}

// ---- table -------------------------------------------------------------------------------

namespace {

std::string dims(const std::array<int32_t, 3>& d) {
  if (d[2] != 1) return fmt::format("{}x{}x{}", d[0], d[1], d[2]);
  if (d[1] != 1) return fmt::format("{}x{}", d[0], d[1]);
  return fmt::format("{}", d[0]);
}

std::string kib(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{}", bytes);
  if (bytes % 1024 == 0) return fmt::format("{}K", bytes / 1024);
  return fmt::format("{:.1f}K", double(bytes) / 1024.0);
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

double us(uint64_t ns) { return double(ns) / 1e3; }

// Short names for the rows; kernels whose short names coincide (one template, many
// instantiations) are numbered #1, #2, ... in launch order.
std::vector<std::string> display_names(const std::vector<Row>& rows, size_t width) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<size_t>> same;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out.push_back(r.kind == "kernel" ? short_name(demangle(r.name), width)
                                     : fmt::format("[{}, {}]", r.name, mib(r.bytes)));
    if (r.kind == "kernel") same[out.back()].push_back(i);
  }
  for (auto& [name, idx] : same) {
    if (idx.size() < 2) continue;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return rows[a].first_start_ns < rows[b].first_start_ns; });
    const std::string suffix_room = fmt::format(" #{}", idx.size());
    for (size_t k = 0; k < idx.size(); ++k)
      out[idx[k]] = fmt::format("{} #{}", short_name(demangle(rows[idx[k]].name), width - std::min(width, suffix_room.size())),
                                k + 1);
  }
  return out;
}

}  // namespace

std::string format_table(const Summary& s, size_t name_width) {
  std::vector<std::string> names = display_names(s.rows, name_width);
  const size_t w = name_width;
  std::string out = fmt::format("{:<{}}  {:>6} {:>11} {:>10} {:>10} {:>10} {:>6}  {:<20} {:>4} {:>11} {:>7}\n", "Name", w,
                                "Calls", "Total µs", "Mean µs", "Min µs", "Max µs", "GPU %", "Grid / Block", "Regs",
                                "Smem s+d", "Occ.est");
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const Row& r = s.rows[i];
    const bool kernel = r.kind == "kernel";
    std::string launch = !kernel ? "-" : r.mixed_config ? "varies" : dims(r.grid) + " / " + dims(r.block);
    std::string regs = kernel && !r.mixed_config ? fmt::format("{}", r.registers_per_thread) : "-";
    std::string smem = kernel && !r.mixed_config ? kib(r.static_smem) + "+" + kib(r.dynamic_smem) : "-";
    std::string occ = kernel && r.occupancy >= 0 ? fmt::format("~{:.0f}%", 100.0 * r.occupancy) : "-";
    out += fmt::format("{:<{}}  {:>6} {:>11.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>6.1f}  {:<20} {:>4} {:>11} {:>7}\n",
                       names[i], w, r.calls, us(r.total_ns), r.mean_ns() / 1e3, us(r.min_ns), us(r.max_ns),
                       r.percent, launch, regs, smem, occ);
  }
  out += fmt::format("GPU time {:.2f} µs: {} kernel launch(es), {} copy/memset record(s) moving {}\n", us(s.gpu_ns),
                     s.kernels, s.memops, mib(s.mem_bytes));
  if (s.dropped)
    out += fmt::format("WARNING: CUPTI dropped {} record(s) (buffers full): the counts above are short\n", s.dropped);
  out += "Occ.est: resident warps per SM from the CUDA occupancy calculator (registers, shared memory, block size),\n"
         "         capped by the grid's blocks per SM; an estimate, not a measurement (ncu measures achieved occupancy)\n";
  return out;
}

// ---- JSON --------------------------------------------------------------------------------

nlohmann::json to_json(const Summary& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : s.rows) {
    nlohmann::json x = {{"kind", r.kind}, {"name", r.name}, {"calls", r.calls}, {"total_ns", r.total_ns},
                        {"mean_ns", r.mean_ns()}, {"min_ns", r.min_ns}, {"max_ns", r.max_ns},
                        {"first_start_ns", r.first_start_ns}, {"percent", r.percent}, {"bytes", r.bytes}};
    if (r.kind == "kernel") {
      x["demangled"] = demangle(r.name);
      x["grid"] = r.grid;
      x["block"] = r.block;
      x["mixed_config"] = r.mixed_config;
      x["registers_per_thread"] = r.registers_per_thread;
      x["static_smem"] = r.static_smem;
      x["dynamic_smem"] = r.dynamic_smem;
      x["occupancy_estimate"] = r.occupancy;
    }
    rows.push_back(std::move(x));
  }
  return {{"selection", s.selection}, {"gpu_ns", s.gpu_ns},       {"kernels", s.kernels}, {"memops", s.memops},
          {"mem_bytes", s.mem_bytes}, {"dropped", s.dropped}, {"rows", std::move(rows)}};
}

Summary summary_from_json(const nlohmann::json& j) {
  Summary s;
  s.selection = j.at("selection").get<std::string>();
  s.gpu_ns = j.at("gpu_ns").get<uint64_t>();
  s.kernels = j.at("kernels").get<int64_t>();
  s.memops = j.at("memops").get<int64_t>();
  s.mem_bytes = j.at("mem_bytes").get<uint64_t>();
  s.dropped = j.at("dropped").get<uint64_t>();
  for (const auto& x : j.at("rows")) {
    Row r;
    r.kind = x.at("kind").get<std::string>();
    r.name = x.at("name").get<std::string>();
    r.calls = x.at("calls").get<int64_t>();
    r.total_ns = x.at("total_ns").get<uint64_t>();
    r.min_ns = x.at("min_ns").get<uint64_t>();
    r.max_ns = x.at("max_ns").get<uint64_t>();
    r.first_start_ns = x.at("first_start_ns").get<uint64_t>();
    r.percent = x.at("percent").get<double>();
    r.bytes = x.at("bytes").get<uint64_t>();
    if (r.kind == "kernel") {
      r.grid = x.at("grid").get<std::array<int32_t, 3>>();
      r.block = x.at("block").get<std::array<int32_t, 3>>();
      r.mixed_config = x.at("mixed_config").get<bool>();
      r.registers_per_thread = x.at("registers_per_thread").get<int>();
      r.static_smem = x.at("static_smem").get<int>();
      r.dynamic_smem = x.at("dynamic_smem").get<int>();
      r.occupancy = x.at("occupancy_estimate").get<double>();
    }
    s.rows.push_back(std::move(r));
  }
  return s;
}

}  // namespace hk::profile
