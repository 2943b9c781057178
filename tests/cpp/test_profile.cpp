// The profiler: the data model on the CPU (records built by hand: parsing, attribution to ranges,
// aggregation, sorting, names, occupancy, table, JSON) and, with a GPU, kernel counts per op.
#include <gtest/gtest.h>

#include <cstring>

#include "core/trace.hpp"
#include "gelu/gelu_op.hpp"
#include "hk/hk.hpp"
#include "profile/collector.hpp"
#include "profile/records.hpp"
#include "profile/session.hpp"

namespace hp = hk::profile;

namespace {

// Device-side symbols of real kernels (from the gelu objects): two instantiations of one
// template that differ only in their lambda, and the vectorized rung's kernel.
const char* kStepA =
    "_ZN2hk53_GLOBAL__N__4d6c9bf9_14_v01_unfused_cu_97880999_1799820gelu_v01_step_kernelI13__nv_bfloat16fS2_"
    "ZNS0_11run_unfusedIS2_EEvRKNS_8GeluArgsEP11CUstream_stEUlffE20_EEvPKT_PKT0_PT1_lT2_";
const char* kStepB =
    "_ZN2hk53_GLOBAL__N__4d6c9bf9_14_v01_unfused_cu_97880999_1799820gelu_v01_step_kernelI13__nv_bfloat16fS2_"
    "ZNS0_11run_unfusedIS2_EEvRKNS_8GeluArgsEP11CUstream_stEUlffE28_EEvPKT_PKT0_PT1_lT2_";
const char* kV03 =
    "_ZN2hk56_GLOBAL__N__9865e09e_17_v03_vectorized_cu_97880999_1818115gelu_v03_kernelI13__nv_bfloat16Lb0ELb0EEEvPKT_"
    "S5_PS3_l";

// An H100/H200 SXM as cudaGetDeviceProperties reports it.
hp::DeviceLimits hopper() {
  hp::DeviceLimits d;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.regs_per_block = 65536;
  d.regs_per_sm = 65536;
  d.smem_per_block = 48 * 1024;
  d.smem_per_block_optin = 227 * 1024;
  d.smem_per_sm = 228 * 1024;
  d.reserved_smem_per_block = 1024;
  return d;
}

hp::KernelRecord kernel(const char* name, uint32_t corr, uint64_t start, uint64_t dur, int grid = 1024,
                        int block = 256) {
  hp::KernelRecord k;
  k.name = name;
  k.correlation_id = corr;
  k.start_ns = start;
  k.end_ns = start + dur;
  k.grid = {grid, 1, 1};
  k.block = {block, 1, 1};
  k.registers_per_thread = 16;
  return k;
}

using Views = std::vector<std::string_view>;

}  // namespace

// ---- record parsing ---------------------------------------------------------------------

TEST(ProfileRecords, KernelRecordFromCupti) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = kV03;
  k.start = 1000;
  k.end = 4500;
  k.correlationId = 77;
  k.deviceId = 0;
  k.streamId = 7;
  k.gridX = 528;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 4096;
  hp::Trace t;
  ASSERT_TRUE(hp::append_record(t, reinterpret_cast<const CUpti_Activity*>(&k)));
  ASSERT_EQ(t.kernels.size(), 1u);
  const hp::KernelRecord& r = t.kernels[0];
  EXPECT_EQ(r.name, kV03);
  EXPECT_EQ(r.duration_ns(), 3500u);
  EXPECT_EQ(r.correlation_id, 77u);
  EXPECT_EQ(r.stream, 7u);
  EXPECT_EQ(r.grid, (std::array<int32_t, 3>{528, 2, 1}));
  EXPECT_EQ(r.block, (std::array<int32_t, 3>{256, 1, 1}));
  EXPECT_EQ(r.registers_per_thread, 32);
  EXPECT_EQ(r.static_smem, 1024);
  EXPECT_EQ(r.dynamic_smem, 4096);
}

TEST(ProfileRecords, MemcpyMemsetAndOtherKinds) {
  CUpti_ActivityMemcpy6 c;
  std::memset(&c, 0, sizeof c);
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  c.bytes = 1 << 20;
  c.start = 10;
  c.end = 30;
  c.correlationId = 5;
  c.runtimeCorrelationId = 4;
  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 4096;
  s.start = 40;
  s.end = 41;
  s.correlationId = 6;
  CUpti_Activity other{CUPTI_ACTIVITY_KIND_RUNTIME};
  hp::Trace t;
  EXPECT_TRUE(hp::append_record(t, reinterpret_cast<const CUpti_Activity*>(&c)));
  EXPECT_TRUE(hp::append_record(t, reinterpret_cast<const CUpti_Activity*>(&s)));
  EXPECT_FALSE(hp::append_record(t, &other));
  ASSERT_EQ(t.memops.size(), 2u);
  EXPECT_EQ(t.memops[0].kind, hp::MemKind::kMemcpy);
  EXPECT_EQ(t.memops[0].direction, "DtoH");
  EXPECT_EQ(t.memops[0].bytes, uint64_t(1) << 20);
  EXPECT_EQ(t.memops[0].duration_ns(), 20u);
  EXPECT_EQ(t.memops[0].runtime_correlation_id, 4u);
  EXPECT_EQ(t.memops[1].kind, hp::MemKind::kMemset);
  EXPECT_EQ(t.memops[1].correlation_id, 6u);
  EXPECT_TRUE(t.kernels.empty());
}

// ---- attribution ------------------------------------------------------------------------

TEST(ProfileAttribution, NestedRangesByCorrelationId) {
  hp::Trace t;
  // hk::gelu (public op) > gelu/v01_unfused/key (variant): two launches, runtime and driver ids.
  t.tag(1, Views{"hk::gelu", "gelu/v01_unfused/8_f32_tanh_fwd"});
  t.tag(2, Views{"hk::gelu", "gelu/v01_unfused/8_f32_tanh_fwd"});
  // The variant run directly, no op range.
  t.tag(3, Views{"gelu/v03_vectorized/8_f32_tanh_fwd"});
  // Only the op range open (validation, a memset before dispatch).
  t.tag(4, Views{"hk::gelu"});
  EXPECT_EQ(t.distinct_stacks(), 3u) << "identical stacks are stored once";
  ASSERT_NE(t.ranges(1), nullptr);
  EXPECT_EQ(*t.ranges(1), (hp::RangeStack{"hk::gelu", "gelu/v01_unfused/8_f32_tanh_fwd"}));
  EXPECT_EQ(t.ranges(99), nullptr) << "untagged: launched outside every range";

  t.kernels = {kernel(kStepA, 1, 0, 100), kernel(kStepB, 2, 200, 50), kernel(kV03, 3, 400, 30),
               kernel(kV03, 99, 500, 1000)};
  t.memops.push_back(hp::MemRecord{hp::MemKind::kMemset, "", 64, 600, 610, 4, 0});
  // A copy whose driver id is untagged but whose runtime id is: still attributed.
  t.memops.push_back(hp::MemRecord{hp::MemKind::kMemcpy, "DtoD", 128, 700, 720, 98, 2});

  auto v01 = hp::summarize(t, hopper(), "gelu/v01_unfused/*");
  EXPECT_EQ(v01.kernels, 2);
  EXPECT_EQ(v01.memops, 1);
  EXPECT_EQ(v01.mem_bytes, 128u);
  auto op = hp::summarize(t, hopper(), "hk::gelu");
  EXPECT_EQ(op.kernels, 2) << "the outer range holds the inner range's kernels";
  EXPECT_EQ(op.memops, 2);
  auto v03 = hp::summarize(t, hopper(), "gelu/v03_vectorized/8_f32_tanh_fwd");
  EXPECT_EQ(v03.kernels, 1) << "the untagged launch of the same kernel is not the variant's";
  auto all = hp::summarize(t, hopper(), "");
  EXPECT_EQ(all.kernels, 4);
  EXPECT_EQ(all.memops, 2);
  EXPECT_EQ(hp::summarize(t, hopper(), "gelu/v02*").kernels, 0);
}

TEST(ProfileAttribution, TraceRangesKeepAThreadLocalStack) {
  EXPECT_TRUE(hk::trace::open_ranges().empty());
  {
    HK_TRACE_RANGE("hk::outer");
    {
      hk::trace::Range inner{std::string("gelu/v03_vectorized/") + "3_bf16_tanh_fwd"};
      EXPECT_EQ(hk::trace::open_ranges(), (Views{"hk::outer", "gelu/v03_vectorized/3_bf16_tanh_fwd"}));
      hp::Trace t;
      t.tag(11, hk::trace::open_ranges());
      EXPECT_EQ(*t.ranges(11), (hp::RangeStack{"hk::outer", "gelu/v03_vectorized/3_bf16_tanh_fwd"}));
    }
    EXPECT_EQ(hk::trace::open_ranges(), (Views{"hk::outer"}));
  }
  EXPECT_TRUE(hk::trace::open_ranges().empty());
}

// ---- aggregation, sorting, percentages --------------------------------------------------

TEST(ProfileSummary, AggregatesSortsAndShares) {
  hp::Trace t;
  t.tag(1, Views{"r"});
  // kStepA: 3 calls (100, 300, 200 ns); kV03: 2 calls (250, 250); kStepB: 1 call of 500.
  t.kernels = {kernel(kStepA, 1, 0, 100),    kernel(kV03, 1, 1000, 250), kernel(kStepA, 1, 2000, 300),
               kernel(kStepB, 1, 3000, 500), kernel(kStepA, 1, 4000, 200), kernel(kV03, 1, 5000, 250)};
  t.memops.push_back(hp::MemRecord{hp::MemKind::kMemset, "", 1000, 6000, 6100, 1, 0});
  t.dropped = 3;
  auto s = hp::summarize(t, hopper(), "r");
  ASSERT_EQ(s.rows.size(), 4u);
  EXPECT_EQ(s.gpu_ns, 1700u);
  EXPECT_EQ(s.kernels, 6);
  EXPECT_EQ(s.dropped, 3u);
  // kStepA 600 > kV03 500 == kStepB 500 (tie: by name) > memset 100.
  EXPECT_EQ(s.rows[0].name, kStepA);
  EXPECT_EQ(s.rows[0].calls, 3);
  EXPECT_EQ(s.rows[0].total_ns, 600u);
  EXPECT_EQ(s.rows[0].min_ns, 100u);
  EXPECT_EQ(s.rows[0].max_ns, 300u);
  EXPECT_DOUBLE_EQ(s.rows[0].mean_ns(), 200.0);
  EXPECT_EQ(s.rows[0].first_start_ns, 0u);
  EXPECT_EQ(s.rows[1].name, std::min(std::string(kV03), std::string(kStepB)));
  EXPECT_EQ(s.rows[1].total_ns, 500u);
  EXPECT_EQ(s.rows[2].total_ns, 500u);
  EXPECT_EQ(s.rows[3].kind, "memset");
  EXPECT_EQ(s.rows[3].bytes, 1000u);
  double sum = 0;
  for (auto& r : s.rows) sum += r.percent;
  EXPECT_NEAR(sum, 100.0, 1e-9);
  EXPECT_NEAR(s.rows[0].percent, 100.0 * 600 / 1700, 1e-9);
  EXPECT_NEAR(s.rows[3].percent, 100.0 * 100 / 1700, 1e-9);
}

TEST(ProfileSummary, MixedLaunchConfigurations) {
  hp::Trace t;
  t.tag(1, Views{"r"});
  t.kernels = {kernel(kV03, 1, 0, 10, 1024, 256), kernel(kV03, 1, 10, 10, 1024, 256)};
  EXPECT_FALSE(hp::summarize(t, hopper(), "r").rows[0].mixed_config);
  t.kernels.push_back(kernel(kV03, 1, 20, 10, 2048, 256));
  auto s = hp::summarize(t, hopper(), "r");
  EXPECT_TRUE(s.rows[0].mixed_config);
  EXPECT_EQ(s.rows[0].grid, (std::array<int32_t, 3>{1024, 1, 1})) << "the first call's configuration";
  EXPECT_NE(hp::format_table(s).find("varies"), std::string::npos);
}

// ---- occupancy estimate -----------------------------------------------------------------

TEST(ProfileOccupancy, CalculatorLimitsAndGridCap) {
  const auto d = hopper();
  auto k = kernel(kV03, 1, 0, 1, 1 << 20, 256);  // 8 blocks of 8 warps fill 64 warp slots
  EXPECT_DOUBLE_EQ(hp::occupancy_estimate(k, d), 1.0);
  k.registers_per_thread = 128;  // 32K registers per block: 2 blocks per SM
  EXPECT_DOUBLE_EQ(hp::occupancy_estimate(k, d), 0.25);
  k.registers_per_thread = 32;
  k.dynamic_smem = 100 * 1024;  // (100 + 1 reserved) KiB per block: 2 blocks in 228 KiB
  EXPECT_DOUBLE_EQ(hp::occupancy_estimate(k, d), 0.25);
  k.dynamic_smem = 0;
  k.grid = {66, 1, 1};  // half a wave: the busiest SM holds one block
  EXPECT_DOUBLE_EQ(hp::occupancy_estimate(k, d), 8.0 / 64);
  k.grid = {132 * 3, 1, 1};  // three blocks per SM
  EXPECT_DOUBLE_EQ(hp::occupancy_estimate(k, d), 24.0 / 64);
  k.block = {0, 1, 1};
  EXPECT_LT(hp::occupancy_estimate(k, d), 0) << "unknown, not zero";
  EXPECT_LT(hp::occupancy_estimate(kernel(kV03, 1, 0, 1), hp::DeviceLimits{}), 0) << "no device limits";
}

// ---- names ------------------------------------------------------------------------------

TEST(ProfileNames, DemangleShortenBase) {
  const std::string d = hp::demangle(kStepA);
  EXPECT_EQ(d.rfind("void hk::(anonymous namespace)::gelu_v01_step_kernel<__nv_bfloat16, float, __nv_bfloat16, ", 0),
            0u)
      << d;
  EXPECT_EQ(hp::demangle("bench_l2_flush_kernel"), "bench_l2_flush_kernel") << "not mangled: unchanged";
  EXPECT_EQ(hp::base_name(d), "gelu_v01_step_kernel");
  EXPECT_EQ(hp::base_name(hp::demangle(kV03)), "gelu_v03_kernel");
  EXPECT_EQ(hp::base_name("plain_c_kernel"), "plain_c_kernel");

  const std::string v03 = hp::demangle(kV03);  // void hk::(anon)::gelu_v03_kernel<__nv_bfloat16, false, false>(...)
  EXPECT_EQ(hp::short_name(v03, 80), "hk::gelu_v03_kernel<__nv_bfloat16, false, false>") << "fits: namespaces kept";
  EXPECT_EQ(hp::short_name(v03, 46), "gelu_v03_kernel<__nv_bfloat16, false, false>") << "namespaces dropped";
  EXPECT_EQ(hp::short_name(v03, 30), "gelu_v03_kernel<...>") << "template arguments dropped";
  EXPECT_EQ(hp::short_name(v03, 12), "gelu_v03_...") << "truncated";
  EXPECT_EQ(hp::short_name(d, 44), "gelu_v01_step_kernel<...>");
  EXPECT_EQ(hp::short_name("hk::f(int)", 44), "hk::f");
}

TEST(ProfileTable, NumbersLookAlikeKernelsInLaunchOrder) {
  hp::Trace t;
  t.tag(1, Views{"r"});
  // kStepB runs first but longer: sorted first by time, numbered #1 by launch order.
  t.kernels = {kernel(kStepB, 1, 0, 900), kernel(kStepA, 1, 1000, 100), kernel(kV03, 1, 2000, 50)};
  auto s = hp::summarize(t, hopper(), "r");
  std::string table = hp::format_table(s);
  size_t a = table.find("gelu_v01_step_kernel<...> #1");
  size_t b = table.find("gelu_v01_step_kernel<...> #2");
  size_t c = table.find("gelu_v03_kernel<__nv_bfloat16, false, false>");
  ASSERT_NE(a, std::string::npos) << table;
  ASSERT_NE(b, std::string::npos) << table;
  ASSERT_NE(c, std::string::npos) << table;
  EXPECT_LT(a, b) << "kStepB: more time, listed first, and launched first";
  EXPECT_LT(b, c);
  EXPECT_NE(table.find("   85.7 "), std::string::npos) << "900 of 1050 ns\n" << table;
  EXPECT_NE(table.find("1024 / 256"), std::string::npos) << table;
  EXPECT_NE(table.find("~100%"), std::string::npos) << table;
  EXPECT_NE(table.find("an estimate"), std::string::npos) << "the occupancy column says what it is";
}

// ---- JSON -------------------------------------------------------------------------------

TEST(ProfileJson, SummaryRoundTrip) {
  hp::Trace t;
  t.tag(1, Views{"r"});
  t.kernels = {kernel(kStepA, 1, 0, 123), kernel(kStepA, 1, 500, 77), kernel(kV03, 1, 900, 31, 66, 128)};
  t.kernels[2].dynamic_smem = 4096;
  t.memops.push_back(hp::MemRecord{hp::MemKind::kMemcpy, "HtoD", 1 << 20, 1000, 1500, 1, 0});
  t.dropped = 2;
  auto s = hp::summarize(t, hopper(), "r");
  nlohmann::json j = hp::to_json(s);
  EXPECT_EQ(j.at("rows").at(0).at("kind"), "memcpy") << "500 ns: the largest row";
  EXPECT_EQ(j.at("rows").at(1).at("demangled").get<std::string>().find("void hk::"), 0u);
  auto back = hp::summary_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(back, s);
  EXPECT_EQ(back.rows.size(), 3u);
}

// ---- GPU: kernels per op --------------------------------------------------------------------

namespace {

hp::VariantProfile profile_gelu(const char* variant, int iters) {
  auto p = std::make_shared<hk::GeluProblem>(std::vector<int64_t>{1 << 20}, hk::DType::kBF16, hk::GeluApprox::kTanh,
                                             false);
  const hk::Variant* v = hk::Registry::get().variant("gelu", variant);
  EXPECT_NE(v, nullptr) << variant;
  hk::bench::Case c(p, 1234);
  hp::RunOptions opt;
  opt.iters = iters;
  return hp::profile_variant(*v, c, opt);
}

}  // namespace

TEST(ProfileGpu, GeluKernelsPerOp) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int iters = 3;
  // v01_unfused: one kernel per arithmetic step, 8 for forward tanh; v03: one fused kernel.
  for (auto [variant, per_op] : {std::pair{"v01_unfused", 8}, std::pair{"v03_vectorized", 1}}) {
    hp::VariantProfile vp = profile_gelu(variant, iters);
    ASSERT_EQ(vp.status, "ok") << variant;
    if (!vp.collector_off.empty()) GTEST_SKIP() << "collector off: " << vp.collector_off;
    EXPECT_EQ(vp.summary.dropped, 0u) << variant;
    EXPECT_EQ(vp.ops, iters);
    EXPECT_EQ(vp.summary.kernels, int64_t(per_op) * iters) << variant << "\n" << hp::format_table(vp.summary);
    EXPECT_EQ(vp.kernel_names().size(), size_t(per_op)) << variant;
    for (const hp::Row& r : vp.summary.rows) {
      EXPECT_EQ(r.calls, iters) << variant << " " << r.name;
      EXPECT_GT(r.min_ns, 0u) << r.name;
      if (r.kind == "kernel") {
        EXPECT_GT(r.registers_per_thread, 0) << r.name;
      }
    }
    EXPECT_GT(vp.gpu_us_per_op(), 0) << variant;
    EXPECT_GT(vp.event_median_us, 0) << variant;
    for (const std::string& n : vp.kernel_names())
      EXPECT_EQ(hp::base_name(hp::demangle(n)).rfind(std::string("gelu_") + std::string(variant).substr(0, 3), 0), 0u)
          << n;
  }
}

TEST(ProfileGpu, PublicOpRangeHoldsTheVariantRange) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  hk::GeluProblem p({4097}, hk::DType::kF32, hk::GeluApprox::kTanh, false);
  hk::bench::Case c(std::make_shared<hk::GeluProblem>(p), 99);
  const hk::Operands ops = c.operands();
  const hk::Variant& picked = hk::Registry::get().pick(p);
  std::string why;
  auto collector = hp::Collector::start(&why);
  if (!collector) GTEST_SKIP() << "collector off: " << why;
  hk::gelu(ops.in[0], ops.out[0]);
  hp::Trace t = collector->stop();
  auto op = hp::summarize(t, hp::current_device_limits(), "hk::gelu");
  auto var = hp::summarize(t, hp::current_device_limits(), hp::variant_range(picked, p));
  EXPECT_GT(op.kernels, 0);
  EXPECT_EQ(op.kernels, var.kernels) << "every kernel of the op ran inside " << picked.name() << "'s range";
  std::string again;
  EXPECT_NE(hp::Collector::start(&again), nullptr) << "a stopped collector can start again: " << again;
}
