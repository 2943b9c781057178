// python/src/module.cpp — hopperkit._C, the nanobind extension over libhopperkit.
//
// Generic over the registry: nothing here names a family. Arrays arrive through DLPack (torch,
// NumPy, CuPy, JAX), become TensorViews, and a family's Family::make_problem turns them plus the
// keyword attributes into a Problem; from there the registry runs a variant on the caller's
// stream, or the fp64 reference runs on the host. hk::Error becomes ValueError / TypeError /
// NotImplementedError / RuntimeError by kind, with the C++ message (docs/python.md).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "hk_version.hpp"

namespace nb = nanobind;

namespace {

using InArray = nb::ndarray<nb::ro>;  // any dtype, shape, strides, device; read-only is fine
using OutArray = nb::ndarray<>;       // written by the kernel: must be writable
using AttrMap = std::map<std::string, hk::AttrValue>;

// DLPack's DLDataTypeCode values (dlpack.h 1.1), spelled out so that any nanobind 2.x builds
// this file (its dtype_code enum gained the float8 codes only recently).
enum DLCode : uint8_t {
  kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6,
  kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12,
};

std::string dlpack_dtype_name(const nb::dlpack::dtype& t) {
  const char* base = nullptr;
  switch (t.code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    case kDLComplex: base = "complex"; break;
    case kDLBool: return "bool";
    default: return "dlpack type code " + std::to_string(t.code) + " (" + std::to_string(t.bits) + " bits)";
  }
  return base + std::to_string(t.bits);
}

hk::DType to_dtype(const nb::dlpack::dtype& t, const std::string& what) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return hk::DType::kF32;
    if (t.code == kDLFloat && t.bits == 16) return hk::DType::kF16;
    if (t.code == kDLBfloat && t.bits == 16) return hk::DType::kBF16;
    if (t.code == kDLFloat8_e4m3fn && t.bits == 8) return hk::DType::kF8E4M3;
    if (t.code == kDLFloat8_e5m2 && t.bits == 8) return hk::DType::kF8E5M2;
    if (t.code == kDLInt && t.bits == 32) return hk::DType::kI32;
    if (t.code == kDLUInt && t.bits == 8) return hk::DType::kU8;
  }
  HK_THROW(kType, what, " is ", dlpack_dtype_name(t),
           "; hopperkit takes f32, f16, bf16, e4m3 (float8_e4m3fn), e5m2, i32 and u8");
}

std::string device_name(int type, int id) {
  switch (type) {
    case nb::device::cpu::value: return "cpu";
    case nb::device::cuda::value: return "cuda:" + std::to_string(id);
    case nb::device::cuda_host::value: return "cuda_host";
    case nb::device::cuda_managed::value: return "cuda_managed:" + std::to_string(id);
    default: return "dlpack device " + std::to_string(type) + ":" + std::to_string(id);
  }
}

template <class ArrayT>
hk::TensorView to_view(const ArrayT& a, const std::string& what) {
  hk::DType dtype = to_dtype(a.dtype(), what);
  std::vector<int64_t> shape(a.ndim()), strides(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = a.shape(i);
    strides[i] = a.stride(i);  // DLPack strides count elements, as TensorView's do
    if (strides[i] < 0)
      HK_THROW(kNotSupported, what, " has a negative stride (", strides[i], " in dim ", i,
               "); make it contiguous first");
  }
  hk::TensorView view(a.data(), dtype, std::move(shape), std::move(strides));
  // An empty array has no layout (NumPy reports strides of 0 for it): call it contiguous.
  if (view.numel() == 0) view.strides = hk::contiguous_strides(view.shape);
  return view;
}

std::string operand_name(std::string_view family, const char* kind, size_t i) {
  return std::string(family) + ": " + kind + " " + std::to_string(i);
}

std::vector<hk::TensorView> to_views(std::string_view family, const std::vector<InArray>& arrays) {
  std::vector<hk::TensorView> views;
  for (size_t i = 0; i < arrays.size(); ++i) views.push_back(to_view(arrays[i], operand_name(family, "input", i)));
  return views;
}

// Every array on one CUDA device (variants; `device` receives its index) or all on the host
// (references).
template <class ArrayT>
void check_device(std::string_view family, const char* kind, size_t i, const ArrayT& a, bool cuda,
                  int& device) {
  int type = a.device_type(), id = a.device_id();
  std::string where = device_name(type, id);
  if (cuda) {
    if (type != nb::device::cuda::value)
      HK_THROW(kValue, operand_name(family, kind, i), " is on ", where,
               "; variants run on CUDA tensors (host arrays run the reference: hk.reference)");
    if (device < 0) device = id;
    if (id != device)
      HK_THROW(kValue, operand_name(family, kind, i), " is on ", where, " but the first operand is on cuda:", device);
  } else if (type != nb::device::cpu::value) {
    HK_THROW(kValue, operand_name(family, kind, i), " is on ", where,
             "; the reference takes host arrays (copy device tensors with .cpu())");
  }
}

const hk::Family& family_of(std::string_view name) {
  auto& reg = hk::Registry::get();
  if (const hk::Family* f = reg.family(name)) return *f;
  std::string known;
  for (const hk::Family* f : reg.families()) known += (known.empty() ? "" : ", ") + f->name();
  HK_THROW(kValue, "no family named '", name, "' (families: ", known, ")");
}

const hk::Variant& variant_of(std::string_view family, std::string_view name) {
  family_of(family);
  auto& reg = hk::Registry::get();
  if (const hk::Variant* v = reg.variant(family, name)) return *v;
  std::string known;
  for (const hk::Variant* v : reg.variants(family)) known += (known.empty() ? "" : ", ") + v->name();
  HK_THROW(kValue, family, " has no variant '", name, "' (variants: ", known, ")");
}

hk::ProblemPtr make_problem(std::string_view family, const std::vector<hk::TensorView>& in, const AttrMap& attrs) {
  hk::ProblemPtr p = family_of(family).make_problem(in, hk::Attrs(attrs));
  if (p->inputs().size() != in.size())
    HK_THROW(kValue, family, ": the problem takes ", p->inputs().size(), " input(s), got ", in.size());
  return p;
}

// Outputs must be exactly what the problem's output specs say: the kernels write that layout.
void check_outputs(const hk::Problem& p, const std::vector<hk::TensorView>& out) {
  auto specs = p.outputs();
  std::string fam = p.family();
  if (specs.size() != out.size())
    HK_THROW(kValue, fam, ": the problem has ", specs.size(), " output(s), got ", out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const hk::TensorSpec& s = specs[i];
    const hk::TensorView& v = out[i];
    std::string what = operand_name(fam, "output", i) + " (" + s.name + ")";
    if (v.dtype != s.dtype)
      HK_THROW(kType, what, " is ", hk::to_string(v.dtype), " but the problem writes ", hk::to_string(s.dtype));
    if (v.shape != s.shape)
      HK_THROW(kValue, what, " has shape [", hk::shape_to_string(v.shape), "] but the problem writes [",
               hk::shape_to_string(s.shape), "]");
    std::vector<int64_t> want = s.strides.empty() ? hk::contiguous_strides(s.shape) : s.strides;
    for (size_t d = 0; d < want.size() && v.numel() > 0; ++d)
      if (s.shape[d] != 1 && v.strides[d] != want[d])
        HK_THROW(kValue, what, " is laid out as ", v.describe(), " but the problem writes strides [",
                 hk::shape_to_string(want), "]");
    if (v.numel() > 0 && v.data == nullptr) HK_THROW(kValue, what, " is a null pointer with ", v.numel(), " elements");
    // make_problem saw only the inputs' alignment; the rung it allows must fit the outputs too.
    if (v.numel() > 0 && v.alignment() < p.align_bytes)
      HK_THROW(kNotSupported, what, " is ", v.alignment(), "-byte aligned, less than the inputs' ",
               p.align_bytes, " bytes; allocate outputs fresh");
  }
}

// Makes `device` current for the launch and restores the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    HK_CHECK_CUDA(cudaGetDevice(&previous_));
    if (previous_ == device) previous_ = -1;
    else HK_CHECK_CUDA(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

nb::object attr_to_py(const hk::AttrValue& v) {
  return std::visit([](const auto& x) -> nb::object { return nb::cast(x); }, v);
}

const char* dist_name(hk::Dist d) {
  switch (d) {
    case hk::Dist::kNormal: return "normal";
    case hk::Dist::kUniform: return "uniform";
    case hk::Dist::kSmallInt: return "small_int";
    case hk::Dist::kPositive: return "positive";
  }
  return "normal";
}

nb::tuple to_tuple(const std::vector<int64_t>& v) {
  nb::list l;
  for (int64_t x : v) l.append(x);
  return nb::tuple(l);
}

nb::dict spec_dict(const hk::TensorSpec& s) {
  nb::dict d;
  d["name"] = s.name;
  d["dtype"] = std::string(hk::to_string(s.dtype));
  d["shape"] = to_tuple(s.shape);
  d["strides"] = to_tuple(s.strides.empty() ? hk::contiguous_strides(s.shape) : s.strides);
  d["dist"] = dist_name(s.dist);
  d["scale"] = s.scale;
  nb::list specials;
  for (auto& [idx, value] : s.specials) specials.append(nb::make_tuple(idx, value));
  d["specials"] = specials;
  return d;
}

nb::dict problem_dict(const hk::Problem& p) {
  nb::dict d;
  d["family"] = p.family();
  d["key"] = p.key();
  d["flops"] = p.flops();
  d["bytes"] = p.bytes();
  d["align_bytes"] = p.align_bytes;
  nb::dict attrs;
  hk::Attrs problem_attrs = p.attrs();
  for (auto& [name, value] : problem_attrs.values()) attrs[name.c_str()] = attr_to_py(value);
  d["attrs"] = attrs;
  nb::list in, out, tol;
  for (auto& s : p.inputs()) in.append(spec_dict(s));
  auto outs = p.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    out.append(spec_dict(outs[i]));
    hk::Tolerance t = p.tolerance(static_cast<int>(i));
    tol.append(nb::make_tuple(t.atol, t.rtol));
  }
  d["inputs"] = in;
  d["outputs"] = out;
  d["tolerances"] = tol;
  return d;
}

nb::list families() {
  nb::list out;
  for (const hk::Family* f : hk::Registry::get().families()) out.append(nb::make_tuple(f->name(), f->summary()));
  return out;
}

nb::list variants(const std::string& family) {
  family_of(family);
  nb::list out;
  for (const hk::Variant* v : hk::Registry::get().variants(family))
    out.append(nb::make_tuple(v->name(), v->summary(), v->min_sm(), v->flags()));
  return out;
}

nb::list test_problems(const std::string& family) {
  nb::list out;
  for (auto& p : family_of(family).test_problems()) out.append(problem_dict(*p));
  return out;
}

nb::dict problem(const std::string& family, const std::vector<InArray>& in, const AttrMap& attrs) {
  return problem_dict(*make_problem(family, to_views(family, in), attrs));
}

std::string supports(const std::string& family, const std::string& variant, const std::vector<InArray>& in,
                     const AttrMap& attrs) {
  const hk::Variant& v = variant_of(family, variant);
  return v.supports(*make_problem(family, to_views(family, in), attrs));
}

// What the public op runs for these inputs and attributes, and why (the family's dispatch).
std::string explain(const std::string& family, const std::vector<InArray>& in, const AttrMap& attrs) {
  return hk::Registry::get().explain(*make_problem(family, to_views(family, in), attrs));
}

// The operands of a launch on the GPU: every array on one CUDA device (named in the error when
// not), viewed with the family's operand names.
struct DeviceOperands {
  int device = -1;
  hk::Operands ops;
};

DeviceOperands device_operands(const std::string& family, const std::vector<InArray>& in,
                               const std::vector<OutArray>& out) {
  DeviceOperands d;
  for (size_t i = 0; i < in.size(); ++i) check_device(family, "input", i, in[i], true, d.device);
  for (size_t i = 0; i < out.size(); ++i) check_device(family, "output", i, out[i], true, d.device);
  if (d.device < 0) HK_THROW(kValue, family, ": no operands");
  d.ops.in = to_views(family, in);
  for (size_t i = 0; i < out.size(); ++i) d.ops.out.push_back(to_view(out[i], operand_name(family, "output", i)));
  return d;
}

// Runs `variant` ("" = the public op's dispatch) on `stream` (a cudaStream_t as an integer, 0 =
// legacy default). Asynchronous, like the C++ ops. Returns the variant that ran.
std::string launch(const std::string& family, const std::string& variant, const std::vector<InArray>& in,
                   const std::vector<OutArray>& out, const AttrMap& attrs, uintptr_t stream) {
  auto [device, ops] = device_operands(family, in, out);
  hk::ProblemPtr p = make_problem(family, ops.in, attrs);
  check_outputs(*p, ops.out);
  DeviceGuard guard(device);
  const hk::Variant& v = variant.empty() ? hk::Registry::get().pick(*p) : variant_of(family, variant);
  bool empty = true;  // nothing to write: a no-op, as in the public C++ ops
  for (auto& o : ops.out) empty = empty && o.numel() == 0;
  if (!empty) {
    nb::gil_scoped_release release;
    v.run(*p, ops, reinterpret_cast<cudaStream_t>(stream));
  }
  return v.name();
}

// The decoder block's fused QKV path (hopperkit.block_ops.rope_attention): the attention
// backward and the rope backward writing through their outputs' own strides, into slices of one
// d(qkv) buffer. hk.launch cannot: its outputs have the problem's (contiguous) strides, and
// gathering dq, dk, dv into d(qkv) by autograd's slice backward cost zero fills, strided copies
// and adds of the whole buffer (about a sixth of a 2.7B block's backward).
// in: q, k, v, o, dout, lse (bshd); out: dq, dk, dv. Runs the public dispatch on `stream`.
void attention_backward_into(const std::vector<InArray>& in, const std::vector<OutArray>& out, bool causal,
                             double scale, bool deterministic, uintptr_t stream) {
  if (in.size() != 6 || out.size() != 3)
    HK_THROW(kValue, "attention_backward_into: takes q, k, v, o, dout, lse and writes dq, dk, dv; got ", in.size(),
             " inputs and ", out.size(), " outputs");
  auto [device, ops] = device_operands("attention", in, out);
  const std::vector<hk::TensorView>& v = ops.in;
  const std::vector<hk::TensorView>& o = ops.out;
  hk::AttentionOptions opt;
  opt.causal = causal;
  opt.scale = scale;
  opt.deterministic = deterministic;
  DeviceGuard guard(device);
  nb::gil_scoped_release release;
  hk::attention_backward(v[0], v[1], v[2], v[3], v[4], v[5], o[0], o[1], o[2], opt,
                         reinterpret_cast<cudaStream_t>(stream));
}

// dx = rope_backward(dy) written through dx's strides (a slice of d(qkv)).
void rope_backward_into(const std::vector<InArray>& in, const OutArray& out, uintptr_t stream) {
  if (in.size() != 3) HK_THROW(kValue, "rope_backward_into: takes dy, cos, sin; got ", in.size(), " inputs");
  auto [device, ops] = device_operands("rope", in, {out});
  DeviceGuard guard(device);
  nb::gil_scoped_release release;
  hk::rope_backward(ops.in[0], ops.in[1], ops.in[2], ops.out[0], reinterpret_cast<cudaStream_t>(stream));
}

// The family's fp64 reference on host arrays: one float64 NumPy array per output, unrounded.
nb::list reference(const std::string& family, const std::vector<InArray>& in, const AttrMap& attrs) {
  int unused = -1;
  for (size_t i = 0; i < in.size(); ++i) check_device(family, "input", i, in[i], false, unused);
  std::vector<hk::TensorView> views = to_views(family, in);
  hk::ProblemPtr p = make_problem(family, views, attrs);
  auto in_specs = p->inputs();
  auto out_specs = p->outputs();
  std::vector<hk::HostTensor> host_in, host_out;
  {
    nb::gil_scoped_release release;
    for (size_t i = 0; i < views.size(); ++i) {
      // Decode the caller's own layout (the problem's spec names the operand).
      hk::TensorSpec layout = in_specs[i];
      layout.dtype = views[i].dtype;
      layout.shape = views[i].shape;
      layout.strides = views[i].strides;
      std::vector<uint8_t> storage(hk::host::storage_bytes(layout));
      if (!storage.empty()) std::memcpy(storage.data(), views[i].data, storage.size());
      hk::HostTensor t{in_specs[i], {}};
      hk::host::decode(layout, storage, t.values);
      host_in.push_back(std::move(t));
    }
    for (auto& s : out_specs) {
      int64_t n = 1;
      for (int64_t d : s.shape) n *= d;
      host_out.push_back(hk::HostTensor{s, std::vector<double>(n, std::nan(""))});
    }
    p->reference(host_in, host_out);
  }
  nb::list result;
  for (auto& t : host_out) {
    auto* data = new double[t.values.size() ? t.values.size() : 1];
    std::copy(t.values.begin(), t.values.end(), data);
    nb::capsule owner(data, [](void* ptr) noexcept { delete[] static_cast<double*>(ptr); });
    std::vector<size_t> shape(t.spec.shape.begin(), t.spec.shape.end());
    result.append(nb::ndarray<nb::numpy, double>(data, shape.size(), shape.data(), owner).cast());
  }
  return result;
}

// The `hk bench` harness; returns the same JSON document as `hk bench --json`.
std::string bench(const std::vector<std::string>& families, const std::string& variant_glob,
                  const std::vector<std::string>& shapes, const std::vector<std::string>& dtypes, bool warm,
                  bool quick, double budget_ms, double spin_us, bool progress) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) HK_THROW(kCuda, "hk.bench needs a CUDA GPU: ", no_gpu);
  hk::bench::BenchRequest req;
  for (auto& f : families) req.families.push_back(family_of(f).name());
  req.variant_glob = variant_glob;
  req.select.shapes = shapes;
  for (auto& d : dtypes) req.select.dtypes.push_back(hk::parse_dtype(d));
  req.select.quick = quick;
  req.time.warm = warm;
  req.time.budget_ms = budget_ms;
  req.time.spin_us = spin_us;
  req.progress = progress;
  std::vector<hk::bench::Row> rows;
  {
    nb::gil_scoped_release release;
    rows = hk::bench::run(req);
  }
  return hk::bench::to_json(rows, req).dump();
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "hopperkit's C++ core: the variant registry, launches on DLPack arrays, fp64 references, bench";

  nb::register_exception_translator([](const std::exception_ptr& e, void*) {
    try {
      std::rethrow_exception(e);
    } catch (const hk::Error& err) {
      PyObject* type = PyExc_RuntimeError;
      switch (err.kind()) {
        case hk::ErrorKind::kValue: type = PyExc_ValueError; break;
        case hk::ErrorKind::kType: type = PyExc_TypeError; break;
        case hk::ErrorKind::kNotSupported: type = PyExc_NotImplementedError; break;
        case hk::ErrorKind::kCuda: type = PyExc_RuntimeError; break;
        case hk::ErrorKind::kInternal: type = PyExc_RuntimeError; break;
      }
      PyErr_SetString(type, err.what());
    }
  });

  m.attr("__version__") = hk::kVersion;
  m.attr("git_sha") = hk::kGitSha;
  m.attr("FLAG_REFERENCE") = static_cast<unsigned>(hk::kFlagReference);
  m.attr("FLAG_BASELINE") = static_cast<unsigned>(hk::kFlagBaseline);
  m.attr("FLAG_PRODUCTION") = static_cast<unsigned>(hk::kFlagProduction);

  m.def("device_count", &hk::device_count, "usable CUDA devices (0 without a driver or GPU)");
  m.def("no_gpu_reason", &hk::no_gpu_reason, "why there is no GPU, or '' when there is one");
  m.def("families", &families, "[(name, summary)] sorted by name");
  m.def("variants", &variants, nb::arg("family"), "[(name, summary, min_sm, flags)] sorted by name");
  m.def("test_problems", &test_problems, nb::arg("family"), "the family's test problems as dicts");
  m.def("problem", &problem, nb::arg("family"), nb::arg("inputs"), nb::arg("attrs"),
        "the problem (dict) that these inputs and attributes pose; validates them");
  m.def("supports", &supports, nb::arg("family"), nb::arg("variant"), nb::arg("inputs"), nb::arg("attrs"),
        "'' when the variant can run the problem, else the reason");
  m.def("explain", &explain, nb::arg("family"), nb::arg("inputs"), nb::arg("attrs"),
        "which variant the public op runs for these inputs, why, and what it passed over");
  m.def("launch", &launch, nb::arg("family"), nb::arg("variant"), nb::arg("inputs"), nb::arg("outputs"),
        nb::arg("attrs"), nb::arg("stream"),
        "runs a variant ('' = default dispatch) on CUDA arrays on `stream`; returns its name");
  m.def("attention_backward_into", &attention_backward_into, nb::arg("inputs"), nb::arg("outputs"),
        nb::arg("causal"), nb::arg("scale"), nb::arg("deterministic"), nb::arg("stream"),
        "attention backward (bshd) writing dq, dk, dv through their own strides, on `stream`");
  m.def("rope_backward_into", &rope_backward_into, nb::arg("inputs"), nb::arg("output"), nb::arg("stream"),
        "rope backward writing dx through its own strides, on `stream`");
  m.def("reference", &reference, nb::arg("family"), nb::arg("inputs"), nb::arg("attrs"),
        "the fp64 reference on host arrays: float64 NumPy arrays, one per output");
  m.def("bench", &bench, nb::arg("families"), nb::arg("variant_glob"), nb::arg("shapes"), nb::arg("dtypes"),
        nb::arg("warm"), nb::arg("quick"), nb::arg("budget_ms"), nb::arg("spin_us"), nb::arg("progress"),
        "runs the hk bench harness; returns its JSON document as a string");
}
