// The fused norm kernels on the GPU against the CPU reference's composition with bf16 storage (the Backend
// defaults): the residual chains (residual_norms, ffn_tail: src/ops/residual/) at the 26B-A4B hidden size over one
// canvas and odd widths, and the per-head norm (one warp per head row) with and without RoPE (rmsnorm_rope) at the
// sliding and full head dims. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/dtype.h"
#include "diffusion/rng.h"
#include "support/compare.h"

namespace dg {
namespace {

std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  Lcg rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = round_bf16(static_cast<float>(lo + (hi - lo) * rng.uniform()));
  return v;
}

struct Pair {  // one input on both backends
  Tensor cpu, gpu;
};

class ResidualCase {
 public:
  ResidualCase(int64_t rows, int64_t dim) : rows_(rows), dim_(dim) {
    cpu_ = make_cpu_backend(Precision{Storage::kBF16, Storage::kF16}, kEps);
    gpu_ = make_cuda_backend(kEps, 0);
  }
  Pair input(Shape s, uint64_t seed, float lo, float hi) {
    const std::vector<float> v = uniform(static_cast<size_t>(s.numel()), seed, lo, hi);
    Pair p{cpu_->alloc(s), gpu_->alloc(s)};
    cpu_->copy_from_host(v.data(), p.cpu);
    gpu_->copy_from_host(v.data(), p.gpu);
    return p;
  }
  Pair output() { return {cpu_->alloc(Shape{rows_, dim_}), gpu_->alloc(Shape{rows_, dim_})}; }
  // Bound: a different f32 summation order of the sums of squares can flip a bf16 rounding of each stored
  // intermediate by one ulp (2^-7 relative at most), and a flip early in the chain moves the outputs by a few ulps
  // of the row's scale: max_abs <= 2^-5 max|want|.
  void expect_close(const Pair& p, const std::string& what) {
    std::vector<float> want(static_cast<size_t>(p.cpu.numel())), got(want.size());
    cpu_->copy_to_host(p.cpu, want.data());
    gpu_->copy_to_host(p.gpu, got.data());
    double peak = 0;
    for (float v : want) peak = std::max(peak, static_cast<double>(std::fabs(v)));
    const test::Diff d = test::compare(got, want, std::ldexp(peak, -5));
    std::cout << "  " << what << " " << rows_ << "x" << dim_ << ": " << d.str() << "\n";
    EXPECT_TRUE(d.finite) << what;
    EXPECT_EQ(d.first_bad, -1) << what << ": " << d.str();
    EXPECT_GE(d.cosine, 0.9999) << what << ": " << d.str();
  }
  Backend& cpu() { return *cpu_; }
  Backend& gpu() { return *gpu_; }

 private:
  static constexpr float kEps = 1e-6f;
  int64_t rows_, dim_;
  std::unique_ptr<Backend> cpu_, gpu_;
};

void run_residual_norms(int64_t rows, int64_t dim) {
  ResidualCase c(rows, dim);
  const Shape row{rows, dim}, vec{dim};
  Pair h = c.input(row, 1, -4, 4), attn = c.input(row, 2, -30, 30), w_post = c.input(vec, 3, 0.5f, 1.5f);
  Pair w_u = c.input(vec, 4, -1, 1), w_z = c.input(vec, 5, 0, 2);
  Pair h1 = c.output(), u = c.output(), z = c.output(), r = c.output();
  {
    const Tensor* w[] = {&w_u.cpu, &w_z.cpu, nullptr};
    Tensor* out[] = {&u.cpu, &z.cpu, &r.cpu};
    c.cpu().residual_norms(h.cpu, attn.cpu, w_post.cpu, h1.cpu, w, out);
  }
  {
    const Tensor* w[] = {&w_u.gpu, &w_z.gpu, nullptr};
    Tensor* out[] = {&u.gpu, &z.gpu, &r.gpu};
    c.gpu().residual_norms(h.gpu, attn.gpu, w_post.gpu, h1.gpu, w, out);
  }
  c.expect_close(h1, "residual_norms h1");
  c.expect_close(u, "residual_norms out 0");
  c.expect_close(z, "residual_norms out 1");
  c.expect_close(r, "residual_norms out 2 (no scale)");
}

void run_ffn_tail(int64_t rows, int64_t dim, float scalar) {
  ResidualCase c(rows, dim);
  const Shape row{rows, dim}, vec{dim};
  Pair h1 = c.input(row, 11, -4, 4), m1 = c.input(row, 12, -2, 2), m2 = c.input(row, 13, -50, 50);
  Pair w1 = c.input(vec, 14, 0.5f, 1.5f), w2 = c.input(vec, 15, -1, 1), w = c.input(vec, 16, 0, 2);
  Pair out = c.output();
  c.cpu().ffn_tail(h1.cpu, m1.cpu, w1.cpu, m2.cpu, w2.cpu, w.cpu, scalar, out.cpu);
  c.gpu().ffn_tail(h1.gpu, m1.gpu, w1.gpu, m2.gpu, w2.gpu, w.gpu, scalar, out.gpu);
  c.expect_close(out, "ffn_tail");
}

// Per-head rows [rows, heads, D]: rmsnorm alone (the warp kernel for D <= 1024) and rmsnorm_rope at positions
// pos0..; full layers' inv_freq is zero above the rotated pairs.
void run_head_norms(int64_t rows, int64_t heads, int64_t D, int64_t rotated, int64_t pos0) {
  ResidualCase c(rows * heads, D);
  Pair x = c.input(Shape{rows, heads, D}, 21, -3, 3), w = c.input(Shape{D}, 22, 0.5f, 1.5f);
  std::vector<float> inv_freq(static_cast<size_t>(D / 2), 0.0f);
  for (int64_t i = 0; i < rotated; ++i)
    inv_freq[static_cast<size_t>(i)] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / D));
  Pair n{c.cpu().alloc(Shape{rows, heads, D}), c.gpu().alloc(Shape{rows, heads, D})};
  Pair nr{c.cpu().alloc(Shape{rows, heads, D}), c.gpu().alloc(Shape{rows, heads, D})};
  c.cpu().rmsnorm(x.cpu, &w.cpu, n.cpu);
  c.gpu().rmsnorm(x.gpu, &w.gpu, n.gpu);
  c.expect_close(n, "rmsnorm D" + std::to_string(D));
  c.cpu().rmsnorm_rope(x.cpu, &w.cpu, nr.cpu, pos0, inv_freq);
  c.gpu().rmsnorm_rope(x.gpu, &w.gpu, nr.gpu, pos0, inv_freq);
  c.expect_close(nr, "rmsnorm_rope D" + std::to_string(D));
}

TEST(FusedNormsCuda, HeadNormsMatchTheCpuComposition) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  run_head_norms(256, 16, 256, 128, 1024);  // sliding q: every pair rotated
  run_head_norms(256, 2, 512, 64, 8191);    // full k: 64 of 256 pairs rotated
  run_head_norms(5, 3, 16, 8, 0);           // the smallest head dim
  run_head_norms(7, 1, 1024, 512, 3);       // the widest warp row
}

TEST(FusedNormsCuda, ResidualChainsMatchTheCpuComposition) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  run_residual_norms(256, 2816);  // 26B-A4B, one canvas
  run_residual_norms(3, 7);
  run_residual_norms(65, 1000);
  run_ffn_tail(256, 2816, 0.37f);
  run_ffn_tail(3, 7, 1.0f);
  run_ffn_tail(65, 1000, 2.5f);
}

}  // namespace
}  // namespace dg
#endif
