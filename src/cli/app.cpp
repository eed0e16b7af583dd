#include "cli/app.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli/build_info.h"
#include "cli/data_paths.h"
#include "cli/option_checks.h"
#include "cli/option_hints.h"
#include "core/error.h"
#include "model/synthetic.h"

namespace dg::cli {

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  o.model = embedded_model_dir();
  cmd->add_option("-m,--model", o.model,
                  "model directory: a Hugging Face checkpoint or a .dgq pack (default: the embedded model); " +
                      synthetic_model_pattern() +
                      " is the full 26B-A4B shape with random weights made on the device (timing; --prompt-ids, no "
                      "tokenizer, no stop tokens)")
      ->envname("DG_MODEL")
      ->capture_default_str();
  cmd->add_option("--backend", o.backend, "cpu (the reference) | cuda (NVIDIA GPU; needs the cuda preset build)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->envname("DG_BACKEND")
      ->capture_default_str();
  cmd->add_option("--device", o.device, "CUDA device index")->check(non_negative_int())->capture_default_str();
  cmd->add_option("--threads", o.threads,
                  "CPU threads (default: the CPUs this process may use: affinity mask, cgroup quota; more are clamped "
                  "to them)")
      ->check(positive_int())
      ->envname("DG_THREADS");
  cmd->add_option("--precision", o.precision, "activation storage of the CPU reference: f32 | bf16 | f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--kv-precision", o.kv_precision, "KV cache storage: f32 | f16 | bf16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", o.prefill_chunk, "encode prompts longer than this in chunks of this many tokens")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_flag("--check-tensors", o.check_tensors,
                "check that every weight is finite before use (a pass over all of them; packed weights decoded)");
  cmd->add_flag("--verify", o.verify, "check a .dgq pack's per-tensor checksums before use (a pass over the blob)");
  cmd->add_flag("--graphs,!--no-graphs", o.graphs,
                "CUDA: replay denoise steps through captured graphs (default); --no-graphs issues every step op by op "
                "(slower; for A/B and diagnosis)")
      ->check(switch_value());
  cmd->add_flag("--early-capture,!--no-early-capture", o.early_capture,
                "CUDA: capture a block's graphed steps while its first step runs on the device (default); "
                "--no-early-capture captures them after it (A/B, the same tokens)")
      ->check(switch_value());
  cmd->add_flag("--fused-commit,!--no-fused-commit", o.fused_commit,
                "encode each committed block in the forward of the next block's first step (serve's batched worker: in "
                "the round's denoise forward), the weights read once for both (default); --no-fused-commit encodes "
                "it alone (the same tokens)")
      ->check(switch_value());
  cmd->add_option("--expert-act", o.expert_act,
                  "activations of the MoE experts: auto (fp8 for fp8 experts: W8A8 tensor-core products; bf16 "
                  "otherwise) | bf16 | fp8")
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--linear-act", o.linear_act, linear_act_help())
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--vocab-act", o.vocab_act, vocab_act_help())
      ->check(CLI::IsMember({"bf16", "fp8", "fp8-lm-head"}))
      ->capture_default_str();
  cmd->add_option("--attention-topk", o.attention_topk, attention_topk_help())
      ->check(attention_topk_value())
      ->capture_default_str();
  cmd->add_option("--tokenizer", o.tokenizer,
                  "a tokenizer.json to use instead of the model directory's (e.g. for synthetic:26b-a4b, which has "
                  "none: at most the model's 262,144 ids)");
}

EngineOptions engine_options(const ModelOptions& o) {
  // A name that did not come through the option table (replay reads them from an op-log) fails naming the flag.
  storage_from_name(o.precision);
  storage_from_name(o.kv_precision);
  attn_topk_from_name(o.attention_topk, "--attention-topk");
  EngineOptions e;
  e.model_dir = o.model;
  e.backend = o.backend;
  e.device = o.device;
  e.threads = threads_for(o.threads);
  e.precision = o.precision;
  e.kv_precision = o.kv_precision;
  e.prefill_chunk = o.prefill_chunk;
  e.check_tensors = o.check_tensors;
  e.verify = o.verify;
  e.graphs = o.graphs;
  e.early_capture = o.early_capture;
  e.fused_commit = o.fused_commit;
  e.expert_act = o.expert_act;
  e.linear_act = o.linear_act;
  e.vocab_act = o.vocab_act;
  e.attention_topk = o.attention_topk;
  e.tokenizer = o.tokenizer;
  return e;
}

namespace {

// Output that could not be written (a full disk) is an error, never success: a script that saves an answer must not
// find it cut short under exit status 0. Every command writes through stdio (std::cout is synced with it).
int output_checked(int code) {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0 && !std::cout.fail()) return code;
  if (code != 0) return code;
  fmt::print(stderr, "diffgemma: error: the output could not be written in full (standard output: {})\n",
             errno != 0 ? std::strerror(errno) : "a write failed");
  return 1;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"diffgemma: inference engine for DiffusionGemma block-diffusion models", "diffgemma"};
  app.set_version_flag("--version", version_text(), "print the version, commit, backends and build, and exit");
  app.require_subcommand(1);
  register_ask(app);
  register_chat(app);
  register_info(app);
  register_tokenize(app);
  register_bench(app);
  register_smoketest(app);
  register_quantize(app);
  register_serve(app);
  register_replay(app);
  register_golden(app);
  register_campaign(app);
  register_verify(app);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->check_name(argv[1]);
    if (!known) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      fmt::print(stderr, "diffgemma: unknown command '{}' (commands: {}; see --help)\n", argv[1], names);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return output_checked(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return output_checked(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return output_checked(app.exit(e));
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    for (const CLI::App* sub : app.get_subcommands()) {
      if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr)
        for (const std::string& hint : unknown_option_hints(*sub, sub->remaining())) fmt::print(stderr, "{}\n", hint);
      if (const std::string hint = environment_value_hint(*sub, e.what(), argc, argv); !hint.empty())
        fmt::print(stderr, "{}\n", hint);
    }
    return 2;
  } catch (const CommandExit& e) {
    return output_checked(e.code);
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "diffgemma: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "diffgemma: internal error: {}\n", e.what());
    return 3;
  }
  return output_checked(0);
}

}  // namespace dg::cli
