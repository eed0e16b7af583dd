// moe_route_group_cuda (src/ops/moe/moe_route.cu) against moe_route_cuda then moe_group_cuda, bit for bit (idx,
// weights, counts, offsets, perm, inv), and against the host: the scores' top-k order (ties to the lower expert), the
// renormalised weights, and the stable sort of the pairs by expert. Shapes: 1 to 1,024 rows of 128 experts, 256
// experts, top_k over 32, past the one-block limits (8,192 pairs, 256 experts); also inside a graph capture.
// Skipped with a message when no GPU is present.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/pdl.h"
#include "core/dtype.h"
#include "ops/moe/moe_cuda.h"
#include "support/seeded.h"

namespace dg {
namespace moe_route_group_test {

struct Case {
  int64_t rows, n_exp;
  int top_k;
  int64_t pairs() const { return rows * top_k; }
  std::string name() const {
    return std::to_string(rows) + " rows, " + std::to_string(n_exp) + " experts, top " + std::to_string(top_k);
  }
};

// Router scores k / 16 for integer k (exact in bf16; distinct scores stay >= 6% apart after exp, so the host's order
// of the scores is the kernel's order of the probabilities): rows of 5 values (ties at the top), rows of 129 values,
// and rows of one value (all tied: experts 0 .. top_k - 1).
std::vector<uint16_t> tied_scores(const Case& c, uint64_t seed) {
  const size_t n = static_cast<size_t>(c.rows * c.n_exp);
  const std::vector<int32_t> many = test::seeded_ids(n, seed, -64, 65), few = test::seeded_ids(n, seed + 1, -2, 3);
  std::vector<uint16_t> s(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(i) / c.n_exp;
    const int32_t k = row % 4 == 0 ? few[i] : row % 4 == 2 ? 8 : many[i];
    s[i] = f32_to_bf16(static_cast<float>(k) / 16.0f);
  }
  return s;
}

// Host bytes on the device; freed at scope exit.
struct Uploaded {
  void* p = nullptr;
  explicit Uploaded(const std::vector<uint16_t>& h) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(h.size() * 2, 16)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Uploaded() { cudaFree(p); }
  Uploaded(const Uploaded&) = delete;
  Uploaded& operator=(const Uploaded&) = delete;
};

// The six outputs in one device allocation of 32-bit words (idx, weight, counts, offsets, perm, inv), filled with
// the byte `fill` first, so that an element a call leaves unwritten shows as a difference.
struct Outputs {
  int64_t pairs, n_exp;
  int32_t* d = nullptr;
  Outputs(const Case& c, int fill) : pairs(c.pairs()), n_exp(c.n_exp) {
    EXPECT_EQ(cudaMalloc(&d, words() * 4), cudaSuccess);
    EXPECT_EQ(cudaMemset(d, fill, words() * 4), cudaSuccess);
  }
  ~Outputs() { cudaFree(d); }
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  size_t words() const { return static_cast<size_t>(4 * pairs + 2 * n_exp + 1); }
  int32_t* idx() const { return d; }
  float* weight() const { return reinterpret_cast<float*>(d + pairs); }
  int32_t* counts() const { return d + 2 * pairs; }
  int32_t* offsets() const { return counts() + n_exp; }
  int32_t* perm() const { return offsets() + n_exp + 1; }
  int32_t* inv() const { return perm() + pairs; }
  std::vector<int32_t> host() const {
    std::vector<int32_t> h(words());
    EXPECT_EQ(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  // Word w as "array[index]".
  std::string where(int64_t w) const {
    const std::pair<const char*, int64_t> parts[] = {
        {"idx", pairs}, {"weight", pairs}, {"counts", n_exp}, {"offsets", n_exp + 1}, {"perm", pairs}, {"inv", pairs}};
    for (const auto& [name, n] : parts) {
      if (w < n) return std::string(name) + "[" + std::to_string(w) + "]";
      w -= n;
    }
    return "past the end";
  }
};

Status route_then_group(const Case& c, const void* scores, const void* pes, const Outputs& o, cudaStream_t s) {
  if (Status st = moe_route_cuda(scores, c.rows, c.n_exp, c.top_k, pes, o.idx(), o.weight(), s); !st.is_ok())
    return st;
  return moe_group_cuda(o.idx(), c.pairs(), c.n_exp, o.counts(), o.offsets(), o.perm(), o.inv(), s);
}

Status route_group(const Case& c, const void* scores, const void* pes, const Outputs& o, cudaStream_t s) {
  return moe_route_group_cuda(scores, c.rows, c.n_exp, c.top_k, pes, o.idx(), o.weight(), o.counts(), o.offsets(),
                              o.perm(), o.inv(), s);
}

void expect_same_words(const Case& c, const Outputs& layout, const std::vector<int32_t>& want,
                       const std::vector<int32_t>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t w = 0; w < want.size(); ++w)
    ASSERT_EQ(want[w], got[w]) << c.name() << ": " << layout.where(static_cast<int64_t>(w))
                               << " differs (first difference)";
}

// got (Outputs::host) against the host: per row the experts by descending score, ties to the lower index; weights
// p_k / sum(p) * per_expert_scale in f64 within 1e-5 relative (a bound, not a measurement: the kernel's f32 path is
// about ten roundings of 6e-8 after an expf of 2 ulp); the pairs stably sorted by expert.
void expect_host_answer(const Case& c, const std::vector<uint16_t>& scores, const std::vector<uint16_t>& pes,
                        const Outputs& layout, const std::vector<int32_t>& got) {
  const int64_t pairs = c.pairs(), E = c.n_exp;
  for (int64_t r = 0; r < c.rows; ++r) {
    const uint16_t* s = scores.data() + r * E;
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return bf16_to_f32(s[a]) > bf16_to_f32(s[b]); });
    const double mx = bf16_to_f32(s[order[0]]);
    double sum = 0.0, top = 0.0;
    for (int64_t e = 0; e < E; ++e) sum += std::exp(bf16_to_f32(s[e]) - mx);
    for (int k = 0; k < c.top_k; ++k) top += std::exp(bf16_to_f32(s[order[static_cast<size_t>(k)]]) - mx) / sum;
    for (int k = 0; k < c.top_k; ++k) {
      const int64_t p = r * c.top_k + k;
      const int32_t e = order[static_cast<size_t>(k)];
      ASSERT_EQ(got[static_cast<size_t>(p)], e) << c.name() << ": " << layout.where(p);
      const double want = std::exp(bf16_to_f32(s[e]) - mx) / sum / top * bf16_to_f32(pes[static_cast<size_t>(e)]);
      float w = 0.0f;
      std::memcpy(&w, &got[static_cast<size_t>(pairs + p)], 4);
      ASSERT_TRUE(std::isfinite(w) && std::fabs(w - want) <= 1e-5 * std::fabs(want))
          << c.name() << ": " << layout.where(pairs + p) << " = " << w << ", want " << want;
    }
  }
  std::vector<int32_t> perm(static_cast<size_t>(pairs)), offsets(static_cast<size_t>(E + 1), 0);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) {
    return got[static_cast<size_t>(a)] < got[static_cast<size_t>(b)];
  });
  for (int64_t p = 0; p < pairs; ++p) ++offsets[static_cast<size_t>(got[static_cast<size_t>(p)] + 1)];
  for (int64_t e = 0; e < E; ++e) {
    const int32_t count = offsets[static_cast<size_t>(e + 1)];
    ASSERT_EQ(got[static_cast<size_t>(2 * pairs + e)], count) << c.name() << ": " << layout.where(2 * pairs + e);
    offsets[static_cast<size_t>(e + 1)] += offsets[static_cast<size_t>(e)];
  }
  for (int64_t e = 0; e <= E; ++e) {
    const int64_t w = 2 * pairs + E + e;
    ASSERT_EQ(got[static_cast<size_t>(w)], offsets[static_cast<size_t>(e)]) << c.name() << ": " << layout.where(w);
  }
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t w = 2 * pairs + 2 * E + 1 + i;
    ASSERT_EQ(got[static_cast<size_t>(w)], perm[static_cast<size_t>(i)]) << c.name() << ": " << layout.where(w);
    const int64_t v = w + pairs - i + perm[static_cast<size_t>(i)];  // inv[perm[i]]
    ASSERT_EQ(got[static_cast<size_t>(v)], i) << c.name() << ": " << layout.where(v);
  }
}

// One case: route then group into outputs filled with 0x00, the one call into outputs filled with 0xff (inside a
// graph capture with `graph`), then every word compared and the one call's outputs checked against the host.
void run_case(const Case& c, bool graph) {
  const uint64_t seed = 7 + static_cast<uint64_t>(c.pairs() * 3 + c.n_exp);
  const std::vector<uint16_t> scores = tied_scores(c, seed);
  const std::vector<uint16_t> pes = test::seeded_uniform_bf16(static_cast<size_t>(c.n_exp), seed + 2, 0.5f, 2.0f);
  const Uploaded dscores(scores), dpes(pes);
  const Outputs want(c, 0x00), got(c, 0xff);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Status st = route_then_group(c, dscores.p, dpes.p, want, s);
  ASSERT_TRUE(st.is_ok()) << c.name() << ": " << st.message();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  if (graph) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    st = route_group(c, dscores.p, dpes.p, got, s);
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess) << c.name();
    ASSERT_TRUE(st.is_ok()) << c.name() << ": " << st.message();
    ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess) << c.name();
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess) << c.name();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << c.name();
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    st = route_group(c, dscores.p, dpes.p, got, s);
    ASSERT_TRUE(st.is_ok()) << c.name() << ": " << st.message();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << c.name();
  }
  cudaStreamDestroy(s);
  const std::vector<int32_t> got_host = got.host();
  expect_same_words(c, got, want.host(), got_host);
  expect_host_answer(c, scores, pes, got, got_host);
}

// The one launch (up to 8,192 pairs and 256 experts: 1 and 7 rows, a canvas, four canvases, 256 experts at the
// shared memory limit, top_k above a warp, top_k = n_exp) and the fallback past each limit.
TEST(MoeRouteGroupCuda, OneLaunchEqualsRouteThenGroupBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  for (const Case& c : {Case{0, 128, 8}, Case{1, 128, 8}, Case{7, 128, 8}, Case{256, 128, 8}, Case{1024, 128, 8},
                        Case{256, 256, 8}, Case{1024, 256, 8}, Case{3, 1, 1}, Case{37, 5, 3}, Case{5, 64, 40},
                        Case{9, 8, 8}, Case{1025, 128, 8}, Case{64, 384, 8}}) {
    SCOPED_TRACE(c.name());
    run_case(c, false);
    if (HasFatalFailure()) return;
  }
}

// Captured into a graph and replayed, with programmatic dependent launch on where the device has it (the engine's
// step graphs): both sides of the 48 KiB dynamic shared memory opt-in, and the fallback.
TEST(MoeRouteGroupCuda, OneLaunchInsideAGraphCapture) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  struct PlainAfter {  // the switch is process-wide: later tests launch plainly again
    ~PlainAfter() { cuda::set_pdl(false); }
  } plain_after;
  cuda::set_pdl(cuda::pdl_supported());
  for (const Case& c : {Case{256, 128, 8}, Case{1024, 256, 8}, Case{1025, 128, 8}}) {
    SCOPED_TRACE(c.name());
    run_case(c, true);
    if (HasFatalFailure()) return;
  }
}

}  // namespace moe_route_group_test
}  // namespace dg
#endif
