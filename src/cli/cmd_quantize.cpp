// `diffgemma quantize`: a Hugging Face checkpoint directory to a self-contained .dgq pack (src/model/quantize.h).
#include <sys/resource.h>

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/option_checks.h"
#include "cli/progress.h"
#include "core/parallel.h"
#include "model/quantize.h"
#include "quant/policy.h"

namespace dg::cli {
namespace {

struct QuantizeCliOptions {
  QuantizeOptions q;
  std::optional<int> threads;  // unset: the CPUs this process may use
  bool quiet = false;
};

std::string mib(uint64_t b) { return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1 << 20)); }

void run_quantize(const QuantizeCliOptions& o) {
  set_num_threads(threads_for(o.threads));
  const auto t0 = std::chrono::steady_clock::now();
  ByteProgress bar(o.quiet, "quantize");
  uint64_t source_bytes = 0;
  const PackManifest m = quantize_model(o.q, [&](uint64_t done, uint64_t total) {
    source_bytes = total;
    bar.update(done, total);
  });
  bar.finish();
  if (o.quiet) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, std::pair<int, uint64_t>> by_class;  // tensors, bytes
  for (const PackEntry& e : m.tensors) {
    by_class[e.cls].first += 1;
    by_class[e.cls].second += e.bytes;
  }
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  fmt::print(stderr, "wrote {}: profile {}, {} tensors, {} from {} in {:.1f} s, peak RSS {}\n", o.q.out_dir, m.profile,
             m.tensors.size(), mib(m.blob_bytes), mib(source_bytes), s,
             mib(static_cast<uint64_t>(ru.ru_maxrss) * 1024));
  for (const auto& [cls, fmt_name] : m.classes) {
    auto it = by_class.find(cls);
    if (it == by_class.end()) continue;
    fmt::print(stderr, "  {:<16} {:<6} {:>4} tensors {:>12}\n", cls, fmt_name, it->second.first,
               mib(it->second.second));
  }
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "write a quantized .dgq pack from a Hugging Face checkpoint");
  // An empty path is a usage error: an empty -o wrote the whole pack beside the working directory before the rename
  // failed with a filesystem message.
  const CLI::Validator not_empty(
      [](const std::string& v) { return v.empty() ? std::string("the value is empty: name a directory") : ""; }, "");
  cmd->add_option("-m,--model", o->q.model_dir, "Hugging Face checkpoint directory")->required()->check(not_empty);
  cmd->add_option("-o,--out", o->q.out_dir, "pack directory to create")->required()->check(not_empty);
  cmd->add_option("--profile", o->q.profile,
                  "experts format: q4 | q6 | nvfp4 | fp8 (sc is q8, attention and dense raw) | fp8-all (experts, "
                  "attention, dense and sc fp8)")
      ->check(CLI::IsMember({"q4", "q6", "nvfp4", "fp8", "fp8-all"}))
      ->capture_default_str();
  cmd->add_option("--set", o->q.sets,
                  "CLASS=FORMAT override, repeatable; classes experts, experts.gate_up, experts.down, attn, dense, sc; "
                  "formats raw, q8, q6, q4, nvfp4, fp8")
      ->take_all();
  cmd->add_flag("--force", o->q.force, "replace an existing pack at --out");
  cmd->add_option("--threads", o->threads,
                  "CPU threads (default: the CPUs this process may use: affinity mask, cgroup quota; more are clamped "
                  "to them)")
      ->check(positive_int())
      ->envname("DG_THREADS");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress or summary");
  cmd->callback([o] {
    try {  // --set is checked as the command line is, before anything is read: a bad one is a usage error
      make_quant_policy(o->q.profile, o->q.sets);
    } catch (const Error& e) {
      throw CLI::ValidationError(std::string(e.what()));
    }
    run_quantize(*o);
  });
}

}  // namespace dg::cli
