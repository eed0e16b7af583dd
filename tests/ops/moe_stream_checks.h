// What the streaming MoE tests (moe_stream_test.cpp, moe_stream_quant_test.cpp) share: routings grouped as
// moe_group_cuda lays them out, weights in each format with the values the CPU decodes, the per-element bounds, and
// the two checks every format runs: one grouped GEMM case (plain and gated) against f64 loops, and the stream
// pipeline against moe_experts_cpu. CUDA builds only (the files that include it are inside
// `#if defined(DG_WITH_CUDA)`).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/tensor.h"
#include "ops/moe/moe_cuda.h"
#include "support/device_buf.h"

namespace dg {
namespace moe_stream_test {

std::vector<uint16_t> rand_bf16(size_t n, uint64_t seed, float scale);
std::vector<float> to_f32(const std::vector<uint16_t>& v);

using test::DeviceBuf;

// Pair ids p = row * top_k + rank grouped stably by expert, as moe_group_cuda lays them out.
struct Routing {
  std::vector<int32_t> idx;      // [rows * top_k] expert of each pair
  std::vector<int32_t> offsets;  // [n_exp + 1]
  std::vector<int32_t> perm;     // sorted position -> pair id
  std::vector<int32_t> expert;   // sorted position -> expert
};

// Each of `rows` rows picks top_k distinct experts uniformly at random.
Routing route_random(int64_t rows, int top_k, int64_t n_exp, uint64_t seed);

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
  bool ws = false;    // by the warp-specialised kernel (--moe ws), also checked bit for bit: bf16 and W8A8 against
                      // `wide`, q4 (kernel layout) against the streaming kernel
  int q4_consumers = 2;  // ws with q4: the kernel's consumer warpgroups (2 or 4, --moe-q4-consumers)
};

// Per-row FP8 codes and scales of x (encode_rows, as moe_act_quant_fp8_cuda computes them) and their values.
struct Act8 {
  std::vector<uint8_t> codes;
  std::vector<float> scales, values;
};
Act8 act8_rows(const std::vector<uint16_t>& x, int64_t rows, int64_t K);

// Weights of shape s in `fmt` for the device (bf16 bits or the packed planes) and their values as the CPU reads
// them (decode_rows for packed formats).
struct TestWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  Tensor host;  // the host tensor the CPU references read
};

TestWeights make_weights(DType fmt, Shape s, uint64_t seed, float scale);

// The layouts a format's device weights are tested in: q4 in both (disk, and the kernel layout made on the device).
std::vector<WeightLayout> layouts(DType fmt);

// W's bytes on the device in `layout`: q4's kernel layout converted there by q4_to_kernel_layout_cuda, and checked
// byte for byte against the host twin.
struct DeviceWeights {
  void* p = nullptr;
  DeviceWeights(const TestWeights& w, WeightLayout layout);
  ~DeviceWeights() { cudaFree(p); }
  // q4 in the kernel layout of shape s becomes its tiled form on the device (q4_to_tiled_layout_cuda), checked byte
  // for byte against the host twin.
  void tile(const Shape& s);
  // fp8 or bf16 weights of shape s become their stage tiles on the device (to_row_tiles_cuda), checked byte for byte
  // against the host twin.
  void tile_rows(DType fmt, const Shape& s);
  DeviceWeights(const DeviceWeights&) = delete;
  DeviceWeights& operator=(const DeviceWeights&) = delete;
};

const char* layout_name(WeightLayout l);

// The relative error of a weight as the kernel feeds it to the tensor cores: q4's decoded f32 value is rounded once
// to bf16 (2^-9); fp8, nvfp4 and q8 codes are exact in bf16 (their scales multiply the f32 sums).
double weight_rel_error(DType fmt);

// The per-element bounds themselves: moe_stream_checks.cpp, above gated_bound.
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

// One grouped GEMM case, plain and gated, in each of the format's layouts, against f64 over the same inputs.
void run_gemm_case(const GemmCase& c);

// Passes of 128 rows (--moe wide, or --moe ws with `ws`), bf16 or W8A8 (`act8`: fp8 weights): 300 rows take 128,
// 128, 44; 129 takes 128 and 1; 65 and 64 either side of the n64 / n128 switch, 7, 1 and experts without rows,
// column tiles only partly filled (N 40, K 72 or 96 with a short last stage), then the full shape's gate_up and
// down over four experts.
void run_pass_boundaries(bool act8, bool ws);

// The pipeline as CudaBackend::moe runs it with --moe stream, in each of the format's layouts, against the composed
// CPU reference with bf16 storage.
void run_pipeline(int64_t rows, int64_t hidden, int64_t ff, int64_t n_exp, int top_k, DType fmt = DType::kBF16,
                  bool act8 = false);

bool have_gpu();
#define DG_NEED_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine"

}  // namespace moe_stream_test
}  // namespace dg
