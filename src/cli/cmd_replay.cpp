// `diffgemma replay OPLOG`: re-executes a server op-log (`serve --log-dir`) and reports the first divergence:
// a sync that reused or encoded a different number of tokens, a committed token, a finish, a cache fingerprint.
// The model, backend, precisions and attention top-k come from the log's open record unless given.
#include <fstream>

#include <fmt/format.h>

#include "cli/app.h"
#include "core/error.h"
#include "engine/oplog.h"

namespace dg::cli {
namespace {

struct ReplayCliOptions {
  ModelOptions model;
  std::string path;
  CLI::App* cmd = nullptr;
};

Json open_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read the op-log '{}'", path);
  std::string line;
  std::getline(in, line);
  const Json j = Json::parse(line, nullptr, false);
  DG_CHECK(!j.is_discarded() && j.is_object() && j.contains("op") && j["op"] == "open",
           "'{}' does not start with an op-log open record (written by `diffgemma serve --log-dir`, `ask --oplog` "
           "or `chat --oplog`)",
           path);
  // An edited or damaged record is an error naming the field (a wrong type was an internal error).
  for (const char* key : {"model", "backend", "precision", "kv_precision", "attention_topk", "expert_act",
                          "linear_act", "vocab_act", "tokenizer"})
    DG_CHECK(!j.contains(key) || j[key].is_string(), "'{}': the open record's \"{}\" must be a string (got {})", path,
             key, j[key].dump());
  DG_CHECK(!j.contains("context") || j["context"].is_number_integer(),
           "'{}': the open record's \"context\" must be an integer (got {})", path, j["context"].dump());
  return j;
}

int run_replay(ReplayCliOptions& o) {
  const Json open = open_record(o.path);
  if (o.cmd->count("--model") == 0) o.model.model = open.value("model", o.model.model);
  if (o.cmd->count("--backend") == 0) o.model.backend = open.value("backend", o.model.backend);
  if (o.cmd->count("--precision") == 0) o.model.precision = open.value("precision", o.model.precision);
  if (o.cmd->count("--kv-precision") == 0) o.model.kv_precision = open.value("kv_precision", o.model.kv_precision);
  // A log from before the option ran dense attention.
  if (o.cmd->count("--attention-topk") == 0) o.model.attention_topk = open.value("attention_topk", std::string("off"));
  // The operands' choices, which change results (a log from before they were recorded ran the defaults).
  if (o.cmd->count("--expert-act") == 0) o.model.expert_act = open.value("expert_act", std::string("auto"));
  if (o.cmd->count("--linear-act") == 0) o.model.linear_act = open.value("linear_act", std::string("auto"));
  if (o.cmd->count("--vocab-act") == 0) o.model.vocab_act = open.value("vocab_act", std::string("bf16"));
  if (o.cmd->count("--tokenizer") == 0) o.model.tokenizer = open.value("tokenizer", std::string());
  EngineOptions eo = engine_options(o.model);
  eo.context = open.value("context", eo.context);
  const auto engine = EngineCore::open(eo);
  const ReplayReport r = replay_oplog(*engine, o.path);
  if (r.diverged) {
    fmt::print("diverged after {} records ({} generations, {} blocks identical): {}\n", r.records, r.jobs, r.blocks,
               r.divergence);
    return 1;
  }
  fmt::print("identical: {} records, {} generations, {} blocks\n", r.records, r.jobs, r.blocks);
  return 0;
}

}  // namespace

void register_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayCliOptions>();
  CLI::App* cmd = app.add_subcommand("replay", "re-execute a server op-log and report the first divergence");
  o->cmd = cmd;
  add_model_options(cmd, o->model);
  cmd->add_option("oplog", o->path, "op-log file (JSONL written by `diffgemma serve --log-dir`)")->required();
  cmd->callback([o] {
    if (run_replay(*o) != 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace dg::cli
