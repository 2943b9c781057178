// microbench/microbench.cpp — experiment registry, table formatting, JSON, measuring helpers.
#include "microbench/microbench.hpp"

#include "microbench/conclusions.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <mutex>
#include <random>

namespace hk::mb {
namespace {

std::map<std::string, Experiment, std::less<>>& table() {
  static std::map<std::string, Experiment, std::less<>> t;
  return t;
}
std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  int decimals = std::clamp(2 - magnitude, 0, 6);
  std::string s = fmt::format("{:.{}f}", v, decimals);
  return s == "-0" ? "0" : s;
}

std::string Cell::str() const {
  switch (kind_) {
    case Kind::kText: return text_;
    case Kind::kInt: return fmt::format("{}", static_cast<long long>(value_));
    case Kind::kReal: return num(value_);
  }
  return text_;
}

nlohmann::json Cell::json() const {
  switch (kind_) {
    case Kind::kText: return text_;
    case Kind::kInt: return static_cast<long long>(value_);
    case Kind::kReal: return std::isfinite(value_) ? nlohmann::json(value_) : nlohmann::json(num(value_));
  }
  return nullptr;
}

void Table::add(std::vector<Cell> row) {
  if (row.size() != columns.size())
    HK_THROW(kValue, "microbench table '", title, "': row has ", row.size(), " cells but the header has ",
             columns.size(), " columns");
  rows.push_back(std::move(row));
}

std::vector<Experiment> experiments() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::vector<Experiment> out;
  for (auto& [name, e] : table()) out.push_back(e);
  std::stable_sort(out.begin(), out.end(), [](const Experiment& a, const Experiment& b) { return a.order < b.order; });
  return out;
}

const Experiment* find_experiment(std::string_view name) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

bool register_experiment(Experiment e) {
  std::lock_guard<std::mutex> lock(table_mutex());
  if (e.name.empty() || e.summary.empty() || !e.run)
    throw Error(ErrorKind::kValue, "microbench: an experiment needs a name, a summary and a run function");
  if (!table().emplace(e.name, e).second)
    throw Error(ErrorKind::kValue, fmt::format("microbench: experiment '{}' registered twice", e.name));
  return true;
}

std::string markdown(const Table& t) {
  std::vector<std::string> header = t.columns;
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  std::vector<bool> right(header.size(), true);  // numbers right-aligned; a text cell makes it left
  for (auto& row : t.rows) {
    auto& out = cells.emplace_back();
    for (size_t c = 0; c < row.size(); ++c) {
      out.push_back(row[c].str());
      width[c] = std::max(width[c], out.back().size());
      if (!row[c].numeric()) right[c] = false;
    }
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::string s = "|";
    for (size_t c = 0; c < v.size(); ++c)
      s += right[c] ? fmt::format(" {:>{}} |", v[c], width[c]) : fmt::format(" {:<{}} |", v[c], width[c]);
    return s + "\n";
  };
  std::string s = fmt::format("### {}\n\n", t.title) + line(header) + "|";
  for (size_t c = 0; c < header.size(); ++c) s += std::string(width[c] + 1, '-') + (right[c] ? ":|" : "-|");
  s += "\n";
  for (auto& row : cells) s += line(row);
  if (!t.conclusion.empty()) s += "\n" + t.conclusion + "\n";
  return s;
}

nlohmann::json to_json(const Table& t) {
  nlohmann::json j = {{"title", t.title}, {"columns", t.columns}, {"conclusion", t.conclusion}};
  auto& rows = j["rows"] = nlohmann::json::array();
  for (auto& row : t.rows) {
    nlohmann::json r = nlohmann::json::array();
    for (auto& c : row) r.push_back(c.json());
    rows.push_back(r);
  }
  return j;
}

hk::bench::Timing time_launch(const std::function<void(cudaStream_t)>& launch, const Options& o, bool warm) {
  hk::bench::TimeOptions t;
  t.warm = warm;
  t.max_samples = o.max_samples;
  t.budget_ms = o.budget_ms;
  return hk::bench::time_launches(launch, t);
}

PerClock per_clock(const std::vector<BlockSpan>& spans, int blocks, double work_per_block) {
  std::vector<double> rate, mhz;
  for (size_t l = 0; blocks > 0 && l + blocks <= spans.size(); l += blocks) {
    struct Sm {
      long long clk0, clk1, ns0, ns1;
      int n;
    };
    std::map<int, Sm> sms;
    for (size_t b = l; b < l + blocks; ++b) {
      const BlockSpan& s = spans[b];
      Sm& m = sms.try_emplace(s.sm, Sm{s.clk0, s.clk1, s.ns0, s.ns1, 0}).first->second;
      m.clk0 = std::min(m.clk0, s.clk0), m.clk1 = std::max(m.clk1, s.clk1);
      m.ns0 = std::min(m.ns0, s.ns0), m.ns1 = std::max(m.ns1, s.ns1);
      ++m.n;
    }
    for (auto& [sm, m] : sms) {
      if (m.clk1 <= m.clk0 || m.ns1 <= m.ns0) continue;
      rate.push_back(m.n * work_per_block / double(m.clk1 - m.clk0));
      mhz.push_back(1e3 * double(m.clk1 - m.clk0) / double(m.ns1 - m.ns0));
    }
  }
  if (rate.empty()) return {};
  return {median(rate), median(mhz)};
}

std::vector<BlockSpan> SpanRing::last(int n) const {
  std::vector<BlockSpan> all = d_.to_host(), out;
  n = int(std::min<long long>({n, launches_, next_}));
  for (long long l = next_ - n; l < next_; ++l) {
    auto first = all.begin() + (l % launches_) * blocks_;
    out.insert(out.end(), first, first + blocks_);
  }
  return out;
}

std::vector<uint32_t> random_cycle(uint32_t n, uint64_t seed) {
  if (n == 0) return {};
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  for (uint32_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);  // Fisher-Yates
  // Linking each slot to the next one in a random visiting order closes a single cycle.
  std::vector<uint32_t> next(n);
  for (uint32_t i = 0; i < n; ++i) next[order[i]] = order[(i + 1) % n];
  return next;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace hk::mb

namespace hk::mb {

std::string describe_slowdown(double factor) {
  auto near = [&](double x) { return std::fabs(factor - x) <= 0.1 * x; };
  if (near(1)) return "keeps";
  if (near(2)) return "halves";
  if (near(4)) return "quarters";
  return "divides by " + num(factor);
}

}  // namespace hk::mb
