// The decide kernel against its CPU twin on identical random inputs: canvases of 1, 7, 111, 256 and 1024 rows,
// both commit modes, a sequence of steps carrying the state (history ring, previous accept, plateau run, RNG),
// entropies with many exact ties and all-pad steps. Uniforms, canvases, statuses and the whole state must be
// bit-identical. Skipped without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "diffusion/rng.h"
#include "ops/decide/decide_cuda.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace decide_cuda_test {

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  void put(const T* h) { EXPECT_EQ(cudaMemcpy(p, h, n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

bool same_status(const DecideStatus& a, const DecideStatus& b) {
  return a.lcg == b.lcg && a.stop == b.stop && a.accepted == b.accepted && a.mean_entropy == b.mean_entropy &&
         a.step == b.step && a.pad_gated == b.pad_gated;
}
bool same_state(const DecideState& a, const DecideState& b) {
  return a.lcg == b.lcg && a.step == b.step && a.plateau_run == b.plateau_run && a.pad_gated == b.pad_gated &&
         a.history_next == b.history_next && a.has_prev == b.has_prev;
}

void kernel_matches_twin(int rows, bool categorical, int history, uint64_t seed) {
  SCOPED_TRACE("rows " + std::to_string(rows) + (categorical ? " categorical" : " argmax") + " history " +
               std::to_string(history));
  DecideParams p;
  p.rows = rows;
  p.vocab = 262144;
  p.history = history;
  p.categorical = categorical;
  p.contract = !categorical;
  p.pad_gate_id = p.contract ? 0 : -1;
  p.bound = 0.1f;
  p.confidence = 0.02;
  p.plateau_steps = 2;
  p.entropy_stop_min_steps = 3;
  const size_t n = static_cast<size_t>(rows);
  const std::vector<LcgJump> jump = Lcg::jumps(2 * rows);
  std::mt19937_64 gen(seed);
  std::vector<int32_t> canvas(n);
  for (int32_t& t : canvas) t = static_cast<int32_t>(gen() % 262144);

  DecideState hs;
  std::vector<int32_t> hh(std::max<size_t>(1, static_cast<size_t>(history) * n));
  std::vector<uint8_t> hp(n);
  const DecideBuffers hb{&hs, hh.data(), hp.data(), jump.data()};
  Dev<DecideState> ds(1);
  Dev<int32_t> dh(hh.size()), dcanvas(n), ddrawn(n);
  Dev<uint8_t> dp(n);
  Dev<LcgJump> dj(jump.size());
  Dev<RowStats> dstats(n);
  Dev<double> du(n);
  Dev<DecideStatus> dstatus(1);
  dj.put(jump.data());
  dcanvas.put(canvas.data());
  const DecideBuffers db{ds.p, dh.p, dp.p, dj.p};
  const uint64_t lcg0 = gen();
  decide_start_cpu(p, lcg0, hb);
  ASSERT_TRUE(decide_start_cuda(p, lcg0, db, nullptr).is_ok());

  std::vector<RowStats> stats(n), prev(n);
  std::vector<int32_t> drawn(n);
  const float levels[] = {0.0f, 1e-5f, 3e-3f, 0.01f, 0.25f, 1.5f, 7.0f};
  for (int step = 0; step < 10; ++step) {
    const int mode = static_cast<int>(gen() % 10);
    for (size_t r = 0; r < n; ++r) {
      stats[r].argmax = mode == 0 ? 0 : (mode < 6 && step > 0 ? prev[r].argmax : static_cast<int32_t>(gen() % 5));
      stats[r].entropy = levels[gen() % 7] * (step > 4 ? 0.001f : 1.0f);
      stats[r].p_max = 0.5f;
      drawn[r] = static_cast<int32_t>(gen() % 262144);
    }
    prev = stats;
    dstats.put(stats.data());
    ddrawn.put(drawn.data());
    if (categorical) {
      std::vector<double> u(n);
      decide_uniforms_cpu(p, hb, u.data());
      ASSERT_TRUE(decide_uniforms_cuda(p, db, du.p, nullptr).is_ok());
      EXPECT_EQ(du.get(), u) << "uniforms, step " << step;
    }
    DecideStatus hst;
    decide_cpu(p, hb, stats.data(), drawn.data(), canvas.data(), &hst);
    ASSERT_TRUE(decide_cuda(p, db, dstats.p, ddrawn.p, dcanvas.p, dstatus.p, nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(same_status(dstatus.get()[0], hst)) << "status, step " << step << ": stop " << hst.stop
                                                    << " accepted " << hst.accepted;
    EXPECT_TRUE(same_state(ds.get()[0], hs)) << "state, step " << step;
    EXPECT_EQ(dcanvas.get(), canvas) << "canvas, step " << step;
    EXPECT_EQ(dp.get(), hp) << "previous accept, step " << step;
    if (history > 0) {
      EXPECT_EQ(dh.get(), hh) << "history, step " << step;
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(CudaDecide, KernelMatchesTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  uint64_t seed = 1;
  for (const int rows : {1, 7, 111, 256, 1024})
    for (const bool categorical : {false, true})
      for (const int history : {0, 1, 2}) kernel_matches_twin(rows, categorical, history, seed++);
}

TEST(CudaDecide, RefusesOversizedCanvas) {
  DecideParams p;
  p.rows = 1025;
  p.vocab = 10;
  const DecideBuffers b{};
  EXPECT_FALSE(decide_cuda(p, b, nullptr, nullptr, nullptr, nullptr, nullptr).is_ok());
}

}  // namespace decide_cuda_test
}  // namespace dg
#endif
