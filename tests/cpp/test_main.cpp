// The one test binary's main: registers one test per (family, variant, test problem) and one
// CUDA-graph test per (family, test problem) from the registry (docs/design.md §5), then runs
// everything. Without a GPU those tests skip with the reason.
#include <gtest/gtest.h>

#include "hk/device.hpp"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <random>

#include "bench/case.hpp"
#include "hk/hk.hpp"

namespace {

// Fresh inputs every run; the seed is printed with a failure so that it can be replayed.
uint64_t fresh_seed() {
  return std::random_device{}() ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

class VariantTest : public testing::Test {
 public:
  VariantTest(const hk::Variant* v, hk::ProblemPtr p) : v_(v), p_(std::move(p)) {}
  void TestBody() override {
    std::string no_gpu = hk::no_gpu_reason();
    if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
    std::string why = v_->supports(*p_);
    if (!why.empty()) GTEST_SKIP() << v_->name() << " does not support " << p_->key() << ": " << why;
    uint64_t seed = fresh_seed();
    hk::bench::Case c(p_, seed);
    hk::bench::CheckResult r = c.run_and_check(*v_);
    EXPECT_TRUE(r.ok) << v_->family() << "/" << v_->name() << " " << p_->key() << " seed " << seed
                      << ": " << r.message;
  }

 private:
  const hk::Variant* v_;
  hk::ProblemPtr p_;
};

// The public op under CUDA-graph capture: the dispatch's choice is captured on a fresh
// non-blocking stream in global mode (torch.cuda.graph's default, the strictest), so whatever
// the op allocates, zeroes or creates on its first call happens under capture. The graph is then
// replayed twice on the inputs in the captured buffers, outputs poisoned before each replay:
// the first replay must compute (not leave what capture saw), the second must find every
// counter and flag a kernel keeps between launches reset.
class GraphReplayTest : public testing::Test {
 public:
  explicit GraphReplayTest(hk::ProblemPtr p) : p_(std::move(p)) {}
  void TestBody() override {
    std::string no_gpu = hk::no_gpu_reason();
    if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
    const hk::Variant& v = hk::Registry::get().pick(*p_);
    uint64_t seed = fresh_seed();
    hk::bench::Case c(p_, seed);
    Graph g;
    ASSERT_EQ(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    std::string thrown;
    try {
      v.run(*p_, c.operands(), g.stream);
    } catch (const std::exception& e) {
      thrown = e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(g.stream, &g.graph);
    ASSERT_TRUE(thrown.empty()) << v.name() << " under capture: " << thrown;
    ASSERT_EQ(end, cudaSuccess) << v.name() << ": capture ended with " << cudaGetErrorString(end);
    ASSERT_EQ(cudaGraphInstantiate(&g.exec, g.graph, 0), cudaSuccess);
    for (int replay = 1; replay <= 2; ++replay) {
      c.poison_outputs(g.stream);
      ASSERT_EQ(cudaGraphLaunch(g.exec, g.stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(g.stream), cudaSuccess);
      hk::bench::CheckResult r = c.check();
      EXPECT_TRUE(r.ok) << p_->family() << "/" << v.name() << " " << p_->key() << " seed " << seed << ", replay "
                        << replay << ": " << r.message;
    }
  }

 private:
  struct Graph {
    cudaStream_t stream = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~Graph() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      if (stream) cudaStreamDestroy(stream);
    }
  };
  hk::ProblemPtr p_;
};

// gtest filters treat '-' (and ':', '*', '?') as syntax, so a name holding one cannot be selected
// alone (ctest runs each case as --gtest_filter=<name>, which would then run nothing and "pass").
std::string test_name(std::string key) {
  for (char& ch : key)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  return key;
}

// HK_TEST_STRIDE=N registers every Nth test problem of each variant (its first always): what
// scripts/sanitize.sh runs under compute-sanitizer, where the whole list takes too long. A gtest
// filter naming the cases instead grew past the 128 KiB a single argument may hold.
size_t test_stride() {
  const char* s = std::getenv("HK_TEST_STRIDE");
  const long n = s ? std::strtol(s, nullptr, 10) : 1;
  return n > 1 ? size_t(n) : 1;
}

void register_variant_tests() {
  auto& reg = hk::Registry::get();
  const size_t stride = test_stride();
  for (const hk::Family* f : reg.families()) {
    auto problems = f->test_problems();
    for (const hk::Variant* v : reg.variants(f->name())) {
      std::string suite = f->name() + "/" + v->name();
      for (size_t i = 0; i < problems.size(); i += stride) {
        const hk::ProblemPtr& p = problems[i];
        testing::RegisterTest(suite.c_str(), test_name(p->key()).c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [v, p]() -> testing::Test* { return new VariantTest(v, p); });
      }
    }
    const std::string graph_suite = "graph/" + f->name();
    for (size_t i = 0; i < problems.size(); i += stride) {
      const hk::ProblemPtr& p = problems[i];
      testing::RegisterTest(graph_suite.c_str(), test_name(p->key()).c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [p]() -> testing::Test* { return new GraphReplayTest(p); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  register_variant_tests();
  const int rc = RUN_ALL_TESTS();
  // cuBLAS handles, the cuBLASLt workspace: freed so that `--leak-check full` reports only leaks.
  hk::release_cached_resources();
  return rc;
}
