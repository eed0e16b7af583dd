#include "support/reference_fixture.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/paths.h"

namespace dg::test {

bool RefFixture::available(const std::string& name) {
  return std::filesystem::exists(source_path("tests/fixtures/" + name + "_ref/meta.json"));
}

RefFixture RefFixture::load(const std::string& name) {
  RefFixture f;
  f.name = name;
  f.ckpt_dir = source_path("tests/fixtures/" + name);
  f.ref_dir = source_path("tests/fixtures/" + name + "_ref");
  std::ifstream in(f.ref_dir + "/meta.json");
  f.meta = nlohmann::json::parse(in);
  f.dumps_f32 = TensorStore::open_file(f.ref_dir + "/dumps_f32.safetensors");
  f.traces = TensorStore::open_file(f.ref_dir + "/traces.safetensors");
  if (std::filesystem::exists(f.ref_dir + "/dumps_bf16.safetensors"))
    f.dumps_bf16 = TensorStore::open_file(f.ref_dir + "/dumps_bf16.safetensors");
  for (const auto& r : f.meta.at("runs")) {
    RefRun run;
    run.name = r.at("name");
    run.prompt = r.at("prompt").get<std::vector<int32_t>>();
    run.seed = r.at("seed");
    run.steps = r.at("steps");
    run.max_new_tokens = r.at("max_new_tokens");
    run.stability_threshold = r.at("stability_threshold");
    run.confidence_threshold = r.at("confidence_threshold");
    run.eos = r.at("eos").get<std::vector<int32_t>>();
    run.has_logits = r.at("has_logits");
    run.sequence = r.at("sequence").get<std::vector<int32_t>>();
    run.steps_per_block = r.at("steps_per_block").get<std::vector<int>>();
    run.T = r.at("T").get<std::vector<std::vector<double>>>();
    run.stop = r.at("stop").get<std::vector<std::vector<bool>>>();
    f.runs.push_back(std::move(run));
  }
  return f;
}

std::vector<float> read_f32(const TensorStore& s, const std::string& name) {
  const Tensor t = s.view(name);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(t.data, t.dtype, out.size(), out.data());
  return out;
}

std::vector<int32_t> read_i32(const TensorStore& s, const std::string& name) {
  const Tensor t = s.view(name);
  DG_CHECK(t.dtype == DType::kI32, "{} is {}, expected I32", name, dtype_name(t.dtype));
  const auto* p = t.as<int32_t>();
  return {p, p + t.numel()};
}

std::vector<uint8_t> read_u8(const TensorStore& s, const std::string& name) {
  const Tensor t = s.view(name);
  DG_CHECK(t.dtype == DType::kU8 || t.dtype == DType::kBool, "{} is {}, expected U8", name, dtype_name(t.dtype));
  const auto* p = t.as<uint8_t>();
  return {p, p + t.numel()};
}

}  // namespace dg::test
