// microbench/microbench.hpp — the registry and result tables behind `hk microbench`.
//
// One hardware property per file (coalescing.cu, occupancy.cu, ...). Each file measures its
// property on the current GPU and returns tables: named columns, rows of numbers or text, and a
// one-line conclusion computed from the measured numbers (never a canned sentence). The file
// registers itself with HK_REGISTER_MICROBENCH, so the command line and the tests find it
// without a list kept by hand.
//
// Measuring rules (the harness's, src/bench/bench.hpp): warm-up first, then the median over many
// samples with the interquartile spread; event timing through hk::bench::time_launches; in-kernel
// cycle counts come with the %globaltimer span of the same interval, so cycles and seconds agree
// (ClockSpan::mhz is the SM clock the kernel actually ran at).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench.hpp"
#include "hk/error.hpp"

namespace hk::mb {

struct Options {
  double budget_ms = 60;  // timing budget per measured point, after warm-up
  int max_samples = 40;
};

// A table cell: text, an integer or a real. Numbers stay numbers in JSON; markdown shows reals
// with three significant digits.
class Cell {
 public:
  Cell(const char* s) : text_(s) {}
  Cell(std::string s) : text_(std::move(s)) {}
  template <std::integral I>
  Cell(I v) : kind_(Kind::kInt), value_(static_cast<double>(v)) {}
  template <std::floating_point F>
  Cell(F v) : kind_(Kind::kReal), value_(static_cast<double>(v)) {}
  bool numeric() const { return kind_ != Kind::kText; }
  double value() const { return value_; }
  std::string str() const;
  nlohmann::json json() const;

 private:
  enum class Kind { kText, kInt, kReal };
  Kind kind_ = Kind::kText;
  std::string text_;
  double value_ = 0;
};

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  std::string conclusion;  // one line: what the numbers show
  Table(std::string t, std::vector<std::string> cols) : title(std::move(t)), columns(std::move(cols)) {}
  // Appends a row; throws kValue when its width differs from the header's.
  void add(std::vector<Cell> row);
};

struct Result {
  // A deque: experiments keep `Table&` from emplace_back while adding more tables, which a
  // vector's reallocation would leave dangling (the heap corruption of the first GPU run).
  std::deque<Table> tables;
};

using RunFn = Result (*)(const Options&);

struct Experiment {
  int order = 0;  // position in `hk microbench` output (the numbering)
  std::string name;
  std::string summary;
  RunFn run = nullptr;
};

// Every registered experiment, by order.
std::vector<Experiment> experiments();
const Experiment* find_experiment(std::string_view name);
bool register_experiment(Experiment e);

#define HK_REGISTER_MICROBENCH(order, name, summary, fn) \
  static const bool hk_mb_registered_##fn = ::hk::mb::register_experiment({order, name, summary, fn})

// Three significant digits in fixed notation ("2.00", "98.8", "4321", "0.0123").
std::string num(double v);
// "### title", the header, the rows, then "conclusion" as its own paragraph.
std::string markdown(const Table& t);
nlohmann::json to_json(const Table& t);

// ---- measuring -----------------------------------------------------------------------------
// Event timing of one launch per sample with the harness (warm = no L2 flush between samples).
hk::bench::Timing time_launch(const std::function<void(cudaStream_t)>& launch, const Options& o, bool warm);

// Cycles and nanoseconds of one in-kernel interval (clock64 and %globaltimer read together).
struct ClockSpan {
  long long cycles = 0;
  long long ns = 0;
  double mhz() const { return ns > 0 ? 1e3 * double(cycles) / double(ns) : 0; }
};

// Owning device array (cudaMalloc / cudaFree); the experiments allocate per run.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    HK_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T) + (n == 0)));  // the C API: .cpp users too
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  void zero() const { HK_CHECK_CUDA(cudaMemset(p_, 0, bytes())); }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    HK_CHECK_CUDA(cudaMemcpy(h.data(), p_, bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
  void from_host(const std::vector<T>& h) const {
    HK_CHECK_CUDA(cudaMemcpy(p_, h.data(), std::min(h.size(), n_) * sizeof(T), cudaMemcpyHostToDevice));
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// One block's timed interval: the SM it ran on and clock64 / %globaltimer at both ends. clock64
// counts per SM, so cycles are compared only within one SM.
struct BlockSpan {
  long long clk0 = 0, clk1 = 0, ns0 = 0, ns1 = 0;
  int sm = -1;
};

// Work per SM per cycle counted by the kernel's own clock, never by a clock read at another moment
// (the first H200 run divided a median-sample rate by the last launch's clock and read 102% of the
// datasheet). Per launch and SM: the work of the blocks that ran there over the cycles from their
// earliest start to their latest end; `spans` holds whole launches of `blocks` spans each.
// Medians over every (launch, SM); mhz is the clock over the same intervals.
struct PerClock {
  double per_sm_clk = 0, mhz = 0;
};
PerClock per_clock(const std::vector<BlockSpan>& spans, int blocks, double work_per_block);

// A device ring of BlockSpans with one slice of `blocks` per launch, `launches` slices: each
// launch under time_launch takes the next slice, so the spans of every timed launch survive
// (time_launch times its last Timing::samples launches, at most Options::max_samples).
class SpanRing {
 public:
  SpanRing(int blocks, int launches) : blocks_(blocks), launches_(launches), d_(size_t(blocks) * launches) {}
  BlockSpan* next() { return d_.get() + size_t(next_++ % launches_) * blocks_; }
  // The spans of the last `n` launches (n <= launches), oldest first.
  std::vector<BlockSpan> last(int n) const;

 private:
  int blocks_, launches_;
  long long next_ = 0;
  DeviceArray<BlockSpan> d_;
};

// A random single cycle through `n` slots: next[i] is the slot visited after slot i.
// Pointer chases walk it so that no access is predictable and every slot is visited.
std::vector<uint32_t> random_cycle(uint32_t n, uint64_t seed);

double median(std::vector<double> v);

}  // namespace hk::mb
