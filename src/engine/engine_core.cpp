#include "engine/engine_core.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "backend/registry.h"
#include "core/parallel.h"
#include "model/integrity.h"
#include "model/synthetic.h"

namespace dg {

Precision engine_precision(const EngineOptions& opt) {
  return Precision{storage_from_name(opt.precision), storage_from_name(opt.kv_precision)};
}

std::unique_ptr<EngineCore> EngineCore::open(const EngineOptions& opt, const EngineTuning& tuning) {
  if (opt.threads > 0) set_num_threads(opt.threads);
  backend_entry(opt.backend);  // an unknown name fails before the checkpoint is read
  DG_CHECK(opt.context > 0, "the context size must be positive (got {})", opt.context);
  // Bad names fail before the checkpoint is read, too.
  const Precision precision = engine_precision(opt);
  const AttnTopk topk = attn_topk_from_name(opt.attention_topk, "attention_topk");
  if (synthetic_profile(opt.model_dir)) {  // the full shape with random weights: no files, no tokenizer
    DG_CHECK(!opt.verify && !opt.check_tensors,
             "--verify and --check-tensors check a checkpoint's files; '{}' has none (its weights are made on the "
             "device)",
             opt.model_dir);
    return std::unique_ptr<EngineCore>(
        new EngineCore(synthetic_checkpoint(opt.model_dir, tuning.synthetic_layers), opt, tuning, precision, topk));
  }
  Checkpoint ck = Checkpoint::open(opt.model_dir);
  if (opt.verify && ck.pack) verify_pack_checksums(ck);
  if (opt.verify && !ck.pack)
    fmt::print(stderr, "warning: --verify: '{}' is not a .dgq pack; safetensors files store no checksums to check\n",
               ck.dir);
  if (opt.check_tensors) check_weights_finite(ck);
  return std::unique_ptr<EngineCore>(new EngineCore(std::move(ck), opt, tuning, precision, topk));
}

EngineCore::EngineCore(Checkpoint ck, const EngineOptions& opt, const EngineTuning& tuning, Precision precision,
                       AttnTopk topk)
    : ck_(std::move(ck)), opt_(opt), precision_(precision) {
  const std::optional<std::string> synthetic = synthetic_profile(ck_.dir);
  if (!opt.tokenizer.empty()) {
    DG_CHECK(std::filesystem::is_regular_file(opt.tokenizer), "--tokenizer '{}' is not a file", opt.tokenizer);
    tok_ = Tokenizer::load(opt.tokenizer);
    DG_CHECK(tok_->vocab_size() <= ck_.config.vocab,
             "--tokenizer '{}' has {} ids, more than the model's vocabulary of {}", opt.tokenizer,
             tok_->vocab_size(), ck_.config.vocab);
  } else if (const std::string dir_tok = (std::filesystem::path(ck_.dir) / "tokenizer.json").string();
             !synthetic && std::filesystem::exists(dir_tok)) {
    tok_ = Tokenizer::load(dir_tok);
  }
  be_ = make_backend(opt.backend, BackendOptions{precision_, static_cast<float>(ck_.config.rms_eps), opt.device,
                                                tuning.cuda, linear_act_fp8(opt.linear_act)});
  if (synthetic) {
    // Made in memory, never paged from a file: weights beyond what is free would end in the kernel's or the
    // driver's out-of-memory long after the start.
    const int act_bytes = backend_entry(opt.backend).bytes(precision_).act;
    const size_t need = synthetic_weight_bytes(ck_.config, *synthetic, act_bytes);
    const MemoryInfo m = be_->memory_info();
    DG_CHECK(m.free == 0 || need <= m.free,
             "'{}' makes {:.2f} GiB of weights on the {} backend ({} layers; unpacked weights at its activation "
             "precision), but {:.2f} GiB of {:.2f} are free: run it on a GPU that holds it (--backend cuda), or a "
             "slice of its layers (bench --layers N)",
             ck_.dir, need / 1073741824.0, opt.backend, ck_.config.n_layers, m.free / 1073741824.0,
             m.total / 1073741824.0);
  }
  weights_ = synthetic ? synthetic_weights(ck_.config, *be_, tuning.synthetic_seed, *synthetic, tuning.synthetic_peaked)
                       : upload_weights(ck_.weights, *be_);
  set_expert_act(weights_, opt.expert_act);
  check_linear_act(weights_, opt.linear_act);
  set_vocab_act(weights_, *be_, opt.vocab_act);
  model_ = std::make_unique<Model>(ck_.config, weights_, *be_);
  model_->set_prefill_chunk(opt.prefill_chunk);
  model_->set_graphs(opt.graphs);
  model_->set_early_capture(opt.early_capture);
  model_->set_fused_commit(opt.fused_commit);
  model_->set_attention_topk(topk);
}

const Tokenizer& EngineCore::tokenizer() const {
  DG_CHECK(tok_.has_value(), "model directory '{}' has no tokenizer.json (pass token ids with --prompt-ids)", ck_.dir);
  return *tok_;
}

SamplerOptions EngineCore::default_sampler(SamplerProfile profile) const {
  return make_sampler_options(profile, ck_.generation, ck_.config.pad_id, ck_.config.bos_id);
}

KvCache EngineCore::new_cache(int64_t context) const {
  DG_CHECK(context > 0, "the context size must be positive (got {})", context);
  KvOptions o;
  o.ring_slack = opt_.kv_ring_slack;
  be_->configure_kv(o, context);
  return KvCache(ck_.config, o);
}

Session EngineCore::open_session(const SessionOptions& opt) const {
  KvOptions o;
  o.ring_slack = std::max(opt.ring_slack, opt_.kv_ring_slack);
  be_->configure_kv(o, opt_.context);  // as new_cache(): the backend picks storage and device allocation
  return Session(*model_, o);
}

GenerateResult EngineCore::generate(std::span<const int32_t> prompt, const SamplerOptions& opt,
                                    const GenerateEvents* events) const {
  DG_CHECK(!prompt.empty(), "the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    DG_CHECK(prompt[i] >= 0 && prompt[i] < ck_.config.vocab, "prompt token {} at position {} is outside [0, {})",
             prompt[i], i, ck_.config.vocab);
  // The last canvas ends by prompt + max_new_tokens - 1 + canvas (within_positions bounds the budget first).
  const auto p = static_cast<int64_t>(prompt.size());
  const int canvas = ck_.config.canvas;
  const SamplerOptions bounded = within_positions(opt, p, canvas, ck_.config.max_positions);
  KvCache kv = new_cache(std::max(opt_.context, p + bounded.max_new_tokens - 1 + canvas));
  return dg::generate(*model_, kv, prompt, opt, events);
}

}  // namespace dg
