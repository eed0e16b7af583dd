// `diffgemma verify`: checks a model directory without running it — the structure Checkpoint::open validates, a
// .dgq pack's per-tensor checksums, and that every weight is finite (model/integrity.h). Exit 0 when all hold, 1
// with the first problem named.
#include <chrono>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/data_paths.h"
#include "cli/option_checks.h"
#include "core/parallel.h"
#include "model/integrity.h"

namespace dg::cli {
namespace {

struct VerifyOptions {
  std::string model = embedded_model_dir();
  std::optional<int> threads;
  bool json = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_verify(const VerifyOptions& o) {
  set_num_threads(threads_for(o.threads));
  auto t0 = std::chrono::steady_clock::now();
  const Checkpoint ck = Checkpoint::open(o.model);
  const size_t tensors = ck.store.names().size();
  nlohmann::json j = {{"dir", ck.dir}, {"structure", {{"tensors", tensors}, {"seconds", seconds_since(t0)}}}};
  if (!o.json) fmt::print("structure    ok: {} tensors in {} file(s)\n", tensors, ck.store.files().size());
  if (ck.pack) {
    t0 = std::chrono::steady_clock::now();
    const uint64_t bytes = verify_pack_checksums(ck);
    j["checksums"] = {{"tensors", ck.pack->tensors.size()}, {"bytes", bytes}, {"seconds", seconds_since(t0)}};
    if (!o.json)
      fmt::print("checksums    ok: {} tensors, {:.1f} MiB match their XXH3-64\n", ck.pack->tensors.size(),
                 static_cast<double>(bytes) / (1 << 20));
  } else {
    j["checksums"] = nullptr;
    if (!o.json) fmt::print("checksums    none stored (a safetensors checkpoint)\n");
  }
  t0 = std::chrono::steady_clock::now();
  const int64_t values = check_weights_finite(ck);
  j["finite"] = {{"values", values}, {"seconds", seconds_since(t0)}};
  if (o.json) {
    std::cout << j.dump() << "\n";
  } else {
    fmt::print("values       ok: {} weights, all finite\n", values);
  }
}

}  // namespace

void register_verify(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "check a model directory: structure, a .dgq pack's checksums, every weight finite (exit 1 if not)");
  cmd->add_option("-m,--model", o->model, "model directory: a Hugging Face checkpoint or a .dgq pack")
      ->envname("DG_MODEL")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (default: the CPUs this process may use)")
      ->check(positive_int())
      ->envname("DG_THREADS");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] { run_verify(*o); });
}

}  // namespace dg::cli
