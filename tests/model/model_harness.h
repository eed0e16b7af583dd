// Builds the CPU engine for a reference fixture and captures forward traces by name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "model/checkpoint.h"
#include "model/forward.h"
#include "support/reference_fixture.h"

namespace dg::test {

struct ModelRig {
  Checkpoint ck;
  std::unique_ptr<Backend> be;
  ModelWeights weights;  // as the backend reads them
  std::unique_ptr<Model> model;

  // expert_act: set_expert_act's mode ("auto", as dg::Engine: fp8 experts take fp8 activations; "bf16" isolates a
  // pack's weight format).
  explicit ModelRig(const std::string& dir, Precision p = {}, const std::string& backend = "cpu",
                  const CudaKernels& kernels = {}, const std::string& expert_act = "auto");
  KvCache new_cache(int64_t context = 4096) const;
};

// `n` ids in [3, vocab) in a fixed pattern that depends on `seed` (prompts and canvases of the batch tests).
std::vector<int32_t> pattern_ids(int n, int seed, int64_t vocab);
// A tensor's values on the host, through its backend.
std::vector<float> to_host(Backend& be, const Tensor& t);

struct Capture {
  std::map<std::string, std::vector<float>> t;
  Backend* be = nullptr;  // set for device tensors (copied to the host through the backend)
  ForwardTrace fn();
};

// Each decoder layer of `e` run on the reference's own input to that layer (`ref`: a denoise step's capture holding
// dec.x0 and dec.lN.out, of `rows` canvas rows, after `prompt` was encoded): the number of (layer, row) outputs whose
// cosine to the reference's is below `min_cos`, and the number compared. A routing near-tie moves a row by a whole
// expert, and a random model's attention spreads that row's difference, so layers are held one at a time.
struct RowsOff {
  int off = 0, total = 0;
};
RowsOff decoder_rows_off(ModelRig& e, const std::vector<int32_t>& prompt, const Capture& ref, int64_t rows,
                         double min_cos);

}  // namespace dg::test
