// CPU tests of `hk microbench`: the experiment registry, the table formatting and JSON, and the
// conclusion lines computed from (synthetic) measured numbers.
#include <gtest/gtest.h>

#include <set>

#include "microbench/conclusions.hpp"
#include "microbench/microbench.hpp"

namespace mb = hk::mb;

static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Microbench, RegistryListsAllEightInOrder) {
  const std::vector<std::string> expected{"coalescing", "occupancy",     "bank_conflicts", "sfu",
                                          "wave_quantization", "memory_paths", "clusters_dsmem", "tensor_cores"};
  auto all = mb::experiments();
  ASSERT_EQ(all.size(), expected.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].name, expected[i]);
    EXPECT_EQ(all[i].order, int(i) + 1);
    EXPECT_GT(all[i].summary.size(), 20u) << all[i].name;
    EXPECT_NE(all[i].run, nullptr);
    EXPECT_EQ(mb::find_experiment(expected[i])->name, expected[i]);
  }
  EXPECT_EQ(mb::find_experiment("no_such_experiment"), nullptr);
  EXPECT_THROW(mb::register_experiment({9, "coalescing", "a second one", all[0].run}), hk::Error);
}

TEST(Microbench, NumberFormatting) {
  EXPECT_EQ(mb::num(2.0), "2.00");
  EXPECT_EQ(mb::num(98.76), "98.8");
  EXPECT_EQ(mb::num(4321.4), "4321");
  EXPECT_EQ(mb::num(0.012345), "0.0123");
  EXPECT_EQ(mb::num(0), "0");
  EXPECT_EQ(mb::num(-1.5), "-1.50");
  EXPECT_EQ(mb::Cell(int64_t(7)).str(), "7");
  EXPECT_EQ(mb::Cell("text").str(), "text");
}

TEST(Microbench, TableMarkdownAndJson) {
  mb::Table t("demo", {"pattern", "cycles"});
  t.add({"row", 1.0});
  t.add({"column", 32});
  EXPECT_THROW(t.add({"too", 1, 2}), hk::Error);
  t.conclusion = "columns cost 32x";
  std::string md = mb::markdown(t);
  EXPECT_TRUE(has(md, "### demo\n\n"));
  EXPECT_TRUE(has(md, "| pattern | cycles |"));
  EXPECT_TRUE(has(md, "|---------|-------:|"));  // text left, numbers right
  EXPECT_TRUE(has(md, "| column  |     32 |"));
  EXPECT_TRUE(has(md, "| row     |   1.00 |"));
  EXPECT_TRUE(has(md, "\ncolumns cost 32x\n"));
  nlohmann::json j = mb::to_json(t);
  EXPECT_EQ(j["title"], "demo");
  EXPECT_EQ(j["columns"][1], "cycles");
  EXPECT_TRUE(j["rows"][0][1].is_number_float());
  EXPECT_TRUE(j["rows"][1][1].is_number_integer());
  EXPECT_TRUE(j["rows"][1][0].is_string());
  EXPECT_EQ(j["conclusion"], "columns cost 32x");
}

TEST(Microbench, RandomCycleVisitsEverySlotOnce) {
  auto next = mb::random_cycle(1000, 3);
  std::set<uint32_t> seen;
  uint32_t j = 0;
  for (int i = 0; i < 1000; ++i) seen.insert(j = next[j]);
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(j, 0u);  // back at the start after exactly n steps
  EXPECT_TRUE(mb::random_cycle(0, 1).empty());
  EXPECT_EQ(mb::median({3, 1, 2, 10}), 2.5);
}

TEST(MicrobenchConclusions, Coalescing) {
  EXPECT_EQ(mb::sector_bytes_per_byte_used(1, 4), 1);
  EXPECT_EQ(mb::sector_bytes_per_byte_used(2, 4), 2);
  EXPECT_EQ(mb::sector_bytes_per_byte_used(32, 4), 8);
  EXPECT_EQ(mb::sector_bytes_per_byte_used(4, 16), 2);
  std::string s = mb::coalescing_stride_conclusion(
      {{1, 3.0e12, 3.2e12, 3.0e12}, {2, 1.5e12, 1.6e12, 1.0e12}, {4, 0.76e12}, {32, 0.35e12, 0.4e12, 0.1e12}}, 4);
  EXPECT_TRUE(has(s, "stride 2 halves the copy's effective bandwidth (2.00x the stride-1 time; reads alone 2.00x, "
                     "writes alone 3.00x; 32-byte sectors predict 2.00x the bytes)")) << s;
  EXPECT_TRUE(has(s, "stride 32 divides by 8.57")) << s;
  EXPECT_TRUE(has(s, "reads alone 8.00x, writes alone 30.0x; 32-byte sectors predict 8.00x")) << s;
  // Halves not measured: the copy's ratio alone.
  std::string c = mb::coalescing_stride_conclusion({{1, 3.0e12}, {4, 0.76e12}}, 4);
  EXPECT_TRUE(has(c, "stride 4 quarters the copy's effective bandwidth (3.95x the stride-1 time; 32-byte sectors predict 4.00x")) << c;
  EXPECT_TRUE(has(mb::coalescing_stride_conclusion({{2, 1e12}}, 4), "no stride-1"));
  std::string m = mb::misaligned_conclusion({{0, 35, 20, 18}, {4, 48, 21, 30}, {32, 37, 20, 19}});
  EXPECT_TRUE(has(m, "the worst misaligned start (4 bytes) keeps 72.9% of the aligned copy bandwidth (reads alone 95.2%, "
                     "writes alone 60.0%): a larger loss")) << m;
  EXPECT_TRUE(has(mb::misaligned_conclusion({{0, 35, 20, 18}, {4, 36, 20, 18}}), "HBM moves the same bytes"));
  EXPECT_TRUE(has(mb::misaligned_conclusion({{4, 36, 20, 18}}), "no aligned baseline"));
  std::string w = mb::coalescing_width_conclusion({{4, 2.0e12}, {8, 3.0e12}, {16, 4.0e12}}, 4.4e12);
  EXPECT_TRUE(has(w, "16-byte accesses are fastest at 4.00 TB/s (90.9% of cudaMemcpy), 2.00x the 4-byte")) << w;
  EXPECT_EQ(mb::describe_slowdown(1.02), "keeps");
  EXPECT_EQ(mb::describe_slowdown(4.1), "quarters");
  EXPECT_EQ(mb::describe_slowdown(3.0), "divides by 3.00");
}

// Two blocks on SM 0 overlapping over cycles 100..300, one on SM 1 over 0..400; a second launch
// at half the clock. Per SM: work of its blocks / its union of cycles; clock over the same span.
TEST(Microbench, PerClockCountsCyclesPerSm) {
  std::vector<mb::BlockSpan> s{{100, 250, 1000, 1150, 0}, {150, 300, 1050, 1200, 0}, {0, 400, 1000, 1400, 1},
                               {0, 200, 0, 400, 0},       {0, 200, 0, 400, 0},       {0, 400, 0, 800, 1}};
  mb::PerClock pc = mb::per_clock(s, 3, 100);
  // rates: launch 1: SM0 200/200 = 1, SM1 100/400 = 0.25; launch 2: SM0 200/200 = 1, SM1 0.25.
  EXPECT_DOUBLE_EQ(pc.per_sm_clk, 0.625);
  EXPECT_DOUBLE_EQ(pc.mhz, 750);  // 1000 MHz in launch 1, 500 in launch 2
  EXPECT_EQ(mb::per_clock({}, 3, 100).per_sm_clk, 0);
}

TEST(MicrobenchConclusions, Occupancy) {
  std::vector<mb::OccupancyPoint> mem{{4, 1.0e12}, {8, 2.5e12}, {16, 3.9e12}, {32, 4.1e12}, {64, 4.2e12}};
  EXPECT_EQ(mb::warps_to_reach(mem, 0.9), 16);
  EXPECT_EQ(mb::warps_to_reach({}, 0.9), -1);
  std::string s = mb::occupancy_conclusion(mem, "the stream");
  EXPECT_TRUE(has(s, "the stream reaches 90% of its best rate at 16.0 warps/SM")) << s;
  EXPECT_TRUE(has(s, "from 4.00 to 64.0 warps/SM (16.0x) it grows 4.20x")) << s;
}

TEST(MicrobenchConclusions, BankConflicts) {
  std::vector<mb::BankPoint> pts{{"row", 1, 1.0},  {"stride 2", 2, 2.0},       {"column", 32, 32.5},
                                 {"padded", 1, 1.0}, {"swizzled", 1, 1.1}};
  std::string s = mb::bank_conflict_conclusion(pts);
  EXPECT_TRUE(has(s, "column costs 32.5 cycles per access, 32.5x the conflict-free read")) << s;
  EXPECT_TRUE(has(s, "cycles per way: 1.00 1.02")) << s;
  EXPECT_TRUE(has(s, "padded: 1.00x; swizzled: 1.10x")) << s;
  EXPECT_TRUE(has(mb::bank_conflict_conclusion({{"row", 1, 1.0}}), "no 32-way"));
}

TEST(MicrobenchConclusions, SfuWaveMemoryClustersTensor) {
  std::string sfu = mb::sfu_conclusion(126, 15.8, 7.6, 4.4);
  EXPECT_TRUE(has(sfu, "(7.97x fewer")) << sfu;
  EXPECT_TRUE(has(sfu, "1.73x the 4.40 a bf16 GeLU needs")) << sfu;
  EXPECT_TRUE(has(sfu, "stays memory-bound")) << sfu;
  EXPECT_TRUE(has(mb::sfu_conclusion(126, 15.8, 3.0, 4.4), "its math, not HBM, sets its speed"));

  std::vector<mb::WavePoint> w{{66, 30, 16}, {132, 30, 30}, {133, 60, 34}, {264, 60, 60}};
  std::string ws = mb::wave_conclusion(w, 132);
  EXPECT_TRUE(has(ws, "133 tiles take 2.00x as long as 132")) << ws;
  EXPECT_TRUE(has(ws, "persistent grid over 8x finer chunks takes 1.13x")) << ws;
  EXPECT_TRUE(has(mb::wave_conclusion({{66, 30, 16}}, 132), "lacks"));
  // t = 3 + 40 x waves: the fit recovers both terms, whole waves sit at 100% of the ideal, and a
  // partial wave cannot beat it.
  std::vector<mb::WavePoint> w3{{66, 43, 23}, {132, 43, 43}, {133, 83, 48}, {264, 83, 83}, {396, 123, 125}};
  mb::WaveFit fit = mb::wave_fit(w3, 132);
  EXPECT_NEAR(fit.fixed_us, 3, 1e-9);
  EXPECT_NEAR(fit.wave_us, 40, 1e-9);
  EXPECT_NEAR(fit.ideal_us(396, 132), 123, 1e-9);
  EXPECT_NEAR(fit.ideal_us(66, 132), 23, 1e-9);
  for (auto& p : w3) EXPECT_LE(fit.ideal_us(p.tiles, 132), p.tile_grid_us + 1e-9) << p.tiles;
  EXPECT_TRUE(has(mb::wave_conclusion(w3, 132), "(3.00 us + 40.0 us per wave x tiles / SMs)")) << mb::wave_conclusion(w3, 132);
  EXPECT_EQ(mb::wave_fit({{66, 30, 16}}, 132).wave_us, 0);

  EXPECT_TRUE(has(mb::hbm_conclusion(4.3e12, 4.8e12), "4.30 TB/s, 89.6% of the 4.80 TB/s datasheet"));
  std::string lat = mb::latency_conclusion(33, 260, 780);
  EXPECT_TRUE(has(lat, "7.88x") && has(lat, "3.00x L2")) << lat;
  std::string ds = mb::dsmem_conclusion(30, 200, 270, 64, 128);
  EXPECT_TRUE(has(ds, "200 cycles away (own: 30.0, L2: 270, so DSMEM is 1.35x closer")) << ds;
  EXPECT_TRUE(has(ds, "50.0% of reading one's own")) << ds;
  std::string tc = mb::tensor_conclusion(2048, 3900, 4096);
  EXPECT_TRUE(has(tc, "3900 FLOP/SM/cycle (95.2%") && has(tc, "mma.sync 2048 (50.0%)")) << tc;
  EXPECT_TRUE(has(mb::launch_conclusion(2.0, 0.5), "(4.00x less)"));
}
