// The streaming MoE grouped GEMMs (src/ops/moe/moe_stream.cu) with bf16 weights against f64 loops over the same
// inputs, moe_group_cuda against the host's stable sort, and the stream pipeline (group, gate_up + gated GELU, down,
// combine) against moe_experts_cpu. Skipped with a message when no GPU is present. Shapes: odd (K 72, N 40,
// 5 experts; counts 0, 1, 64, 65, 150 around the 64-row pass), the tiny models', all 2048 rows on one expert, and
// the full 26B-A4B expert shapes with 2048 routed rows. The packed formats and fp8 activations:
// moe_stream_quant_test.cpp; the shared checks and their bounds: moe_stream_checks.h.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe_stream_checks.h"
#include "support/device_buf.h"

namespace dg {
namespace moe_stream_test {

TEST(MoeStreamCuda, OddShapesAndPassBoundaries) {
  DG_NEED_GPU();
  // 150 rows take three passes (64, 64, 22); 64 and 65 sit on the pass boundary; K 72 ends mid-stage; N 40 and
  // ff 20 are partial tiles with unaligned (scalar) stores.
  run_gemm_case({"K72 N40 gather", 72, 40, 5, {7, 0, 150, 1, 33}, 0, 3, true});
  run_gemm_case({"K72 N40", 72, 40, 5, {64, 65, 0, 0, 16}, 0, 1, false});
  run_gemm_case({"K8 N2 one row", 8, 2, 3, {0, 1, 0}, 0, 1, false});
  run_gemm_case({"K72 N128 gather", 72, 128, 5, {7, 0, 150, 1, 33}, 0, 3, true});  // tiles: a last stage of 16 bytes
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
  run_pass_boundaries(false, false);
}

// bf16 in the warp-specialised kernel (--moe ws): the same cases against f64 and bit for bit against the wide
// passes (K 72: a stage of 64 elements and one of 8), and 128 experts with random routing (each CTA walks several
// tiles, the stage ring wrapping across them). Where the rows are a multiple of 128 each case runs again on the
// weights in stage tiles, bit for bit (K 72 and 352: a last stage of 16 and 64 bytes a row).
TEST(MoeWsCuda, Bf16MatchesWidePassesBitForBit) {
  DG_NEED_GPU();
  run_pass_boundaries(false, true);
  for (GemmCase c : {GemmCase{"26B-A4B down ws, 128 experts", 704, 2816, 128, {}, 512, 8, false},
                     GemmCase{"K72 N128 gather ws", 72, 128, 9, {150, 0, 65, 64, 33, 7, 1, 0, 16}, 0, 3, true},
                     GemmCase{"K352 N128 gather ws", 352, 128, 6, {20, 3, 0, 40, 17, 64}, 0, 2, true}}) {
    c.ws = true;
    run_gemm_case(c);
  }
}

// Passes of 128 rows have bf16 and W8A8 bodies: other weights (fp8 with bf16 activations, q4), or fp8 activations
// with bf16 weights, are refused before any launch (no GPU needed) with a message that names the way out.
TEST(MoeStreamCuda, WidePassesRefuseOtherFormats) {
  alignas(16) static uint8_t fake[64];
  for (DType fmt : {DType::kQ4, DType::kFp8}) {
    const Status s = moe_stream_gemm_cuda(fake, nullptr, 1, 64, fake, fmt, 16, 1, nullptr, fake, nullptr, nullptr, 0,
                                          WeightLayout::kDisk, true);
    ASSERT_FALSE(s.is_ok()) << dtype_name(fmt);
    EXPECT_NE(s.message().find("--moe stream"), std::string::npos) << s.message();
  }
  const float scale = 1.0f;
  const Status s = moe_stream_gate_up_cuda(fake, nullptr, 1, 64, fake, DType::kBF16, 8, 1, nullptr, fake, nullptr,
                                           &scale, 0, WeightLayout::kDisk, true);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not BF16 with fp8 activations"), std::string::npos) << s.message();
}

// Stage tiles in the streaming kernel are fp8's and bf16's, for rows a matrix that are a multiple of 128: q4 tiles
// (the ws kernel's) and fp8 weights of 16 rows are refused before any launch, each naming the way out.
TEST(MoeStreamCuda, StageTilesAreOfWholeBlocks) {
  alignas(16) static uint8_t fake[64];
  const Status q4 = moe_stream_gemm_cuda(fake, nullptr, 1, 64, fake, DType::kQ4, 128, 1, nullptr, fake, nullptr,
                                         nullptr, 0, WeightLayout::kTiled);
  ASSERT_FALSE(q4.is_ok());
  EXPECT_NE(q4.message().find("--no-q4-tiles"), std::string::npos) << q4.message();
  const Status few = moe_stream_gemm_cuda(fake, nullptr, 1, 64, fake, DType::kFp8, 16, 1, nullptr, fake, nullptr,
                                          nullptr, 0, WeightLayout::kTiled);
  ASSERT_FALSE(few.is_ok());
  EXPECT_NE(few.message().find("--no-fp8-tiles"), std::string::npos) << few.message();
}

TEST(MoeStreamCuda, FullShapeRandomRouting) {
  DG_NEED_GPU();
  run_gemm_case({"26B-A4B gate_up", 2816, 1408, 128, {}, 256, 8, true});
  run_gemm_case({"26B-A4B down", 704, 2816, 128, {}, 256, 8, false});
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

}  // namespace moe_stream_test
}  // namespace dg
#endif
