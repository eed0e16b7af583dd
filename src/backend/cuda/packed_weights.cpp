// The CUDA backend's boundary for packed weights (declared in packed_weights.h).
#include "backend/cuda/packed_weights.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "ops/moe/moe.h"

namespace dg {

void cuda_validate_packed(const ModelWeights& h, const CudaKernels& kernels) {
  auto check_one = [&](const Tensor& t, const std::string& what, bool experts) {
    if (!dtype_is_packed(t.dtype)) return;
    const std::string fmt(dtype_name(t.dtype));
    if (!moe_stream_supports(t.dtype))
      fail("this .dgq pack stores {} as {}, and the CUDA backend has no {} kernel (it runs q4, fp8 and nvfp4 "
           "experts and q8 linears); quantize again with --profile q4|fp8|nvfp4 (or --set CLASS=FORMAT), or run "
           "this pack with --backend cpu",
           what, fmt, fmt);
    const int64_t K = t.shape[t.shape.rank - 1];
    const int64_t align = t.dtype == DType::kQ4 || t.dtype == DType::kNvFp4 ? 32 : 16;
    if (K % align != 0)
      fail("this .dgq pack stores {} as {} with input dimension {}, and the CUDA {} kernel needs a multiple of {}; "
           "quantize that class to another format or run with --backend cpu",
           what, fmt, K, fmt, align);
    if (experts && kernels.moe != "stream" && kernels.moe != "auto")
      fail("the experts of this .dgq pack are {}: only the streaming MoE kernel reads packed experts (not --moe "
           "{}); use --moe auto (the default) or stream",
           fmt, kernels.moe);
  };
  check_one(h.sc_gate, "the self-conditioning MLP (sc_gate)", false);
  check_one(h.sc_up, "the self-conditioning MLP (sc_up)", false);
  check_one(h.sc_down, "the self-conditioning MLP (sc_down)", false);
  for (size_t l = 0; l < h.layers.size(); ++l) {
    const LayerWeights& L = h.layers[l];
    const std::string at = "layer " + std::to_string(l) + " ";
    for (auto [t, name] : {std::pair{&L.q, "attention q"}, {&L.k, "attention k"}, {&L.v, "attention v"},
                           {&L.o, "attention o"}, {&L.gate, "dense MLP gate"}, {&L.up, "dense MLP up"},
                           {&L.down, "dense MLP down"}})
      check_one(*t, at + name, false);
    check_one(L.experts_gate_up, at + "experts.gate_up", true);
    check_one(L.experts_down, at + "experts.down", true);
  }
}

}  // namespace dg
