// Agreement bounds between the CPU reference engine and the transformers fixtures. Each bound is a few times the
// worst value measured on tests/fixtures (the measurements are recorded in docs/NUMERICS.md).
#pragma once

namespace dg::test {

// f32 engine vs transformers f32 (CPU, eager): hidden states and logits.
inline constexpr double kF32HiddenMaxAbs = 2e-4;   // per-layer residual stream, KV
inline constexpr double kF32LogitMaxAbs = 2e-4;    // softcapped logits
inline constexpr double kF32MinCosine = 1.0 - 1e-9;

// CPU engine with bf16 activation storage vs transformers bf16 (GPU, sdpa + grouped_mm).
inline constexpr double kBf16MinCosineHidden = 0.99;
inline constexpr double kBf16MinCosineLogits = 0.995;
inline constexpr double kBf16MinArgmaxAgreement = 0.9;

// Teacher-forced replay: decisions may differ from the recording only where the recorded margin is below these.
inline constexpr double kArgmaxMarginEps = 1e-3;     // top-1 minus top-2 tempered logit
inline constexpr double kEntropyEps = 1e-4;          // entropy gaps at the accept boundary
inline constexpr double kDrawMarginEps = 1e-5;       // distance of the uniform draw to a CDF boundary

}  // namespace dg::test
