// The streaming MoE grouped GEMMs (src/ops/moe/moe_stream.cu) against f64 loops over the same inputs (bf16
// weights, or packed q4 / fp8 / nvfp4 / q8 weights as decode_rows decodes them), and the stream pipeline (group,
// gate_up + gated GELU, down, combine) against moe_experts_cpu on the same (packed) weights. Skipped with a message
// when no GPU is present. Shapes: odd (K 72 / 96, N 40, 5 experts; counts 0, 1, 64, 65, 150 around the 64-row
// pass), the tiny models', all 2048 rows on one expert, and the full 26B-A4B expert shapes with 2048 routed rows.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/parallel.h"
#include "diffusion/rng.h"
#include "ops/glu/glu_cuda.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/q4_layout.h"
#include "quant/codec.h"
#include "quant/packed_tensor.h"
#include "support/compare.h"
#include "support/device_buf.h"
#include "support/seeded.h"

namespace dg {
namespace moe_stream_test {

std::vector<uint16_t> rand_bf16(size_t n, uint64_t seed, float scale) {
  return test::seeded_uniform_bf16(n, seed, -scale, scale);
}

std::vector<float> to_f32(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_f32(v[i]);
  return f;
}

using test::DeviceBuf;

// Pair ids p = row * top_k + rank grouped stably by expert, as moe_group_cuda lays them out.
struct Routing {
  std::vector<int32_t> idx;      // [rows * top_k] expert of each pair
  std::vector<int32_t> offsets;  // [n_exp + 1]
  std::vector<int32_t> perm;     // sorted position -> pair id
  std::vector<int32_t> expert;   // sorted position -> expert
};

Routing group(std::vector<int32_t> idx, int64_t n_exp) {
  Routing r;
  r.idx = std::move(idx);
  r.offsets.assign(static_cast<size_t>(n_exp + 1), 0);
  for (int32_t e : r.idx) ++r.offsets[static_cast<size_t>(e + 1)];
  std::partial_sum(r.offsets.begin(), r.offsets.end(), r.offsets.begin());
  std::vector<int32_t> fill(r.offsets.begin(), r.offsets.end() - 1);
  r.perm.resize(r.idx.size());
  r.expert.resize(r.idx.size());
  for (size_t p = 0; p < r.idx.size(); ++p) {
    const int32_t pos = fill[static_cast<size_t>(r.idx[p])]++;
    r.perm[static_cast<size_t>(pos)] = static_cast<int32_t>(p);
    r.expert[static_cast<size_t>(pos)] = r.idx[p];
  }
  return r;
}

// Each of `rows` rows picks top_k distinct experts uniformly at random.
Routing route_random(int64_t rows, int top_k, int64_t n_exp, uint64_t seed) {
  if (top_k > n_exp)  // distinct experts per row: no such routing (the draw below would never end)
    throw std::invalid_argument("route_random: top " + std::to_string(top_k) + " of " + std::to_string(n_exp));
  Lcg rng(seed);
  std::vector<int32_t> idx;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> picked;
    while (static_cast<int>(picked.size()) < top_k) {
      const int32_t e = rng.randint(n_exp);
      if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
    }
    idx.insert(idx.end(), picked.begin(), picked.end());
  }
  return group(std::move(idx), n_exp);
}

// counts[e] pairs on expert e, pair ids shuffled over rows * top_k = sum(counts).
Routing route_counts(const std::vector<int>& counts, uint64_t seed) {
  std::vector<int32_t> idx;
  for (size_t e = 0; e < counts.size(); ++e)
    idx.insert(idx.end(), static_cast<size_t>(counts[e]), static_cast<int32_t>(e));
  Lcg rng(seed);
  for (size_t i = idx.size(); i > 1; --i)
    std::swap(idx[i - 1], idx[static_cast<size_t>(rng.randint(static_cast<int64_t>(i)))]);
  return group(std::move(idx), static_cast<int64_t>(counts.size()));
}

struct GemmCase {
  const char* name;
  int64_t K, N, n_exp;
  std::vector<int> counts;  // pairs per expert (rows * top_k in total); empty: random routing of `rows` rows
  int64_t rows;
  int top_k;
  bool gather;  // x has `rows` rows, read through perm / top_k; else x has one row per sorted position
  DType fmt = DType::kBF16;
  bool act8 = false;  // fp8 activations (W8A8): x quantised per row to E4M3 on the host, codes + scales uploaded
  int stages = 0;  // pipeline stages where the format offers a choice (W8A8, q4 kernel layout); 0: its default
  float w_amp = 0.1f;  // weights uniform in [-w_amp, w_amp]
  bool wide = false;  // passes of 128 rows (bf16 only; --moe wide)
};

// Per-row FP8 codes and scales of x (encode_rows, as moe_act_quant_fp8_cuda computes them) and their values.
struct Act8 {
  std::vector<uint8_t> codes;
  std::vector<float> scales, values;
};
Act8 act8_rows(const std::vector<uint16_t>& x, int64_t rows, int64_t K) {
  Act8 a;
  a.codes.resize(static_cast<size_t>(rows * K));
  a.scales.resize(static_cast<size_t>(rows));
  a.values = to_f32(x);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* const planes[kMaxPlanes] = {a.codes.data() + r * K, reinterpret_cast<uint8_t*>(&a.scales[static_cast<size_t>(r)])};
    encode_rows(DType::kFp8, a.values.data() + r * K, 1, K, 0.0f, planes);
  }
  act_quant_fp8_rows(a.values.data(), rows, K);
  return a;
}

// Weights of shape s in `fmt` for the device (bf16 bits or the packed planes) and their values as the CPU reads
// them (decode_rows for packed formats).
struct TestWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  Tensor host;  // the host tensor the CPU references read
};

TestWeights make_weights(DType fmt, Shape s, uint64_t seed, float scale) {
  TestWeights w;
  const auto bits = rand_bf16(static_cast<size_t>(s.numel()), seed, scale);
  if (fmt == DType::kBF16) {
    w.bytes.resize(bits.size() * 2);
    std::memcpy(w.bytes.data(), bits.data(), w.bytes.size());
    w.values = to_f32(bits);
    w.host = host_tensor(DType::kBF16, s);
    std::memcpy(w.host.data, bits.data(), w.bytes.size());
    return w;
  }
  Tensor f = host_tensor(DType::kF32, s);
  const std::vector<float> v = to_f32(bits);
  std::copy(v.begin(), v.end(), f.f32());
  w.host = pack_tensor(f, fmt);
  const auto* p = static_cast<const uint8_t*>(w.host.data);
  w.bytes.assign(p, p + w.host.nbytes());
  const Tensor d = unpack_tensor(w.host);
  w.values.assign(d.f32(), d.f32() + d.numel());
  return w;
}

// The layouts a format's device weights are tested in: q4 in both (disk, and the kernel layout made on the device).
std::vector<Q4Layout> layouts(DType fmt) {
  if (fmt == DType::kQ4) return {Q4Layout::kDisk, Q4Layout::kKernel};
  return {Q4Layout::kDisk};
}

// W's bytes on the device in `layout`: q4's kernel layout converted there by q4_to_kernel_layout_cuda, and checked
// byte for byte against the host twin.
struct DeviceWeights {
  void* p = nullptr;
  DeviceWeights(const TestWeights& w, Q4Layout layout) {
    std::vector<uint8_t> bytes = w.bytes;
    const bool kernel = layout == Q4Layout::kKernel;
    if (kernel) bytes.resize(static_cast<size_t>(q4_kernel_layout_bytes(w.host.shape)), 0);
    EXPECT_EQ(cudaMalloc(&p, bytes.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    if (!kernel) return;
    const Status s = q4_to_kernel_layout_cuda(p, w.host.shape, nullptr);
    EXPECT_TRUE(s.is_ok()) << s.message();
    q4_to_kernel_layout(bytes.data(), w.host.shape);
    std::vector<uint8_t> got(bytes.size());
    EXPECT_EQ(cudaMemcpy(got.data(), p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(got == bytes) << "q4_to_kernel_layout_cuda differs from its host twin";
  }
  ~DeviceWeights() { cudaFree(p); }
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;
};

const char* layout_name(Q4Layout l) { return l == Q4Layout::kKernel ? "/kernel layout" : ""; }

// The relative error of a weight as the kernel feeds it to the tensor cores: q4's decoded f32 value is rounded once
// to bf16 (2^-9); fp8, nvfp4 and q8 codes are exact in bf16 (their scales multiply the f32 sums).
double weight_rel_error(DType fmt) { return fmt == DType::kQ4 ? std::ldexp(1.0, -9) : 0.0; }

// Per-element bounds, with S = sum_k |x_k w_k| (f64) of the output:
// - plain: |got - want| <= 2^-8 |want| + 2^-14 S. bf16 rounding of the f32 result is <= 2^-9 relative; the f32
//   (tensor-core) accumulation of up to 2816 products stays within 2^-14 S (a third of the K 2^-24 S worst case,
//   ~20x the random-walk estimate).
// - gated: g, u move by dg = 2^-14 S_g + 2^-7 |g| (accumulation, then at most one bf16 ulp where the rounding
//   flips), the same for u; |gelu'| <= 1.13; each of gelu(g) and the product adds one bf16 ulp (2^-7 relative).
// - packed weights add w_rel S to each product (weight_rel_error).
double gated_bound(double g, double sg, double u, double su, double w_rel) {
  const double dg = std::ldexp(sg, -14) + w_rel * sg + std::ldexp(std::fabs(g), -7);
  const double du = std::ldexp(su, -14) + w_rel * su + std::ldexp(std::fabs(u), -7);
  const double ge = std::fabs(static_cast<double>(gelu_tanh(round_bf16(static_cast<float>(g)))));
  return (1.13 * dg + std::ldexp(ge, -7)) * (std::fabs(u) + du) + (ge + 1.13 * dg) * du +
         std::ldexp(ge * std::fabs(u), -6) + 1e-30;
}

struct Bounded {
  int64_t bad = 0, first = -1;
  double got = 0, want = 0, bound = 0;
  void add(int64_t i, double g, double w, double b) {
    if (std::fabs(g - w) <= b) return;  // NaN fails here too
    if (bad++ > 0) return;
    first = i;
    got = g;
    want = w;
    bound = b;
  }
  std::string str() const {
    return bad == 0 ? "all within bounds"
                    : std::to_string(bad) + " outside bounds, first at " + std::to_string(first) + ": got " +
                          std::to_string(got) + " want " + std::to_string(want) + " bound " + std::to_string(bound);
  }
};

void run_gemm_case_in(const GemmCase& c, Q4Layout layout) {
  const Routing rt = c.counts.empty() ? route_random(c.rows, c.top_k, c.n_exp, 11) : route_counts(c.counts, 12);
  const int64_t pairs = static_cast<int64_t>(rt.perm.size()), K = c.K, N = c.N, ff = N / 2;
  const int64_t x_rows = c.gather ? (pairs + c.top_k - 1) / c.top_k : pairs;
  const auto x = rand_bf16(static_cast<size_t>(x_rows * K), 21, 2.0f);
  const Act8 x8 = c.act8 ? act8_rows(x, x_rows, K) : Act8{};
  const TestWeights W = make_weights(c.fmt, Shape{c.n_exp, N, K}, 22, c.w_amp);
  const double w_rel = weight_rel_error(c.fmt);

  // f64 reference over the same bf16 values: want[i, n] and S[i, n] for sorted position i. kernel_w: the same over
  // the weights as the kernel multiplies them (q4's bf16-rounded values), for the cosine: on a row of two outputs,
  // one near zero, q4's documented weight rounding alone moves the cosine by 2e-5.
  const bool round_w = c.fmt == DType::kQ4;
  std::vector<double> want(static_cast<size_t>(pairs * N)), asum(want.size()), kernel_w(want.size());
  parallel_for(pairs, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> xr(static_cast<size_t>(K));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t src = c.gather ? rt.perm[static_cast<size_t>(i)] / c.top_k : i;
      for (int64_t k = 0; k < K; ++k)
        xr[static_cast<size_t>(k)] = c.act8 ? x8.values[static_cast<size_t>(src * K + k)]
                                            : bf16_to_f32(x[static_cast<size_t>(src * K + k)]);
      const float* we = W.values.data() + rt.expert[static_cast<size_t>(i)] * N * K;
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, a = 0, sk = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double xk = xr[static_cast<size_t>(k)], w = we[n * K + k];
          s += xk * w;
          a += std::fabs(xk * w);
          sk += xk * (round_w ? round_bf16(static_cast<float>(w)) : w);
        }
        want[static_cast<size_t>(i * N + n)] = s;
        asum[static_cast<size_t>(i * N + n)] = a;
        kernel_w[static_cast<size_t>(i * N + n)] = sk;
      }
    }
  });

  const DeviceBuf dx(x), doff(rt.offsets), dperm(rt.perm), dx8(x8.codes), dsc(x8.scales);
  const DeviceWeights dw(W, layout);
  const void* xin = c.act8 ? dx8.p : dx.p;
  const float* xsc = c.act8 ? dsc.as<float>() : nullptr;
  const DeviceBuf dy(static_cast<size_t>(pairs * N) * 2), da(static_cast<size_t>(pairs * ff) * 2);
  ASSERT_EQ(cudaMemset(dy.p, 0xff, static_cast<size_t>(pairs * N) * 2), cudaSuccess);  // NaN where never written
  ASSERT_EQ(cudaMemset(da.p, 0xff, static_cast<size_t>(pairs * ff) * 2), cudaSuccess);
  const int32_t* map = c.gather ? dperm.as<int32_t>() : nullptr;
  Status s = moe_stream_gemm_cuda(xin, map, c.top_k, K, dw.p, c.fmt, N, c.n_exp, doff.as<int32_t>(), dy.p, nullptr,
                                  xsc, c.stages, layout, c.wide);
  ASSERT_TRUE(s.is_ok()) << s.message();
  s = moe_stream_gate_up_cuda(xin, map, c.top_k, K, dw.p, c.fmt, ff, c.n_exp, doff.as<int32_t>(), da.p, nullptr, xsc,
                              c.stages, layout, c.wide);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const std::vector<float> y = to_f32(dy.get<uint16_t>(static_cast<size_t>(pairs * N)));
  Bounded plain;
  for (size_t i = 0; i < y.size(); ++i)
    plain.add(static_cast<int64_t>(i), y[i], want[i],
              std::ldexp(std::fabs(want[i]), -8) + std::ldexp(asum[i], -14) + w_rel * asum[i]);
  const std::vector<float> act = to_f32(da.get<uint16_t>(static_cast<size_t>(pairs * ff)));
  std::vector<float> act_want(act.size());
  Bounded gated;
  for (int64_t i = 0; i < pairs; ++i)
    for (int64_t j = 0; j < ff; ++j) {
      const size_t gi = static_cast<size_t>(i * N + j), ui = static_cast<size_t>(i * N + ff + j);
      const float gv = round_bf16(static_cast<float>(want[gi])), uv = round_bf16(static_cast<float>(want[ui]));
      const size_t o = static_cast<size_t>(i * ff + j);
      act_want[o] = round_bf16(round_bf16(gelu_tanh(gv)) * uv);
      gated.add(static_cast<int64_t>(o), act[o], act_want[o], gated_bound(want[gi], asum[gi], want[ui], asum[ui], w_rel));
    }

  const test::Diff dp = test::compare(y, std::vector<float>(kernel_w.begin(), kernel_w.end()));
  const test::Diff dg = test::compare(act, act_want);
  std::cout << "  " << c.name << " " << dtype_name(c.fmt) << (c.act8 ? "/a8" : "") << (c.wide ? "/wide" : "") << layout_name(layout) << " (" << pairs << " rows): plain " << dp.str() << "; " << plain.str() << "\n"
            << "    gated " << dg.str() << "; " << gated.str() << "\n";
  EXPECT_TRUE(dp.finite && dg.finite) << c.name;
  EXPECT_EQ(plain.bad, 0) << c.name << " plain: " << plain.str();
  EXPECT_EQ(gated.bad, 0) << c.name << " gated: " << gated.str();
  EXPECT_GE(dp.cosine, 0.99999) << c.name;
  EXPECT_GE(dg.cosine, 0.9999) << c.name;
}

void run_gemm_case(const GemmCase& c) {
  for (Q4Layout l : layouts(c.fmt)) run_gemm_case_in(c, l);
}

bool have_gpu() { return cuda_device_count() > 0; }
#define DG_NEED_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine"

TEST(MoeStreamCuda, OddShapesAndPassBoundaries) {
  DG_NEED_GPU();
  // 150 rows take three passes (64, 64, 22); 64 and 65 sit on the pass boundary; K 72 ends mid-stage; N 40 and
  // ff 20 are partial tiles with unaligned (scalar) stores.
  run_gemm_case({"K72 N40 gather", 72, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true});
  run_gemm_case({"K72 N40", 72, 40, 5, {64, 65, 0, 0, 16}, 0, 1, false});
  run_gemm_case({"K8 N2 one row", 8, 2, 3, {0, 1, 0}, 0, 1, false});
}

TEST(MoeStreamCuda, TinyModelShapes) {
  DG_NEED_GPU();
  run_gemm_case({"tiny_a gate_up", 64, 64, 8, {}, 64, 2, true});
  run_gemm_case({"tiny_a down", 32, 64, 8, {}, 64, 2, false});
  run_gemm_case({"dg-tiny gate_up", 128, 128, 8, {}, 64, 2, true});
  run_gemm_case({"dg-tiny down", 64, 128, 8, {}, 64, 2, false});
}

TEST(MoeStreamCuda, AllRowsOnOneExpert) {
  DG_NEED_GPU();
  run_gemm_case({"2048 rows on expert 2", 256, 192, 4, {0, 0, 2048, 0}, 0, 8, true});
}

// Passes of 128 rows (--moe wide): 300 rows take 128, 128, 44 (n48); 129 takes 128 and 1; 65 runs as n128 with
// 63 zero-filled rows; 64 and fewer as the n16-n64 shapes; partial column tiles with scalar stores.
TEST(MoeStreamCuda, WidePassBoundaries) {
  DG_NEED_GPU();
  GemmCase c{"K72 N40 gather wide", 72, 40, 9, {300, 0, 129, 128, 65, 64, 7, 1, 33}, 0, 3, true};
  c.wide = true;
  run_gemm_case(c);
  c = GemmCase{"26B-A4B gate_up wide", 2816, 1408, 4, {300, 129, 64, 0}, 0, 1, false};
  c.wide = true;
  run_gemm_case(c);
  c = GemmCase{"26B-A4B down wide", 704, 2816, 4, {300, 129, 64, 0}, 0, 1, false};
  c.wide = true;
  run_gemm_case(c);
}

// Passes of 128 rows have bf16 and W8A8 bodies: other weights (fp8 with bf16 activations, q4), or fp8 activations
// with bf16 weights, are refused before any launch (no GPU needed) with a message that names the way out.
TEST(MoeStreamCuda, WidePassesRefuseOtherFormats) {
  alignas(16) static uint8_t fake[64];
  for (DType fmt : {DType::kQ4, DType::kFp8}) {
    const Status s = moe_stream_gemm_cuda(fake, nullptr, 1, 64, fake, fmt, 16, 1, nullptr, fake, nullptr, nullptr, 0,
                                          Q4Layout::kDisk, true);
    ASSERT_FALSE(s.is_ok()) << dtype_name(fmt);
    EXPECT_NE(s.message().find("--moe stream"), std::string::npos) << s.message();
  }
  const float scale = 1.0f;
  const Status s = moe_stream_gate_up_cuda(fake, nullptr, 1, 64, fake, DType::kBF16, 8, 1, nullptr, fake, nullptr,
                                           &scale, 0, Q4Layout::kDisk, true);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not BF16 with fp8 activations"), std::string::npos) << s.message();
}

TEST(MoeStreamCuda, FullShapeRandomRouting) {
  DG_NEED_GPU();
  run_gemm_case({"26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true});
  run_gemm_case({"26B-A4B down", 704, 2816, 128, {}, 256, 8, false});
}

// The pipeline as CudaBackend::moe runs it with --moe stream, against the composed CPU reference with bf16
// storage. Bound (a priori): an f32 summation-order difference can flip a bf16 rounding of g, u, the activation or
// an expert output by one ulp, which moves an output by a few bf16 ulps of its size: max_abs <= 2^-6 max|want|.
void run_pipeline_in(int64_t rows, int64_t hidden, int64_t ff, int64_t n_exp, int top_k, DType fmt, bool act8,
                     Q4Layout layout) {
  const int64_t pairs = rows * top_k;
  const Routing rt = route_random(rows, top_k, n_exp, 31);
  const auto z = rand_bf16(static_cast<size_t>(rows * hidden), 32, 2.0f);
  const TestWeights gu = make_weights(fmt, Shape{n_exp, 2 * ff, hidden}, 33, 0.1f);
  const TestWeights dn = make_weights(fmt, Shape{n_exp, hidden, ff}, 34, 0.1f);
  Lcg rng(35);
  std::vector<float> wts(static_cast<size_t>(pairs));
  for (float& w : wts) w = static_cast<float>(0.1 + rng.uniform());

  std::vector<float> want(static_cast<size_t>(rows * hidden));
  const std::vector<float> zf = to_f32(z);
  moe_experts_cpu(zf.data(), rows, rt.idx.data(), wts.data(), top_k, gu.host, dn.host, Storage::kBF16, want.data(),
                  act8);

  const DeviceBuf dz(z), didx(rt.idx), dwts(wts);
  const DeviceWeights dgu(gu, layout), ddn(dn, layout);
  const DeviceBuf counts(static_cast<size_t>(n_exp) * 4), offsets(static_cast<size_t>(n_exp + 1) * 4);
  const DeviceBuf perm(static_cast<size_t>(pairs) * 4), inv(static_cast<size_t>(pairs) * 4);
  const DeviceBuf act(static_cast<size_t>(pairs * ff) * 2), y(static_cast<size_t>(pairs * hidden) * 2);
  const DeviceBuf out(static_cast<size_t>(rows * hidden) * 2);
  Status s = moe_group_cuda(didx.as<int32_t>(), pairs, n_exp, counts.as<int32_t>(), offsets.as<int32_t>(),
                            perm.as<int32_t>(), inv.as<int32_t>(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  if (act8) {  // as CudaBackend::moe: z and the gated activation quantised per row on the device
    const DeviceBuf zq(static_cast<size_t>(rows * hidden)), zs(static_cast<size_t>(rows) * 4);
    const DeviceBuf aq(static_cast<size_t>(pairs * ff)), as(static_cast<size_t>(pairs) * 4);
    s = moe_act_quant_fp8_cuda(dz.p, rows, hidden, zq.p, zs.as<float>(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    s = moe_stream_gate_up_cuda(zq.p, perm.as<int32_t>(), top_k, hidden, dgu.p, fmt, ff, n_exp,
                                offsets.as<int32_t>(), act.p, nullptr, zs.as<float>());
    ASSERT_TRUE(s.is_ok()) << s.message();
    s = moe_act_quant_fp8_cuda(act.p, pairs, ff, aq.p, as.as<float>(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    s = moe_stream_gemm_cuda(aq.p, nullptr, 1, ff, ddn.p, fmt, hidden, n_exp, offsets.as<int32_t>(), y.p, nullptr,
                             as.as<float>());
    ASSERT_TRUE(s.is_ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  } else {
    s = moe_stream_gate_up_cuda(dz.p, perm.as<int32_t>(), top_k, hidden, dgu.p, fmt, ff, n_exp,
                                offsets.as<int32_t>(), act.p, nullptr, nullptr, 3, layout);
    ASSERT_TRUE(s.is_ok()) << s.message();
    s = moe_stream_gemm_cuda(act.p, nullptr, 1, ff, ddn.p, fmt, hidden, n_exp, offsets.as<int32_t>(), y.p, nullptr,
                             nullptr, 3, layout);
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  s = moe_combine_cuda(y.p, inv.as<int32_t>(), dwts.as<float>(), rows, top_k, hidden, out.p, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = to_f32(out.get<uint16_t>(static_cast<size_t>(rows * hidden)));
  double peak = 0;
  for (float v : want) peak = std::max(peak, static_cast<double>(std::fabs(v)));
  // q4 feeds bf16-rounded weights (2^-9 relative each, weight_rel_error): one more power of two on the bound,
  // provisional until measured on the GPU machine (docs/NUMERICS.md).
  // fp8 activations: a bf16 ulp of difference in an expert input can move its E4M3 code by a step (2^-3 relative)
  // where it sits on a rounding boundary, as q4's bound allows for.
  const bool q4 = fmt == DType::kQ4 || act8;
  const test::Diff d = test::compare(got, want, std::ldexp(peak, q4 ? -5 : -6));
  std::cout << "  pipeline " << dtype_name(fmt) << (act8 ? "/a8" : "") << layout_name(layout) << " " << rows << "x" << hidden << " ff " << ff << " experts " << n_exp << " top " << top_k
            << ": " << d.str() << "\n";
  EXPECT_TRUE(d.finite);
  EXPECT_EQ(d.first_bad, -1) << d.str();
  EXPECT_GE(d.cosine, q4 ? 0.9995 : 0.9999) << d.str();
}

void run_pipeline(int64_t rows, int64_t hidden, int64_t ff, int64_t n_exp, int top_k, DType fmt = DType::kBF16,
                  bool act8 = false) {
  for (Q4Layout l : layouts(fmt)) run_pipeline_in(rows, hidden, ff, n_exp, top_k, fmt, act8, l);
}

// moe_group_cuda against the host's stable counting sort, element for element: the one-block kernel (up to 256
// experts; pair counts from none to a 32-canvas batch, and all pairs on one expert) and the per-expert kernels.
TEST(MoeGroupCuda, MatchesTheStableHostSort) {
  DG_NEED_GPU();
  struct Case {
    int64_t rows;
    int top_k;
    int64_t n_exp;
  };
  // One block up to 8,192 pairs; past it blocks of 2,048 (the last one partial: 8,200 and 21,007 pairs; 10,000 all
  // on one expert).
  for (const Case& c : {Case{0, 8, 128}, Case{1, 1, 1}, Case{37, 3, 5}, Case{256, 8, 128}, Case{1024, 8, 128},
                        Case{1025, 8, 128}, Case{3001, 7, 100}, Case{4096, 8, 128}, Case{8192, 8, 128},
                        Case{100, 4, 256}, Case{300, 6, 300}, Case{1000, 1, 1}, Case{10000, 1, 1}}) {
    const int64_t pairs = c.rows * c.top_k;
    const Routing want = route_random(c.rows, c.top_k, c.n_exp, 41 + static_cast<uint64_t>(pairs));
    const DeviceBuf didx(want.idx), counts(static_cast<size_t>(c.n_exp) * 4);
    const DeviceBuf offsets(static_cast<size_t>(c.n_exp + 1) * 4), perm(static_cast<size_t>(pairs) * 4);
    const DeviceBuf inv(static_cast<size_t>(pairs) * 4);
    for (bool blocks : {false, true}) {
      const size_t pair_bytes = static_cast<size_t>(pairs) * 4;  // -1 where a run writes nothing
      ASSERT_EQ(cudaMemset(offsets.p, 0xff, static_cast<size_t>(c.n_exp + 1) * 4), cudaSuccess);
      ASSERT_EQ(cudaMemset(perm.p, 0xff, pair_bytes), cudaSuccess);
      ASSERT_EQ(cudaMemset(inv.p, 0xff, pair_bytes), cudaSuccess);
      const Status s = moe_group_cuda(didx.as<int32_t>(), pairs, c.n_exp, counts.as<int32_t>(), offsets.as<int32_t>(),
                                      perm.as<int32_t>(), inv.as<int32_t>(), nullptr, blocks);
      ASSERT_TRUE(s.is_ok()) << s.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::string name = std::to_string(c.rows) + " rows, top " + std::to_string(c.top_k) + ", " +
                               std::to_string(c.n_exp) + " experts" + (blocks ? ", blocks" : "");
      EXPECT_EQ(offsets.get<int32_t>(static_cast<size_t>(c.n_exp + 1)), want.offsets) << name;
      EXPECT_EQ(perm.get<int32_t>(static_cast<size_t>(pairs)), want.perm) << name;
      const auto got_inv = inv.get<int32_t>(static_cast<size_t>(pairs));
      for (int64_t i = 0; i < pairs; ++i)
        ASSERT_EQ(got_inv[static_cast<size_t>(want.perm[static_cast<size_t>(i)])], i) << name << " position " << i;
    }
  }
}

TEST(MoeStreamCuda, PipelineMatchesMoeExpertsCpu) {
  DG_NEED_GPU();
  run_pipeline(64, 128, 64, 8, 2);       // dg-tiny
  run_pipeline(37, 72, 24, 5, 3);        // odd row and expert counts, K multiples of 8
  run_pipeline(256, 2816, 704, 128, 8);  // 26B-A4B, one canvas
}

const DType kPacked[] = {DType::kQ4, DType::kFp8, DType::kNvFp4, DType::kQ8};

TEST(MoeStreamQuantCuda, OddShapesAndPassBoundaries) {
  DG_NEED_GPU();
  for (DType fmt : kPacked) {
    run_gemm_case({"K96 N40 gather", 96, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true, fmt});
    run_gemm_case({"K32 N40", 32, 40, 5, {64, 65, 0, 0, 16}, 0, 1, false, fmt});
    run_gemm_case({"K160 N2 one row", 160, 2, 3, {0, 1, 0}, 0, 1, false, fmt});
  }
}

// q4 at weight amplitudes whose kernel layout needs a matrix power p > 0 (scales near 0.3, 5 and 4000: the
// pre-scaled scale would overflow bf16 otherwise), K of 1, 4 and 5.5 stages, one-row experts, N off the tile.
TEST(MoeStreamQuantCuda, Q4LargeScales) {
  DG_NEED_GPU();
  for (float amp : {2.0f, 40.0f, 3e4f}) {
    GemmCase c{"K32 N40 large", 32, 40, 5, {64, 65, 0, 1, 16}, 0, 1, false, DType::kQ4};
    c.w_amp = amp;
    run_gemm_case(c);
    c = GemmCase{"K704 N200 gather large", 704, 200, 3, {1, 37, 150}, 0, 2, true, DType::kQ4};
    c.w_amp = amp;
    run_gemm_case(c);
  }
  GemmCase c{"K512 N130 one row", 512, 130, 2, {1, 0}, 0, 1, false, DType::kQ4};
  run_gemm_case(c);
}

// The q4 kernel layout's deeper pipelines (--moe-q4-stages 3, 4): K ending mid-stage, pass boundaries, full shape.
TEST(MoeStreamQuantCuda, Q4DeeperPipelines) {
  DG_NEED_GPU();
  for (int stages : {3, 4}) {
    const std::string tag = std::to_string(stages) + " stages, ";
    run_gemm_case({(tag + "K96 N40 gather").c_str(), 96, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true, DType::kQ4, false,
                   stages});
    run_gemm_case({(tag + "26B-A4B gate_up").c_str(), 2816, 1408, 128, {}, 256, 8, true, DType::kQ4, false, stages});
    run_gemm_case({(tag + "26B-A4B down").c_str(), 704, 2816, 128, {}, 256, 8, false, DType::kQ4, false, stages});
  }
}

TEST(MoeStreamQuantCuda, TinyModelShapes) {
  DG_NEED_GPU();
  for (DType fmt : kPacked) {
    run_gemm_case({"tiny_a gate_up", 64, 64, 8, {}, 64, 2, true, fmt});
    run_gemm_case({"tiny_a down", 32, 64, 8, {}, 64, 2, false, fmt});
    run_gemm_case({"dg-tiny down", 128, 256, 8, {}, 64, 2, false, fmt});
  }
}

TEST(MoeStreamQuantCuda, FullShapeRandomRouting) {
  DG_NEED_GPU();
  for (DType fmt : {DType::kQ4, DType::kFp8, DType::kNvFp4}) {
    run_gemm_case({"26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true, fmt});
    run_gemm_case({"26B-A4B down", 704, 2816, 128, {}, 256, 8, false, fmt});
  }
}

TEST(MoeStreamQuantCuda, PipelineMatchesMoeExpertsCpu) {
  DG_NEED_GPU();
  for (DType fmt : {DType::kQ4, DType::kFp8, DType::kNvFp4}) {
    run_pipeline(64, 64, 32, 8, 2, fmt);        // tiny_a
    run_pipeline(37, 96, 64, 5, 3, fmt);        // odd row and expert counts
    run_pipeline(256, 2816, 704, 128, 8, fmt);  // 26B-A4B, one canvas
  }
}

// fp8 weights times fp8 activations (W8A8, sm_89+): the GEMMs against f64 over the decoded codes of both operands
// (the plain and gated bounds above hold: e4m3 products are exact in f32), the pipeline against moe_experts_cpu
// with act_fp8, and the per-row quantisation kernel against encode_rows byte for byte.
TEST(MoeStreamFp8ActCuda, Gemms) {
  DG_NEED_GPU();
  run_gemm_case({"K96 N40 gather", 96, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true, DType::kFp8, true});
  run_gemm_case({"K32 N40", 32, 40, 5, {64, 65, 0, 0, 16}, 0, 1, false, DType::kFp8, true});
  run_gemm_case({"dg-tiny down", 128, 256, 8, {}, 64, 2, false, DType::kFp8, true});
  run_gemm_case({"26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true, DType::kFp8, true});
  run_gemm_case({"26B-A4B down", 704, 2816, 128, {}, 256, 8, false, DType::kFp8, true});
  run_gemm_case({"4 stages, K96 N40 gather", 96, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true, DType::kFp8, true, 4});
  run_gemm_case({"4 stages, 26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true, DType::kFp8, true, 4});
}

// W8A8 in passes of 128 rows (--moe wide): the pass boundaries and the full shape's products, as for bf16.
TEST(MoeStreamFp8ActCuda, WidePasses) {
  DG_NEED_GPU();
  GemmCase c{"K96 N40 gather wide", 96, 40, 9, {300, 0, 129, 128, 65, 64, 7, 1, 33}, 0, 3, true, DType::kFp8, true};
  c.wide = true;
  run_gemm_case(c);
  c = GemmCase{"26B-A4B gate_up wide", 2816, 1408, 4, {300, 129, 64, 0}, 0, 1, false, DType::kFp8, true};
  c.wide = true;
  run_gemm_case(c);
  c = GemmCase{"26B-A4B down wide", 704, 2816, 4, {300, 129, 64, 0}, 0, 1, false, DType::kFp8, true};
  c.wide = true;
  run_gemm_case(c);
}

TEST(MoeStreamFp8ActCuda, PipelineMatchesMoeExpertsCpu) {
  DG_NEED_GPU();
  run_pipeline(64, 64, 32, 8, 2, DType::kFp8, true);
  run_pipeline(37, 96, 64, 5, 3, DType::kFp8, true);
  run_pipeline(256, 2816, 704, 128, 8, DType::kFp8, true);
}

TEST(MoeStreamFp8ActCuda, QuantisationMatchesEncodeRows) {
  DG_NEED_GPU();
  // Rows held in registers by 32, 64, 128 and 256 threads (K / 8 up to 128, 256, 512, 1,024 chunks), the warp-per-row
  // kernel past that and for K not a multiple of 8.
  for (auto [rows, K] : {std::pair<int64_t, int64_t>{3, 7}, {256, 2816}, {2048, 704}, {5, 1000}, {7, 1032},
                         {9, 4096}, {4, 8192}, {3, 8200}}) {
    auto x = rand_bf16(static_cast<size_t>(rows * K), 51 + static_cast<uint64_t>(K), 3.0f);
    std::fill_n(x.begin(), K, uint16_t{0});  // an all-zero row: scale 0, codes 0
    x[static_cast<size_t>(K)] = f32_to_bf16(1e6f);  // a large outlier in row 1
    const Act8 want = act8_rows(x, rows, K);
    const DeviceBuf dx(x), dq(static_cast<size_t>(rows * K)), ds(static_cast<size_t>(rows) * 4);
    const Status s = moe_act_quant_fp8_cuda(dx.p, rows, K, dq.p, ds.as<float>(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(dq.get<uint8_t>(static_cast<size_t>(rows * K)), want.codes) << rows << "x" << K;
    EXPECT_EQ(ds.get<float>(static_cast<size_t>(rows)), want.scales) << rows << "x" << K;
  }
}

// The dense form (stream_linear_cuda) against linear_cpu on the same packed weight: the q8 self-conditioning MLP
// at the 26B-A4B shapes over one canvas, and odd shapes. Bound: the plain GEMM bound above.
void run_linear_in(int64_t rows, int64_t K, int64_t N, DType fmt, Q4Layout layout) {
  const auto x = rand_bf16(static_cast<size_t>(rows * K), 41, 2.0f);
  const TestWeights w = make_weights(fmt, Shape{N, K}, 42, 0.05f);
  std::vector<double> want(static_cast<size_t>(rows * N)), asum(want.size());
  const std::vector<float> xf = to_f32(x);
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, a = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double t = static_cast<double>(xf[static_cast<size_t>(r * K + k)]) * w.values[static_cast<size_t>(n * K + k)];
          s += t;
          a += std::fabs(t);
        }
        want[static_cast<size_t>(r * N + n)] = s;
        asum[static_cast<size_t>(r * N + n)] = a;
      }
  });
  const DeviceBuf dx(x), dy(static_cast<size_t>(rows * N) * 2);
  const DeviceWeights dw(w, layout);
  const Status s = stream_linear_cuda(dx.p, rows, K, dw.p, fmt, N, dy.p, nullptr, layout);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y = to_f32(dy.get<uint16_t>(static_cast<size_t>(rows * N)));
  Bounded b;
  const double w_rel = weight_rel_error(fmt);
  for (size_t i = 0; i < y.size(); ++i)
    b.add(static_cast<int64_t>(i), y[i], want[i],
          std::ldexp(std::fabs(want[i]), -8) + std::ldexp(asum[i], -14) + w_rel * asum[i]);
  const test::Diff d = test::compare(y, std::vector<float>(want.begin(), want.end()));
  std::cout << "  linear " << dtype_name(fmt) << layout_name(layout) << " " << rows << "x" << K << " -> " << N << ": " << d.str() << "; "
            << b.str() << "\n";
  EXPECT_TRUE(d.finite);
  EXPECT_EQ(b.bad, 0) << b.str();
  EXPECT_GE(d.cosine, 0.99999) << d.str();
}

void run_linear(int64_t rows, int64_t K, int64_t N, DType fmt) {
  for (Q4Layout l : layouts(fmt)) run_linear_in(rows, K, N, fmt, l);
}

TEST(MoeStreamQuantCuda, DenseLinear) {
  DG_NEED_GPU();
  run_linear(256, 2816, 2112, DType::kQ8);  // sc_gate / sc_up
  run_linear(256, 2112, 2816, DType::kQ8);  // sc_down
  run_linear(65, 96, 40, DType::kQ8);
  for (DType fmt : kPacked) run_linear(130, 64, 200, fmt);
}

}  // namespace moe_stream_test
}  // namespace dg
#endif
