// Weights generated where they live, for the synthetic models of benchmarks (src/model/synthetic.cpp): not an op
// of the forward, so not part of Backend. A backend that can fill its own buffers implements this interface too.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace dg {

class SyntheticFill {
 public:
  virtual ~SyntheticFill() = default;
  // Fills a weight-shaped buffer of the backend with synthetic_uniform(seed, i, scale, offset) rounded to its
  // storage (src/ops/elementwise/synthetic_uniform.h; deterministic per seed, the same on every backend).
  virtual void fill_uniform(Tensor& t, uint64_t seed, float scale, float offset) = 0;
  // A packed weight of `fmt` and shape `s` with random codes and finite scales, decoded values in [-amax, amax]
  // (synthetic quantized models); backends without packed kernels refuse, naming the backend that has them.
  virtual Tensor synthetic_packed(DType fmt, Shape s, uint64_t seed, float amax) = 0;
};

// `be`'s filler; throws dg::Error naming the backend when it has none.
SyntheticFill& synthetic_fill(Backend& be);

}  // namespace dg
