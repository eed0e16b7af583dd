// `diffgemma info`: what a model directory holds — structure, parameter counts by class, bytes, KV cost, and for a
// .dgq pack its profile and the format and bytes of every weight class; for synthetic:26b-a4b[:PROFILE] the shape
// and the bytes the commands make on a device.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/data_paths.h"
#include "io/tokenizer.h"
#include "model/checkpoint.h"
#include "model/synthetic.h"

namespace dg::cli {
namespace {

struct InfoOptions {
  std::string model = embedded_model_dir();
  bool json = false;
};

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", b, units[u]);
}

// Per weight class of a pack: format, tensor count, bytes (classes in manifest order).
struct ClassBytes {
  std::string format;
  int tensors = 0;
  uint64_t bytes = 0;
};

// Tensors and bytes per storage format ("BF16", "q4", ...) over every tensor of the checkpoint, most bytes first.
std::vector<std::pair<std::string, ClassBytes>> formats(const TensorStore& store) {
  std::vector<std::pair<std::string, ClassBytes>> out;
  for (const std::string& name : store.names()) {
    const TensorInfo& t = store.info(name);
    const std::string f(dtype_name(t.dtype));
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == f; });
    if (it == out.end()) it = out.insert(out.end(), {f, ClassBytes{f, 0, 0}});
    ++it->second.tensors;
    it->second.bytes += t.nbytes;
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  return out;
}
std::vector<std::pair<std::string, ClassBytes>> pack_classes(const PackManifest& m) {
  std::vector<std::pair<std::string, ClassBytes>> out;
  for (const auto& [cls, format] : m.classes) {
    ClassBytes c;
    c.format = format;
    for (const PackEntry& e : m.tensors) {
      if (e.cls != cls) continue;
      ++c.tensors;
      c.bytes += e.bytes;
    }
    if (c.tensors > 0) out.emplace_back(cls, c);
  }
  return out;
}

void run_info(const InfoOptions& o) {
  // synthetic:26b-a4b[:PROFILE]: the published shape, its weights counted as a device makes them (the unpacked ones
  // at bf16), no files, no tokenizer.
  const std::optional<std::string> synthetic = synthetic_profile(o.model);
  const Checkpoint ck = synthetic ? synthetic_checkpoint(o.model) : Checkpoint::open(o.model);
  const ModelConfig& c = ck.config;
  std::vector<std::pair<std::string, ClassBytes>> by_format_bytes;
  uint64_t weight_bytes = 0;
  if (synthetic) {
    for (const SyntheticFormat& f : synthetic_formats(c, *synthetic, 2)) {
      by_format_bytes.emplace_back(f.format, ClassBytes{f.format, f.tensors, f.bytes});
      weight_bytes += f.bytes;
    }
  } else {
    by_format_bytes = formats(ck.store);
    weight_bytes = ck.store.total_bytes();
  }
  const ParamCounts pc = count_params(c);
  std::vector<int> full;
  const LayerSpec* sl = nullptr;
  const LayerSpec* fl = nullptr;
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerSpec& s = c.layers[static_cast<size_t>(l)];
    if (s.sliding) {
      sl = &s;
    } else {
      full.push_back(l);
      fl = &s;
    }
  }
  size_t kv_full = 0, kv_ring = 0;
  for (const LayerSpec& s : c.layers) {
    const size_t row = static_cast<size_t>(2 * s.n_kv_heads * s.head_dim) * 2;  // K and V, f16
    (s.sliding ? kv_ring : kv_full) += row;
  }
  kv_ring *= static_cast<size_t>(std::max(0, c.window - 1));
  const std::string tok_path = (std::filesystem::path(ck.dir) / "tokenizer.json").string();
  int tok_vocab = -1;
  if (!synthetic && std::filesystem::exists(tok_path)) tok_vocab = Tokenizer::load(tok_path).vocab_size();
  const GenerationConfig& g = ck.generation;
  if (o.json) {
    nlohmann::json j;
    j["dir"] = ck.dir;
    j["layers"] = c.n_layers;
    j["full_layers"] = full;
    j["hidden"] = c.hidden;
    j["vocab"] = c.vocab;
    j["canvas"] = c.canvas;
    j["experts"] = c.n_experts;
    j["top_k"] = c.top_k;
    j["params"] = {{"total", pc.total()}, {"embed", pc.embed}, {"attention", pc.attention},
                   {"dense_mlp", pc.dense_mlp}, {"router", pc.router}, {"experts", pc.experts}, {"norms", pc.norms},
                   {"self_conditioning", pc.self_cond}};
    j["weight_bytes"] = weight_bytes;
    for (const auto& [f, c] : by_format_bytes) j["formats"][f] = {{"tensors", c.tensors}, {"bytes", c.bytes}};
    j["weight_files"] = ck.store.files().size();
    if (synthetic) j["synthetic"] = *synthetic;
    j["kv_bytes_per_token_f16"] = kv_full;
    j["kv_sliding_ring_bytes_f16"] = kv_ring;
    j["tokenizer_vocab"] = tok_vocab;
    if (ck.pack) {
      nlohmann::json p;
      p["version"] = ck.pack->version;
      p["profile"] = ck.pack->profile;
      p["sets"] = nlohmann::json::object();
      for (const auto& [k, v] : ck.pack->sets) p["sets"][k] = v;
      p["blob_bytes"] = ck.pack->blob_bytes;
      p["source"] = ck.pack->source;
      for (const auto& [cls, c] : pack_classes(*ck.pack))
        p["classes"][cls] = {{"format", c.format}, {"tensors", c.tensors}, {"bytes", c.bytes}};
      j["pack"] = p;
    }
    j["generation"] = {{"max_new_tokens", g.max_new_tokens}, {"steps", g.max_denoising_steps},
                       {"entropy_bound", g.entropy_bound}, {"t_min", g.t_min}, {"t_max", g.t_max},
                       {"stability_threshold", g.stability_threshold},
                       {"confidence_threshold", g.confidence_threshold}, {"eos", g.eos_ids}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("model        {}\n", ck.dir);
  fmt::print("structure    {} layers ({} sliding, window {}; full at {}), hidden {}, {} query heads\n", c.n_layers,
             c.n_layers - static_cast<int>(full.size()), c.window, fmt::join(full, " "), c.hidden, c.n_heads);
  if (sl != nullptr) fmt::print("  sliding    head_dim {}, {} KV heads, rope theta {:g}\n", sl->head_dim, sl->n_kv_heads, sl->rope.theta);
  if (fl != nullptr)
    fmt::print("  full       head_dim {}, {} KV heads (V = raw K), rope {} theta {:g} rotary {:g}\n", fl->head_dim,
               fl->n_kv_heads, fl->rope.type, fl->rope.theta, fl->rope.partial_rotary_factor);
  fmt::print("  ffn        dense {} + MoE {} experts top-{} of width {}; vocab {}; canvas {}; softcap {:g}\n",
             c.intermediate, c.n_experts, c.top_k, c.expert_ff, c.vocab, c.canvas, c.softcap);
  fmt::print("parameters   {:.3f} M total\n", pc.total() / 1e6);
  fmt::print("  embed {:.3f} M, attention {:.3f} M, dense MLP {:.3f} M, router {:.3f} M, experts {:.3f} M, norms "
             "{:.3f} M, self-conditioning {:.3f} M\n",
             pc.embed / 1e6, pc.attention / 1e6, pc.dense_mlp / 1e6, pc.router / 1e6, pc.experts / 1e6,
             pc.norms / 1e6, pc.self_cond / 1e6);
  std::string by_format;
  for (const auto& [f, c] : by_format_bytes)
    by_format += fmt::format("{}{} {}", by_format.empty() ? "" : ", ", f, human_bytes(static_cast<double>(c.bytes)));
  if (synthetic)
    fmt::print("weights      {} made on the device from a seed (profile {}; no files): {}\n",
               human_bytes(static_cast<double>(weight_bytes)), *synthetic, by_format);
  else
    fmt::print("weights      {} in {} file(s): {}\n", human_bytes(static_cast<double>(weight_bytes)),
               ck.store.files().size(), by_format);
  if (ck.pack) {
    std::string sets;
    for (const auto& [k, v] : ck.pack->sets) sets += fmt::format(" --set {}={}", k, v);
    fmt::print("pack         .dgq version {} ({}), profile {}{}, from '{}', blob {}\n", ck.pack->version,
               ck.pack->version >= kPackFirstChecksumVersion ? "checksummed" : "no checksums", ck.pack->profile, sets,
               ck.pack->source, human_bytes(static_cast<double>(ck.pack->blob_bytes)));
    for (const auto& [cls, c] : pack_classes(*ck.pack)) {
      std::string shown = c.format;  // a raw class: the dtype it is stored in
      for (const PackEntry& e : ck.pack->tensors)
        if (shown == "raw" && e.cls == cls) shown = fmt::format("raw {}", dtype_name(e.dtype));
      fmt::print("  {:<16} {:<8} {:>4} tensors {:>12}\n", cls, shown, c.tensors,
                 human_bytes(static_cast<double>(c.bytes)));
    }
  }
  fmt::print("KV cache     {} per token on full layers (f16) + sliding rings {} in total\n",
             human_bytes(static_cast<double>(kv_full)), human_bytes(static_cast<double>(kv_ring)));
  fmt::print("generation   max_new_tokens {}, steps {}, entropy bound {:g}, T {:g}..{:g}, stop ids [{}]\n",
             g.max_new_tokens, g.max_denoising_steps, g.entropy_bound, g.t_max, g.t_min, fmt::join(g.eos_ids, ", "));
  fmt::print("tokenizer    {}\n", tok_vocab >= 0  ? fmt::format("{} tokens", tok_vocab)
                                 : synthetic     ? std::string("none (--tokenizer FILE, or --prompt-ids)")
                                                 : std::string("none (tokenizer.json missing)"));
}

}  // namespace

void register_info(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "describe a model directory or .dgq pack");
  cmd->add_option("-m,--model", o->model,
                  "model directory: a Hugging Face checkpoint or a .dgq pack; " + synthetic_model_pattern() +
                      " describes the full shape with random weights that ask, bench and serve make on a device")
      ->envname("DG_MODEL")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->callback([o] { run_info(*o); });
}

}  // namespace dg::cli
