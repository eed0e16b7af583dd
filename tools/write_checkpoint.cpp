// dg_write_checkpoint: writes a Hugging Face DiffusionGemma checkpoint directory with synthetic bf16 weights, of
// google/diffusiongemma-26B-A4B-it's shape (or any config.json's), without torch: config.json,
// generation_config.json, the tensors save_pretrained writes (tools/hf_layout.h) in shards filled in state-dict
// order up to --max-shard-size (decimal units, as save_pretrained's "5GB"), and model.safetensors.index.json.
// Weights are the synthetic model's (src/model/synthetic.cpp), generated and written in chunks: memory stays a few
// MB whatever the model size. For timing `diffgemma quantize` on the full shape (docs/FORMATS.md).
//
// Usage: dg_write_checkpoint --out DIR [--layers N] [--seed S] [--config config.json] [--max-shard-size 5GB]
//                            [--tokenizer tokenizer.json] [--dry-run 1] [--plan 1]
// Prints one JSON line on stdout: layers, tensors, files, bytes (every tensor) and text_bytes (the tensors the
// engine reads, which `diffgemma quantize` streams). --dry-run 1 prints it without writing anything; --plan 1
// prints synthetic_plan instead (name, shape, seed, scale, offset per text weight) and writes nothing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/parallel.h"
#include "hf_layout.h"
#include "model/synthetic.h"
#include "ops/elementwise/synthetic_uniform.h"

namespace dg {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Options {
  std::string out, config, tokenizer;
  int layers = 0;  // 0: every layer of the config
  uint64_t seed = 1;
  uint64_t max_shard_bytes = 5'000'000'000ull;
  bool dry_run = false;
  bool plan = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "dg_write_checkpoint: " << why
            << "\nusage: dg_write_checkpoint --out DIR [--layers N] [--seed S] [--config config.json]"
               " [--max-shard-size 5GB] [--tokenizer tokenizer.json] [--dry-run 1] [--plan 1]\n";
  std::exit(2);
}

// "5GB", "14MB", "400KB", "2GiB" or plain bytes; decimal units as huggingface_hub's parse_size_to_int.
uint64_t parse_size(const std::string& s) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    usage("--max-shard-size '" + s + "' is not a size (e.g. 5GB, 14MB, 400KB)");
  }
  const std::string unit = s.substr(end);
  const std::map<std::string, double> units = {{"", 1},          {"B", 1},          {"KB", 1e3},
                                                {"MB", 1e6},       {"GB", 1e9},       {"KiB", 1024.0},
                                                {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  const auto it = units.find(unit);
  if (it == units.end() || !(v > 0)) usage("--max-shard-size '" + s + "' is not a size (e.g. 5GB, 14MB, 400KB)");
  return static_cast<uint64_t>(v * it->second);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("option '" + a + "' needs a value");
    const std::string v = argv[++i];
    if (a == "--out") o.out = v;
    else if (a == "--config") o.config = v;
    else if (a == "--tokenizer") o.tokenizer = v;
    else if (a == "--layers") o.layers = std::stoi(v);
    else if (a == "--seed") o.seed = std::stoull(v);
    else if (a == "--max-shard-size") o.max_shard_bytes = parse_size(v);
    else if (a == "--dry-run") o.dry_run = v == "1";
    else if (a == "--plan") o.plan = v == "1";
    else usage("unknown option '" + a + "'");
  }
  if (o.out.empty()) usage("--out is required");
  if (o.layers < 0) usage("--layers must be >= 0 (0: all)");
  return o;
}

uint64_t tensor_bytes(const HfTensor& t) { return static_cast<uint64_t>(t.shape.numel()) * 2; }

// save_pretrained's split: tensors in state-dict order; a tensor that would take the shard over the limit starts
// the next one; a tensor larger than the limit gets a shard of its own.
std::vector<std::vector<const HfTensor*>> plan_shards(const std::vector<HfTensor>& tensors, uint64_t max_bytes) {
  std::vector<std::vector<const HfTensor*>> shards;
  std::vector<const HfTensor*> cur;
  uint64_t cur_bytes = 0;
  for (const HfTensor& t : tensors) {
    const uint64_t b = tensor_bytes(t);
    if (b > max_bytes) {
      shards.push_back({&t});
      continue;
    }
    if (!cur.empty() && cur_bytes + b > max_bytes) {
      shards.push_back(std::move(cur));
      cur = {};
      cur_bytes = 0;
    }
    cur.push_back(&t);
    cur_bytes += b;
  }
  if (!cur.empty()) shards.push_back(std::move(cur));
  return shards;
}

// One safetensors file: the header (tensors sorted by name, as the safetensors writer orders them), then each
// tensor's bf16 values generated chunk by chunk.
void write_shard(const std::string& path, std::vector<const HfTensor*> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const HfTensor* a, const HfTensor* b) { return a->name < b->name; });
  nlohmann::ordered_json header = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t at = 0;
  for (const HfTensor* t : tensors) {
    std::vector<int64_t> shape(t->shape.dims.begin(), t->shape.dims.begin() + t->shape.rank);
    header[t->name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {at, at + tensor_bytes(*t)}}};
    at += tensor_bytes(*t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail("cannot create '{}'", path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  constexpr int64_t kChunk = 4 << 20;  // elements
  std::vector<uint16_t> buf;
  for (const HfTensor* t : tensors) {
    const int64_t n = t->shape.numel();
    for (int64_t c = 0; c < n && ok; c += kChunk) {
      const int64_t m = std::min(kChunk, n - c);
      buf.resize(static_cast<size_t>(m));
      parallel_for(m, 1 << 16, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i)
          buf[static_cast<size_t>(i)] =
              f32_to_bf16(synthetic_uniform(t->seed, static_cast<uint64_t>(c + i), t->scale, t->offset));
      });
      ok = std::fwrite(buf.data(), 2, buf.size(), f) == buf.size();
    }
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(path.c_str());  // no truncated shard left behind for a loader to trip on
    fail("error writing '{}' (disk full?); removed it", path);
  }
}

void write_json(const fs::path& p, const json& j) {
  std::ofstream f(p);
  f << j.dump(2) << "\n";
  if (!f) fail("cannot write '{}'", p.string());
}

json generation_config() {
  return {{"bos_token_id", 2},
          {"confidence_threshold", 0.005},
          {"eos_token_id", {1, 106, 50}},
          {"max_denoising_steps", 48},
          {"max_new_tokens", 256},
          {"pad_token_id", 0},
          {"return_dict_in_generate", true},
          {"sampler_config", {{"_cls_name", "EntropyBoundSamplerConfig"}, {"entropy_bound", 0.1}}},
          {"stability_threshold", 1},
          {"t_max", 0.8},
          {"t_min", 0.4},
          {"transformers_version", "5.17.0"}};
}

int run(const Options& o) {
  json config = diffusiongemma_26b_hf_config();
  if (!o.config.empty()) {
    std::ifstream f(o.config);
    if (!f) fail("cannot read --config '{}'", o.config);
    try {
      config = json::parse(f);
    } catch (const json::exception& e) {
      fail("--config '{}' is not valid JSON: {}", o.config, e.what());
    }
  }
  if (o.layers > 0) config = slice_hf_config(config, o.layers);
  const ModelConfig cfg =
      parse_model_config(config.dump(), o.config.empty() ? "the built-in 26B-A4B config" : o.config);
  if (o.plan) {  // the synthetic recipe, one JSON line per text weight (scripts/full_shape_vs_hf.py checks its copy)
    for (const SyntheticTensor& t : synthetic_plan(cfg, o.seed)) {
      json shape = json::array();
      for (int d = 0; d < t.shape.rank; ++d) shape.push_back(t.shape[d]);
      std::cout << json{{"name", t.name}, {"shape", shape}, {"seed", t.seed}, {"scale", static_cast<double>(t.scale)},
                        {"offset", static_cast<double>(t.offset)}}.dump()
                << "\n";
    }
    return 0;
  }
  const std::vector<HfTensor> tensors = hf_tensors(config, cfg, o.seed);

  const auto shards = plan_shards(tensors, o.max_shard_bytes);
  auto file_of = [&](size_t s) {
    return shards.size() == 1 ? std::string("model.safetensors")
                              : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
  };
  uint64_t total_size = 0, total_params = 0, text_bytes = 0;
  for (const HfTensor& t : tensors) {
    total_size += tensor_bytes(t);
    if (t.parameter) total_params += static_cast<uint64_t>(t.shape.numel());
    if (t.name.rfind("model.decoder.", 0) == 0 || t.name.rfind("model.encoder.language_model.", 0) == 0)
      text_bytes += tensor_bytes(t);
  }
  const json summary = {{"out", o.out},      {"layers", cfg.n_layers},  {"tensors", tensors.size()},
                        {"files", shards.size()}, {"bytes", total_size}, {"text_bytes", text_bytes},
                        {"dry_run", o.dry_run}};
  if (o.dry_run) {
    std::cout << summary.dump() << "\n";
    return 0;
  }

  const fs::path out(o.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    fail("'{}' exists and is not an empty directory; choose another --out", o.out);
  fs::create_directories(out);
  write_json(out / "config.json", config);
  write_json(out / "generation_config.json", generation_config());
  if (!o.tokenizer.empty()) fs::copy_file(o.tokenizer, out / "tokenizer.json");

  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    uint64_t bytes = 0;
    for (const HfTensor* t : shards[s]) {
      weight_map[t->name] = file_of(s);
      bytes += tensor_bytes(*t);
    }
    write_shard((out / file_of(s)).string(), shards[s]);
    std::cerr << fmt::format("dg_write_checkpoint: {} ({} tensors, {:.2f} GB)\n", file_of(s), shards[s].size(),
                             static_cast<double>(bytes) / 1e9);
  }
  if (shards.size() > 1) {
    json index = {{"metadata", {{"total_parameters", total_params}, {"total_size", total_size}}},
                  {"weight_map", weight_map}};
    write_json(out / "model.safetensors.index.json", index);
  }
  std::cout << summary.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace dg

int main(int argc, char** argv) {
  try {
    return dg::run(dg::parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "dg_write_checkpoint: " << e.what() << "\n";
    return 1;
  }
}
