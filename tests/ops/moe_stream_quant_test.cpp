// The streaming MoE grouped GEMMs (src/ops/moe/moe_stream.cu) with packed q4 / fp8 / nvfp4 / q8 weights, as
// decode_rows decodes them, against f64 loops over the same inputs; fp8 weights with fp8 activations (W8A8); the
// stream pipeline on the same packed weights against moe_experts_cpu; and the dense form (stream_linear_cuda)
// against linear_cpu. Skipped with a message when no GPU is present. Shapes: odd (K 32 / 96, N 40, 5 experts;
// counts around the 64-row pass), the tiny models', and the full 26B-A4B expert shapes with 2048 routed rows.
// bf16 weights: moe_stream_test.cpp; the shared checks and their bounds: moe_stream_checks.h.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/parallel.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe_stream_checks.h"
#include "support/compare.h"
#include "support/device_buf.h"

namespace dg {
namespace moe_stream_test {

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
// (the plain and gated bounds of moe_stream_checks.cpp hold: e4m3 products are exact in f32), the pipeline against
// moe_experts_cpu with act_fp8, and the per-row quantisation kernel against encode_rows byte for byte. Cases of rows
// a multiple of 128 run again on the weights in stage tiles, bit for bit (so do the fp8 cases of the tests above:
// the bf16-activation kernel on tiles).
TEST(MoeStreamFp8ActCuda, Gemms) {
  DG_NEED_GPU();
  run_gemm_case({"K96 N40 gather", 96, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true, DType::kFp8, true});
  run_gemm_case({"K32 N40", 32, 40, 5, {64, 65, 0, 0, 16}, 0, 1, false, DType::kFp8, true});
  run_gemm_case({"dg-tiny down", 128, 256, 8, {}, 64, 2, false, DType::kFp8, true});
  run_gemm_case({"K352 N128 gather", 352, 128, 6, {20, 3, 0, 40, 17, 64}, 0, 2, true, DType::kFp8, true});
  run_gemm_case({"26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true, DType::kFp8, true});
  run_gemm_case({"26B-A4B down", 704, 2816, 128, {}, 256, 8, false, DType::kFp8, true});
  run_gemm_case({"4 stages, K96 N40 gather", 96, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true, DType::kFp8, true, 4});
  run_gemm_case({"4 stages, 26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true, DType::kFp8, true, 4});
}

// W8A8 in passes of 128 rows (--moe wide): the pass boundaries and the full shape's products, as for bf16.
TEST(MoeStreamFp8ActCuda, WidePasses) {
  DG_NEED_GPU();
  run_pass_boundaries(true, false);
}

// The warp-specialised W8A8 kernel (--moe ws) against f64 and bit for bit against the wide passes: pass boundaries
// (300 rows: 128, 128, 44; 129: 128 and 1; 65 and 64 either side of the n64 / n128 switch; experts without rows),
// column tiles a consumer only half fills (N 40: gated 20 columns), the full shape's gate_up (1,408 rows: the last
// CTA's second consumer idle) and down (K 704: a half-empty last stage), and 128 experts with random routing (768
// tiles: each CTA walks several, the stage ring wrapping across them).
// Where the rows are a multiple of 128 (the full shape, N 128) each case runs again on the weights in stage tiles
// (to_row_tiles_cuda against its host twin, then the wide passes and the ws kernel on tiles, bit for bit):
// K 704's last stage of 64 codes a row and K 352's of 96 come from the tiles' second map, K 96 is one short stage.
TEST(MoeWsCuda, MatchesWidePassesBitForBit) {
  DG_NEED_GPU();
  run_pass_boundaries(true, true);
  for (GemmCase c : {GemmCase{"26B-A4B gate_up ws, 128 experts", 2816, 1408, 128, {}, 512, 8, true, DType::kFp8, true},
                     GemmCase{"K96 N128 gather ws", 96, 128, 9, {150, 0, 65, 64, 33, 7, 1, 0, 16}, 0, 3, true,
                              DType::kFp8, true},
                     GemmCase{"K352 N128 gather ws", 352, 128, 6, {20, 3, 0, 40, 17, 64}, 0, 2, true, DType::kFp8,
                              true}}) {
    c.ws = true;
    run_gemm_case(c);
  }
}

// q4 (the kernel layout) in the warp-specialised kernel (--moe ws, moe_ws_q4.cu) against f64 and bit for bit
// against the streaming kernel: passes of 64 rows around their boundaries (150: 64, 64, 22; 65 and 64; 33: n48; 7
// and 1: n16; experts without rows), K of one group (scale words 4-byte aligned), three groups (a short last
// stage), 5.5 stages (704: a half-empty last stage, scale words 8-byte aligned) and 22 (2,816: 16-byte aligned),
// weights whose kernel layout needs a matrix power p > 0, column tiles a consumer half fills (N 40, N 200), and the
// full shape with 128 experts at one canvas (2,048 pairs) and at two (4,096: experts of more than one pass); where
// the rows are a multiple of 128 (N 128 and the full shape), again in stage tiles (WeightLayout::kTiled; at N 128 a
// column tile's second consumer holds no valid rows, so its boxes are not copied; K 352: three stages, the last of
// three groups). Each case with two consumer warpgroups of two m64 tiles and with four of one (--moe-q4-consumers 4:
// the gated form's gate and up rows in two warpgroups, joined through the staging rows; at N 40 the first pair's
// second 64 columns and the second pair hold no valid rows).
TEST(MoeWsQ4Cuda, MatchesTheStreamingKernelBitForBit) {
  DG_NEED_GPU();
  auto ws = [](GemmCase c, float amp = 0.1f) {
    c.ws = true;
    c.w_amp = amp;
    for (int consumers : {2, 4}) {
      SCOPED_TRACE(std::to_string(consumers) + " consumers");
      c.q4_consumers = consumers;
      run_gemm_case(c);
    }
  };
  ws({"K96 N40 gather", 96, 40, 9, {150, 0, 65, 64, 33, 7, 1, 0, 16}, 0, 3, true, DType::kQ4});
  ws({"K96 N128 gather", 96, 128, 9, {150, 0, 65, 64, 33, 7, 1, 0, 16}, 0, 3, true, DType::kQ4});
  ws({"K32 N40", 32, 40, 5, {64, 65, 0, 1, 16}, 0, 1, false, DType::kQ4});
  ws({"K352 N128 gather", 352, 128, 6, {20, 3, 0, 40, 17, 64}, 0, 2, true, DType::kQ4});
  ws({"K704 N200 gather large", 704, 200, 3, {1, 37, 150}, 0, 2, true, DType::kQ4}, 3e4f);
  ws({"26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true, DType::kQ4});
  ws({"26B-A4B down", 704, 2816, 128, {}, 256, 8, false, DType::kQ4});
  ws({"26B-A4B gate_up, 2 canvases", 2816, 1408, 128, {}, 512, 8, true, DType::kQ4});
}

// Refused before any launch (no GPU needed), each with a message that names the way out.
TEST(MoeWsCuda, RefusesWhatItDoesNotRun) {
  alignas(16) static uint8_t fake[64];
  alignas(16) static int32_t rows[2];
  const float* scale = reinterpret_cast<const float*>(fake);
  auto refused = [&](const void* x_scale, DType fmt, int64_t K, int64_t n_exp, const char* says,
                     const int32_t* x_rows = nullptr, int div = 1) {
    const Status s = moe_ws_gemm_cuda(fake, static_cast<const float*>(x_scale), x_rows, div, 1, K, fake, fmt, 16,
                                      n_exp, rows, fake, nullptr);
    EXPECT_FALSE(s.is_ok()) << says;
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  refused(nullptr, DType::kFp8, 64, 1, "fp8 weights with bf16 activations");
  refused(scale, DType::kBF16, 64, 1, "BF16 weights with fp8 activations");
  refused(scale, DType::kQ4, 64, 1, "q4 weights with fp8 activations");
  refused(nullptr, DType::kQ4, 48, 1, "multiple of 32");
  refused(nullptr, DType::kQ4, 64, 2000, "at most 1024");
  const Status odd =
      moe_ws_gemm_cuda(fake, nullptr, nullptr, 1, 1, 64, fake, DType::kQ4, 16, 1, rows, fake, nullptr, MoeWsForm{3});
  EXPECT_FALSE(odd.is_ok());
  EXPECT_NE(odd.message().find("--moe-q4-consumers"), std::string::npos) << odd.message();
  const Status disk = moe_ws_gemm_cuda(fake, nullptr, nullptr, 1, 1, 64, fake, DType::kQ4, 16, 1, rows, fake,
                                       nullptr, MoeWsForm{2, WeightLayout::kDisk});
  EXPECT_FALSE(disk.is_ok());
  EXPECT_NE(disk.message().find("disk layout"), std::string::npos) << disk.message();
  for (const DType fmt : {DType::kBF16, DType::kFp8}) {  // weights of 16 rows in stage tiles
    const Status tiles = moe_ws_gemm_cuda(fake, fmt == DType::kFp8 ? scale : nullptr, nullptr, 1, 1, 64, fake, fmt,
                                          16, 1, rows, fake, nullptr, MoeWsForm{2, WeightLayout::kTiled});
    EXPECT_FALSE(tiles.is_ok());
    EXPECT_NE(tiles.message().find("--no-fp8-tiles"), std::string::npos) << tiles.message();
  }
  refused(scale, DType::kFp8, 40, 1, "multiple of 16");
  refused(nullptr, DType::kBF16, 12, 1, "multiple of 8");
  refused(scale, DType::kFp8, 64, 2000, "at most 1024");
  refused(scale, DType::kFp8, 64, 1, "row divisor", rows, 0);
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
// at the 26B-A4B shapes over one canvas, and odd shapes. Bound: the plain GEMM bound (moe_stream_checks.cpp).
void run_linear_in(int64_t rows, int64_t K, int64_t N, DType fmt, WeightLayout layout) {
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
  for (WeightLayout l : layouts(fmt)) run_linear_in(rows, K, N, fmt, l);
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
