// hk/registry.hpp — the variant registry: the spine of hopperkit (docs/design.md §1).
//
// A family (gelu, softmax, gemm, ...) registers one hk::Family: its op contract (problems with
// flops(), bytes(), tensor specs, an fp64 CPU reference and a tolerance) plus its test and bench
// shapes. Every kernel file registers one hk::Variant: name, one-line summary, min SM, flags,
// supports(problem) and launch(problem, operands, stream). Tests, `hk bench`, `hk list` and the
// Python `hk.variants()` discover both; nothing is listed by hand.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hk/error.hpp"
#include "hk/tensor.hpp"

namespace hk {

// A rung is either production (the family's dispatch may hand it a public call) or ladder-only
// (it exists to be read and measured: tests and `hk bench` run it, the public op never does).
enum VariantFlags : unsigned {
  kFlagNone = 0,
  kFlagReference = 1u << 0,   // the simplest correct rung; the ladder's first step
  kFlagBaseline = 1u << 1,    // the peer library path; speedups are reported against it
  kFlagProduction = 1u << 2,  // may serve the public op (see Registry::choose)
};

// How the harness draws a tensor's values (always non-zero-heavy, always fresh per run).
enum class Dist {
  kNormal,    // N(0, scale^2)
  kUniform,   // U(-scale, scale)
  kSmallInt,  // integers in [-scale, scale]: exact products and sums for GEMM-like checks
  kPositive,  // U(scale/8, scale): for divisors, logs, square roots
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty = contiguous. Padding is poisoned.
  Dist dist = Dist::kNormal;
  double scale = 1.0;
  // Values written into fixed logical positions after the random draw (NaN/Inf/±0 cases).
  std::vector<std::pair<int64_t, double>> specials;
};

// Logical values of a tensor in row-major order of its shape (whatever its strides).
struct HostTensor {
  TensorSpec spec;
  std::vector<double> values;
};

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

struct Operands {
  std::vector<TensorView> in;
  std::vector<TensorView> out;
};

// The named scalars that, with the input tensors, pose a problem: gelu's approximate, rms_norm's
// eps. They are what Python keyword arguments carry into Family::make_problem (hk.run,
// hk.reference, the torch ops) and what Problem::attrs() hands back. Reads are typed: a value of
// the wrong type is kType, an attribute the family does not know is kValue (a typo must fail).
using AttrValue = std::variant<bool, int64_t, double, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}
  explicit Attrs(std::map<std::string, AttrValue> values) : values_(std::move(values)) {}
  const std::map<std::string, AttrValue>& values() const { return values_; }
  void set(const std::string& name, AttrValue value) { values_[name] = std::move(value); }

  // `op` names the family in error messages; `fallback` is returned when the name is absent.
  bool get_bool(std::string_view op, const std::string& name, bool fallback) const;
  int64_t get_int(std::string_view op, const std::string& name, int64_t fallback) const;
  double get_double(std::string_view op, const std::string& name, double fallback) const;  // int ok
  std::string get_string(std::string_view op, const std::string& name, const std::string& fallback) const;
  // Throws kValue naming every attribute not in `known`, and the known ones.
  void expect_only(std::string_view op, std::initializer_list<std::string_view> known) const;

 private:
  std::map<std::string, AttrValue> values_;
};

// One problem of one family: the op contract (docs/design.md §3). Families derive from it.
class Problem {
 public:
  virtual ~Problem() = default;
  virtual std::string family() const = 0;
  virtual std::string key() const = 0;  // "16384x8192_bf16_tanh_fwd": JSON, test names, NVTX
  virtual double flops() const = 0;
  virtual double bytes() const = 0;  // minimum traffic: each input read once, each output written once
  virtual std::vector<TensorSpec> inputs() const = 0;
  virtual std::vector<TensorSpec> outputs() const = 0;
  // fp64 reference on the CPU: `out` arrives sized to outputs() and is filled in logical order.
  virtual void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const = 0;
  virtual Tolerance tolerance(int output_index) const = 0;
  // Problems whose full fp64 reference is too slow at benchmark sizes (GEMM at 16384^3: 8.8e12
  // fp64 flops) may compute it at chosen flat output positions only; the harness then checks a
  // sample (every corner plus 2^16 random positions) whenever flops() exceeds kSampledCheckFlops.
  // Return false (the default) when not provided: the full reference is used.
  virtual bool reference_at(const std::vector<HostTensor>& in, int output_index,
                            const std::vector<int64_t>& flat, std::vector<double>& values) const {
    return false;
  }
  static constexpr double kSampledCheckFlops = 2e10;
  // The attributes that, with tensors laid out as inputs(), rebuild this problem through
  // Family::make_problem (same key()). Families without attributes keep the default.
  virtual Attrs attrs() const { return {}; }
  // Smallest power-of-two alignment (bytes) of every operand's base address, set when the
  // problem is built from real views; 256 (cudaMalloc) for harness-made problems.
  int align_bytes = 256;
};

using ProblemPtr = std::shared_ptr<const Problem>;

struct BenchSelect {
  std::vector<std::string> shapes;  // family-specific shape strings; empty = the family's own
  std::vector<DType> dtypes;        // empty = the family's own
  bool quick = false;               // the `hk bench` main-job suite: a few shapes
};

class Family {
 public:
  virtual ~Family() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  virtual std::vector<ProblemPtr> test_problems() const = 0;
  virtual std::vector<ProblemPtr> bench_problems(const BenchSelect& select) const = 0;
  // The problem that these input tensors (shape, dtype, strides, in inputs() order) and
  // attributes pose, validated as strictly as the public op (typed errors naming the values),
  // with align_bytes set from the views. Only metadata is read: the views may point to host or
  // device memory. The Python package's only per-family hook (hk.run, hk.reference, torch ops).
  // The default says the family has none yet (kNotSupported).
  virtual ProblemPtr make_problem(const std::vector<TensorView>& inputs, const Attrs& attrs) const;
};

class Variant {
 public:
  Variant(std::string family, std::string name, std::string summary, int min_sm, unsigned flags);
  virtual ~Variant() = default;

  const std::string& family() const { return family_; }
  const std::string& name() const { return name_; }
  const std::string& summary() const { return summary_; }
  int min_sm() const { return min_sm_; }
  unsigned flags() const { return flags_; }
  bool is(VariantFlags f) const { return (flags_ & f) != 0; }

  // "" when this variant can run `p`; otherwise the reason it cannot (also checks min_sm
  // against the current device when one is present).
  std::string supports(const Problem& p) const;
  // Checks supports() (throws kNotSupported with the reason), then launches on `stream`,
  // inside an NVTX range named family/variant/key. Asynchronous; launch errors are checked.
  void run(const Problem& p, const Operands& ops, cudaStream_t stream) const;

 protected:
  virtual std::string supports_impl(const Problem& p) const = 0;
  virtual void launch_impl(const Problem& p, const Operands& ops, cudaStream_t stream) const = 0;

 private:
  std::string family_, name_, summary_;
  int min_sm_;
  unsigned flags_;
};

// One branch of a family's dispatch: a production variant and why it serves this problem — a
// measured reason ("v18: 0.99x cuBLAS at 4096^3, 1.06x at 8192^3") or a capability one.
struct Route {
  std::string variant;
  std::string why;
};

// A family's dispatch (src/ops/<family>/dispatch.cpp): the production variants that may serve
// `p`, best first. The registry runs the first whose supports() accepts `p`; supports() says
// only what a kernel can run, the dispatch says what should run.
using DispatchFn = std::function<std::vector<Route>(const Problem&)>;

// What the public op runs for a problem, why, and what the dispatch tried before it.
struct Choice {
  const Variant* variant = nullptr;
  std::string why;
  std::vector<std::pair<std::string, std::string>> declined;  // (variant, its supports() reason)
};

class Registry {
 public:
  static Registry& get();
  void add(std::unique_ptr<Family> family);
  void add(std::unique_ptr<Variant> variant);

  std::vector<const Family*> families() const;                    // sorted by name
  const Family* family(std::string_view name) const;              // nullptr if unknown
  std::vector<const Variant*> variants(std::string_view family) const;  // sorted by name
  const Variant* variant(std::string_view family, std::string_view name) const;

  void add_dispatch(std::string family, DispatchFn fn);
  bool has_dispatch(std::string_view family) const;
  // The public op's choice: the family's dispatch lists production routes best first; the first
  // whose supports() accepts `p` is chosen. Throws kNotSupported listing every route's reason
  // when none can, and kInternal when a family has no dispatch or a route names an unknown or
  // ladder-only variant (a public call never runs a teaching rung).
  Choice choose(const Problem& p) const;
  const Variant& pick(const Problem& p) const { return *choose(p).variant; }
  // choose() in words, for `hk explain` and hk.explain(): the chosen variant and why, and each
  // route tried before it with its reason.
  std::string explain(const Problem& p) const;

 private:
  std::vector<std::unique_ptr<Family>> families_;
  std::vector<std::unique_ptr<Variant>> variants_;
  std::map<std::string, DispatchFn, std::less<>> dispatch_;
};

// Typed adapter: a rung file writes typed functions and registers them through this.
template <class ProblemT, class ArgsT>
class TypedVariant final : public Variant {
 public:
  using SupportsFn = std::string (*)(const ProblemT&);
  using LaunchFn = void (*)(const ArgsT&, cudaStream_t);
  TypedVariant(std::string family, std::string name, std::string summary, int min_sm,
               unsigned flags, SupportsFn supports, LaunchFn launch)
      : Variant(std::move(family), std::move(name), std::move(summary), min_sm, flags),
        supports_(supports), launch_(launch) {}

 protected:
  std::string supports_impl(const Problem& p) const override {
    return supports_ ? supports_(cast(p)) : std::string();
  }
  void launch_impl(const Problem& p, const Operands& ops, cudaStream_t stream) const override {
    launch_(ArgsT::bind(cast(p), ops), stream);
  }

 private:
  const ProblemT& cast(const Problem& p) const {
    auto* typed = dynamic_cast<const ProblemT*>(&p);
    if (!typed) HK_THROW(kType, family(), "/", name(), ": got a problem of family ", p.family());
    return *typed;
  }
  SupportsFn supports_;
  LaunchFn launch_;
};

namespace detail {
struct Registrar {
  explicit Registrar(std::unique_ptr<Family> f) { Registry::get().add(std::move(f)); }
  explicit Registrar(std::unique_ptr<Variant> v) { Registry::get().add(std::move(v)); }
  Registrar(std::string family, DispatchFn fn) { Registry::get().add_dispatch(std::move(family), std::move(fn)); }
};

// A typed dispatch function as a DispatchFn (a problem of another family is kType).
template <class ProblemT>
DispatchFn typed_dispatch(std::string family, std::vector<Route> (*fn)(const ProblemT&)) {
  return [family = std::move(family), fn](const Problem& p) {
    auto* typed = dynamic_cast<const ProblemT*>(&p);
    if (!typed) HK_THROW(kType, family, " dispatch: got a problem of family ", p.family());
    return fn(*typed);
  };
}
}  // namespace detail

}  // namespace hk

#define HK_CONCAT_INNER(a, b) a##b
#define HK_CONCAT(a, b) HK_CONCAT_INNER(a, b)

// One line at the end of a rung file:
//   HK_REGISTER_VARIANT(GeluProblem, GeluArgs, "gelu", "v03_vectorized", "summary", 80,
//                       hk::kFlagProduction, gelu_v03_supports, gelu_v03_launch);
#define HK_REGISTER_VARIANT(ProblemT, ArgsT, family, name, summary, min_sm, flags, supports, launch) \
  static const ::hk::detail::Registrar HK_CONCAT(hk_variant_registrar_, __COUNTER__)(                \
      std::unique_ptr<::hk::Variant>(new ::hk::TypedVariant<ProblemT, ArgsT>(                        \
          family, name, summary, min_sm, flags, supports, launch)))

// One line at the end of a family's dispatch.cpp:
//   HK_REGISTER_DISPATCH(GemmProblem, "gemm", gemm_dispatch);
// with `std::vector<hk::Route> gemm_dispatch(const GemmProblem&)`.
#define HK_REGISTER_DISPATCH(ProblemT, family, fn)                                     \
  static const ::hk::detail::Registrar HK_CONCAT(hk_dispatch_registrar_, __COUNTER__)( \
      family, ::hk::detail::typed_dispatch<ProblemT>(family, fn))

#define HK_REGISTER_FAMILY(FamilyT)                                                  \
  static const ::hk::detail::Registrar HK_CONCAT(hk_family_registrar_, __COUNTER__)( \
      std::unique_ptr<::hk::Family>(new FamilyT()))
