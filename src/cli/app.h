// The command-line interface: one option table per subcommand, registered on a CLI11 app. Environment variables
// are accepted only as aliases of declared options (DG_MODEL, DG_THREADS, ...), and only here in src/cli/.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_core.h"

namespace dg::cli {

int run(int argc, char** argv);

// Options every model-loading subcommand takes.
struct ModelOptions {
  std::string model;  // add_model_options sets the embedded model (cli/data_paths.h)
  std::string backend = "cpu";
  int device = 0;
  std::optional<int> threads;  // unset: the CPUs this process may use
  std::string precision = "f32";
  std::string kv_precision = "f32";
  int64_t prefill_chunk = 4096;
  bool check_tensors = false;
  bool verify = false;
  bool graphs = true;
  bool early_capture = true;
  bool fused_commit = true;
  std::string expert_act = "auto";
  std::string linear_act = "auto";
  std::string vocab_act = "bf16";
  std::string attention_topk = "off";  // off | dyn | K (attn_topk_from_name)
  std::string tokenizer;               // "": the model directory's
};
void add_model_options(CLI::App* cmd, ModelOptions& o);
EngineOptions engine_options(const ModelOptions& o);

// Thrown by a subcommand that ran to the end but must exit non-zero (smoketest: a prompt failed).
struct CommandExit {
  int code = 0;
};

void register_ask(CLI::App& app);
void register_chat(CLI::App& app);
void register_info(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_bench(CLI::App& app);
void register_smoketest(CLI::App& app);
void register_quantize(CLI::App& app);
void register_serve(CLI::App& app);
void register_replay(CLI::App& app);
void register_golden(CLI::App& app);
void register_campaign(CLI::App& app);
void register_verify(CLI::App& app);

}  // namespace dg::cli
