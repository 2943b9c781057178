#include "hk/registry.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/trace.hpp"
#include "hk/device.hpp"

namespace hk {

namespace {
const char* attr_type_name(const AttrValue& v) {
  switch (v.index()) {
    case 0: return "bool";
    case 1: return "int";
    case 2: return "float";
    default: return "str";
  }
}
}  // namespace

bool Attrs::get_bool(std::string_view op, const std::string& name, bool fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (auto* b = std::get_if<bool>(&it->second)) return *b;
  HK_THROW(kType, op, ": attribute ", name, " must be a bool, got ", attr_type_name(it->second));
}

int64_t Attrs::get_int(std::string_view op, const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (auto* i = std::get_if<int64_t>(&it->second)) return *i;
  HK_THROW(kType, op, ": attribute ", name, " must be an int, got ", attr_type_name(it->second));
}

double Attrs::get_double(std::string_view op, const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  HK_THROW(kType, op, ": attribute ", name, " must be a float, got ", attr_type_name(it->second));
}

std::string Attrs::get_string(std::string_view op, const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (auto* s = std::get_if<std::string>(&it->second)) return *s;
  HK_THROW(kType, op, ": attribute ", name, " must be a str, got ", attr_type_name(it->second));
}

void Attrs::expect_only(std::string_view op, std::initializer_list<std::string_view> known) const {
  std::string unknown;
  for (auto& [name, value] : values_)
    if (std::find(known.begin(), known.end(), name) == known.end()) unknown += (unknown.empty() ? "" : ", ") + name;
  if (unknown.empty()) return;
  std::string names;
  for (auto k : known) names += fmt::format("{}{}", names.empty() ? "" : ", ", k);
  HK_THROW(kValue, op, ": unknown attribute(s) ", unknown, "; ", op, " takes ",
           names.empty() ? std::string("none") : names);
}

ProblemPtr Family::make_problem(const std::vector<TensorView>&, const Attrs&) const {
  HK_THROW(kNotSupported, name(), ": this family cannot build a problem from tensors yet "
           "(Family::make_problem, see docs/python.md)");
}

Variant::Variant(std::string family, std::string name, std::string summary, int min_sm, unsigned flags)
    : family_(std::move(family)), name_(std::move(name)), summary_(std::move(summary)),
      min_sm_(min_sm), flags_(flags) {}

std::string Variant::supports(const Problem& p) const {
  if (p.family() != family_)
    return fmt::format("{} is a {} variant, the problem is {}", name_, family_, p.family());
  if (device_count() > 0) {
    int sm = device_info().sm();
    if (sm < min_sm_) return fmt::format("needs sm_{} or newer, the device is sm_{}", min_sm_, sm);
  }
  return supports_impl(p);
}

void Variant::run(const Problem& p, const Operands& ops, cudaStream_t stream) const {
  std::string why = supports(p);
  if (!why.empty()) HK_THROW(kNotSupported, family_, "/", name_, " cannot run ", p.key(), ": ", why);
  // The profiler attributes every kernel launched in here to this range (core/trace.hpp).
  trace::Range range{fmt::format("{}/{}/{}", family_, name_, p.key())};
  launch_impl(p, ops, stream);
}

Registry& Registry::get() {
  static Registry registry;
  return registry;
}

void Registry::add(std::unique_ptr<Family> family) { families_.push_back(std::move(family)); }
void Registry::add(std::unique_ptr<Variant> variant) { variants_.push_back(std::move(variant)); }

std::vector<const Family*> Registry::families() const {
  std::vector<const Family*> out;
  for (auto& f : families_) out.push_back(f.get());
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name() < b->name(); });
  return out;
}

const Family* Registry::family(std::string_view name) const {
  for (auto& f : families_)
    if (f->name() == name) return f.get();
  return nullptr;
}

std::vector<const Variant*> Registry::variants(std::string_view family) const {
  std::vector<const Variant*> out;
  for (auto& v : variants_)
    if (v->family() == family) out.push_back(v.get());
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name() < b->name(); });
  return out;
}

const Variant* Registry::variant(std::string_view family, std::string_view name) const {
  for (auto& v : variants_)
    if (v->family() == family && v->name() == name) return v.get();
  return nullptr;
}

void Registry::add_dispatch(std::string family, DispatchFn fn) { dispatch_[std::move(family)] = std::move(fn); }

bool Registry::has_dispatch(std::string_view family) const { return dispatch_.find(family) != dispatch_.end(); }

Choice Registry::choose(const Problem& p) const {
  auto it = dispatch_.find(p.family());
  if (it == dispatch_.end()) HK_THROW(kInternal, p.family(), ": the family registers no dispatch (HK_REGISTER_DISPATCH)");
  Choice choice;
  std::string reasons;
  for (const Route& r : it->second(p)) {
    const Variant* v = variant(p.family(), r.variant);
    if (!v) HK_THROW(kInternal, p.family(), " dispatch: no variant named ", r.variant);
    if (!v->is(kFlagProduction))
      HK_THROW(kInternal, p.family(), " dispatch: ", r.variant, " is ladder-only and may not serve the public op");
    std::string why = v->supports(p);
    if (why.empty()) {
      choice.variant = v;
      choice.why = r.why;
      return choice;
    }
    reasons += fmt::format("\n  {}: {}", v->name(), why);
    choice.declined.emplace_back(v->name(), std::move(why));
  }
  HK_THROW(kNotSupported, p.family(), ": no production variant can run ", p.key(), reasons);
}

std::string Registry::explain(const Problem& p) const {
  Choice c = choose(p);
  std::string out = fmt::format("{} {}: {} — {}\n", p.family(), p.key(), c.variant->name(), c.why);
  for (auto& [name, why] : c.declined) out += fmt::format("  passed over {}: {}\n", name, why);
  return out;
}

}  // namespace hk
