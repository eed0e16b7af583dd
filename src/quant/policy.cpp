#include "quant/policy.h"

#include "core/error.h"

namespace dg {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr WeightClass kUnlocked[] = {WeightClass::kExpertsGateUp, WeightClass::kExpertsDown, WeightClass::kAttn,
                                     WeightClass::kDense, WeightClass::kSc};

constexpr const char* kClassList = "experts, experts.gate_up, experts.down, attn, dense, sc";
constexpr const char* kFormatList = "raw, q8, q6, q4, nvfp4, fp8";

bool parse_format(const std::string& s, PackFormat* f) {
  if (s == "raw") *f = std::nullopt;
  else if (s == "q4") *f = DType::kQ4;
  else if (s == "q6") *f = DType::kQ6;
  else if (s == "q8") *f = DType::kQ8;
  else if (s == "nvfp4") *f = DType::kNvFp4;
  else if (s == "fp8") *f = DType::kFp8;
  else return false;
  return true;
}

const char* locked_reason(const std::string& cls) {
  if (cls == "embed" || cls == "embed_tokens")
    return "the embedding is also the tied lm_head and the self-conditioning soft-embedding table";
  if (cls == "router") return "routing decisions are precision-sensitive, and the router tensors are small";
  if (cls == "norms" || cls == "layer_scalar")
    return "norm weights and layer scalars are tiny and scale whole activations";
  return nullptr;
}

}  // namespace

std::string_view weight_class_name(WeightClass c) {
  switch (c) {
    case WeightClass::kEmbed: return "embed";
    case WeightClass::kAttn: return "attn";
    case WeightClass::kDense: return "dense";
    case WeightClass::kRouter: return "router";
    case WeightClass::kExpertsGateUp: return "experts.gate_up";
    case WeightClass::kExpertsDown: return "experts.down";
    case WeightClass::kSc: return "sc";
    case WeightClass::kNorms: return "norms";
  }
  return "?";
}

WeightClass weight_class(const std::string& n) {
  if (n == "model.decoder.embed_tokens.weight") return WeightClass::kEmbed;
  if (n.find("self_conditioning.") != std::string::npos)
    return ends_with(n, "pre_norm.weight") ? WeightClass::kNorms : WeightClass::kSc;
  if (ends_with(n, "experts.gate_up_proj")) return WeightClass::kExpertsGateUp;
  if (ends_with(n, "experts.down_proj")) return WeightClass::kExpertsDown;
  if (n.find(".router.") != std::string::npos) return WeightClass::kRouter;
  for (const char* s : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                        "self_attn.o_proj.weight"})
    if (ends_with(n, s)) return WeightClass::kAttn;
  for (const char* s : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
    if (ends_with(n, s)) return WeightClass::kDense;
  if (n.find("norm") != std::string::npos || ends_with(n, "layer_scalar")) return WeightClass::kNorms;
  fail("tensor '{}' belongs to no weight class", n);
}

bool weight_class_locked(WeightClass c) {
  return c == WeightClass::kEmbed || c == WeightClass::kRouter || c == WeightClass::kNorms;
}

std::string pack_format_name(PackFormat f) { return f ? std::string(dtype_name(*f)) : "raw"; }

PackFormat QuantPolicy::format_of(WeightClass c) const {
  auto it = formats.find(c);
  return it == formats.end() ? PackFormat{} : it->second;
}

QuantPolicy make_quant_policy(const std::string& profile, const std::vector<std::string>& sets) {
  QuantPolicy p;
  p.profile = profile;
  PackFormat experts;
  if (profile == "q4") experts = DType::kQ4;
  else if (profile == "q6") experts = DType::kQ6;
  else if (profile == "nvfp4") experts = DType::kNvFp4;
  else if (profile == "fp8" || profile == "fp8-all") experts = DType::kFp8;
  else fail("unknown profile '{}': expected q4, q6, nvfp4, fp8 or fp8-all", profile);
  p.formats = {{WeightClass::kExpertsGateUp, experts}, {WeightClass::kExpertsDown, experts},
               {WeightClass::kAttn, PackFormat{}},    {WeightClass::kDense, PackFormat{}},
               {WeightClass::kSc, PackFormat{DType::kQ8}}};
  if (profile == "fp8-all")  // every unlocked class fp8: the W8A8 products everywhere but the vocabulary's
    for (WeightClass c : {WeightClass::kAttn, WeightClass::kDense, WeightClass::kSc}) p.formats[c] = experts;

  std::map<std::string, PackFormat> given;
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      fail("--set '{}': expected CLASS=FORMAT, e.g. --set attn=q8", s);
    const std::string cls = s.substr(0, eq), fmt_name = s.substr(eq + 1);
    if (const char* why = locked_reason(cls))
      fail("--set '{}': class '{}' is locked to the source dtype: {}", s, cls, why);
    bool known = cls == "experts";
    for (WeightClass c : kUnlocked) known = known || cls == weight_class_name(c);
    if (!known)
      fail("--set '{}': unknown class '{}' (classes: {}; embed, router and norms are locked)", s, cls, kClassList);
    PackFormat f;
    if (!parse_format(fmt_name, &f)) fail("--set '{}': unknown format '{}' (formats: {})", s, fmt_name, kFormatList);
    if (!given.emplace(cls, f).second) fail("--set: class '{}' is set twice", cls);
    p.sets.emplace_back(cls, fmt_name);
  }
  if (auto it = given.find("experts"); it != given.end())
    p.formats[WeightClass::kExpertsGateUp] = p.formats[WeightClass::kExpertsDown] = it->second;
  for (WeightClass c : kUnlocked)
    if (auto it = given.find(std::string(weight_class_name(c))); it != given.end()) p.formats[c] = it->second;
  return p;
}

}  // namespace dg
