// `diffgemma golden`: runs the golden path matrix (engine/golden.h) and compares it with the blessed file, or with
// --bless writes the file anew (after a deliberate change). Exit 4 when a byte differs. Run from the source tree:
//   diffgemma golden -m models/dg-tiny [--backend cuda] [--bless]
// (a GPU backend's file is its card's: tests/fixtures/golden/cuda-nvidia-h200.json on an H200)
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/app.h"
#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/golden.h"
#include "ops/self_cond/self_cond.h"

namespace dg::cli {
namespace {

struct GoldenOptions {
  ModelOptions model;
  std::string file;  // "": golden_file(backend, device)
  std::vector<std::string> only;
  bool bless = false;
  CudaKernels kernels;  // the CUDA kernel choices that move bits, for finding which one moved a card's file
};

void run_golden_cmd(GoldenOptions o) {
  const CudaKernels defaults;
  DG_CHECK(o.model.backend == "cuda" || (o.kernels.row_stats_groups == defaults.row_stats_groups &&
                                         o.kernels.sc_survivors == defaults.sc_survivors),
           "golden: --row-stats-each and --sc-survivors choose CUDA kernels (use --backend cuda)");
  const auto engine = EngineCore::open(engine_options(o.model), EngineTuning{o.kernels});
  if (o.file.empty()) o.file = golden_file(o.model.backend, engine->backend().device_name());
  const Json got = run_golden(*engine, o.only);
  if (o.bless) {
    std::ofstream out(o.file, std::ios::binary);
    DG_CHECK(out.good(), "cannot write the golden file '{}'", o.file);
    out << golden_text(got);
    DG_CHECK(out.good(), "cannot write the golden file '{}'", o.file);
    fmt::print("golden: blessed {} cases into {}\n", got["cases"].size(), o.file);
    return;
  }
  std::ifstream in(o.file, std::ios::binary);
  DG_CHECK(in.good(), "cannot read the golden file '{}' (write it with --bless)", o.file);
  std::stringstream ss;
  ss << in.rdbuf();
  const Json want = Json::parse(ss.str(), nullptr, false);
  DG_CHECK(!want.is_discarded(), "'{}' is not JSON", o.file);
  const std::vector<std::string> diffs = compare_golden(got, want);
  for (const std::string& d : diffs) fmt::print("golden: {}\n", d);
  if (!diffs.empty()) throw CommandExit{4};
  fmt::print("golden: {} cases identical\n", got["cases"].size());
}

}  // namespace

void register_golden(CLI::App& app) {
  auto o = std::make_shared<GoldenOptions>();
  CLI::App* cmd = app.add_subcommand(
      "golden", "run the golden path matrix (token ids and KV fingerprints); exit 4 when a byte differs");
  add_model_options(cmd, o->model);
  cmd->add_option("--file", o->file,
                  "the blessed results (default tests/fixtures/golden/cpu.json; a GPU's: BACKEND-DEVICE.json, "
                  "e.g. cuda-nvidia-h200.json, each card model its own)");
  CLI::Option* only = cmd->add_option("--only", o->only, "run only these cases (repeatable)")
                          ->check(CLI::IsMember(golden_case_names()));
  cmd->add_flag("--bless", o->bless, "write the results as the new golden file (after a deliberate change; the "
                "whole file, so not with --only)")
      ->excludes(only);
  cmd->add_flag("--row-stats-groups,!--row-stats-each", o->kernels.row_stats_groups,
                "CUDA row statistics by groups of entries (the default) or entry by entry (the earlier form: its "
                "entropies differ by about 1e-7), to tell whether a changed file comes from that choice");
  cmd->add_option("--sc-survivors", o->kernels.sc_survivors,
                  "CUDA survivor self-conditioning cap (as bench's; default 512, 0: off)")
      ->check(CLI::Range(0, kSurvivorCapMax));
  cmd->callback([o] { run_golden_cmd(*o); });
}

}  // namespace dg::cli
