// The public dg::Engine (include/dg/engine.h) over EngineCore: a Request becomes prompt ids (a chat turn rendered
// by the Gemma 4 template, raw text, or ids as given) and SamplerOptions (the profile's defaults on the model's
// generation config, then the named settings through the sampler's settings table); the one-shot generation's
// committed blocks become BlockEvents with their text (ReplyStream for a chat turn, StreamDecoder otherwise, then
// the stop strings), as `diffgemma ask` streams them.
#include "dg/engine.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>

#include "chat/chat_tokens.h"
#include "chat/stop_strings.h"
#include "chat/stream.h"
#include "chat/template.h"
#include "core/error.h"
#include "diffusion/sampler_settings.h"
#include "engine/engine_core.h"

namespace dg {

const char* finish_text(Finish f) {
  switch (f) {
    case Finish::kStop: return "stop";
    case Finish::kLength: return "length";
    case Finish::kCancelled: return "cancelled";
  }
  return "?";
}

namespace {

// The sampler options of a request: the profile's defaults on the model's generation config, then its settings.
SamplerOptions request_sampler_options(const EngineCore& core, const Request& r) {
  SamplerOptions o = core.default_sampler(sampler_profile_from_name(r.sampling.profile));
  for (const auto& [name, value] : r.sampling.settings) {
    const auto* row = std::find_if(std::begin(kSamplerSettings), std::end(kSamplerSettings),
                                   [&](const SamplerSetting& s) { return name == s.name; });
    if (row == std::end(kSamplerSettings)) {
      std::string names;
      for (const SamplerSetting& s : kSamplerSettings) names += std::string(names.empty() ? "" : ", ") + s.name;
      fail("unknown sampler setting '{}' (the settings: {})", name, names);
    }
    DG_CHECK(name != "seed" && name != "max_new_tokens", "sampler setting '{}': set Request::{} instead", name, name);
    DG_CHECK(setting_in_range(*row, value), "sampler setting '{}' = {} is out of range: it must be {}", name, value,
             setting_range_text(*row));
    setting_assign(*row, o, value);
  }
  DG_CHECK(r.max_new_tokens >= 0, "Request::max_new_tokens must be at least 1, or 0 for the model's (got {})",
           r.max_new_tokens);
  if (r.max_new_tokens > 0) o.max_new_tokens = r.max_new_tokens;
  o.seed = r.seed;
  o.validate();
  return o;
}

struct RequestPrompt {
  std::vector<int32_t> ids;
  std::optional<ChatTokens> chat;  // set for a chat turn: the answer is read as a reply
  bool in_thought = false;         // the prompt ends inside an open thought channel
};

RequestPrompt request_prompt(const EngineCore& core, const Request& r) {
  DG_CHECK(r.prompt.empty() != r.prompt_ids.empty(),
           "a request takes its prompt as text or as token ids: set exactly one of Request::prompt and "
           "Request::prompt_ids");
  DG_CHECK(!r.thinking || (!r.prompt.empty() && !r.raw),
           "Request::thinking needs a chat turn: the prompt as text, without Request::raw");
  DG_CHECK(r.stop.empty() || core.has_tokenizer(), "Request::stop needs the model's tokenizer; '{}' has none",
           core.checkpoint().dir);
  RequestPrompt p;
  if (!r.prompt_ids.empty()) {
    p.ids = r.prompt_ids;
    return p;
  }
  const Tokenizer& tok = core.tokenizer();
  if (r.raw) {
    p.ids = tok.encode(r.prompt, SpecialTokens::kMatch);
    return p;
  }
  p.chat = ChatTokens::from(tok);
  Conversation conv;
  conv.messages.push_back(Message{Role::kUser, r.prompt});
  RenderOptions ro;
  ro.thinking = r.thinking;
  const RenderedPrompt rendered = render_chat(conv, ro, tok, *p.chat);
  p.ids = rendered.ids;
  p.in_thought = rendered.end == PromptEnd::kThought;
  return p;
}

// The answer's tokens and text block by block: the block's tokens up to the first stop token and within the budget,
// their text (the reply's content and reasoning for a chat turn), cut before the first stop string.
class AnswerStream {
 public:
  AnswerStream(const EngineCore& core, const RequestPrompt& p, const SamplerOptions& opt, int budget,
               std::vector<std::string> stop)
      : stop_ids_(opt.stop_ids), budget_(budget), stops_(std::move(stop)) {
    if (!core.has_tokenizer()) return;
    if (p.chat) {
      reply_.emplace(core.tokenizer(), *p.chat, opt.stop_ids, p.in_thought);
    } else {
      decoder_.emplace(core.tokenizer(), true);
    }
  }

  BlockEvent push(const BlockInfo& b, std::span<const int32_t> block) {
    BlockEvent e;
    e.block = b.block;
    e.steps = b.steps;
    // A chat turn's reply reads the stop token itself (as `diffgemma ask` feeds it): only the budget cuts.
    const size_t room = static_cast<size_t>(budget_) - std::min(fed_, static_cast<size_t>(budget_));
    const std::span<const int32_t> fed = block.first(std::min(block.size(), room));
    fed_ += fed.size();
    for (int32_t t : block) {
      if (stopped_ || emitted_ >= static_cast<size_t>(budget_)) break;
      if (std::find(stop_ids_.begin(), stop_ids_.end(), t) != stop_ids_.end()) {
        stopped_ = true;
        break;
      }
      e.tokens.push_back(t);
      ++emitted_;
    }
    if (reply_) {
      take(reply_->push(fed), e);
    } else if (decoder_) {
      e.text = stops_.push(decoder_->push(e.tokens));
    }
    text_ += e.text;
    reasoning_ += e.reasoning;
    return e;
  }

  // Ends the answer: the text still held (DoneEvent's).
  DoneEvent finish() {
    BlockEvent tail;
    if (reply_) take(reply_->finish(), tail);
    if (decoder_) tail.text = stops_.push(decoder_->flush());
    DoneEvent done;
    done.text = tail.text + stops_.finish();
    done.reasoning = tail.reasoning;
    text_ += done.text;
    reasoning_ += done.reasoning;
    return done;
  }

  bool stop_string_matched() const { return stops_.stopped(); }
  const std::string& text() const { return text_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  void take(const std::vector<ReplyEvent>& events, BlockEvent& e) {
    std::string content;
    for (const ReplyEvent& r : events) {
      if (r.kind == ReplyEvent::Kind::kContent) content += r.text;
      if (r.kind == ReplyEvent::Kind::kReasoning) e.reasoning += r.text;
    }
    e.text = stops_.push(content);
  }

  std::vector<int32_t> stop_ids_;
  int budget_;
  StopStrings stops_;
  std::optional<ReplyStream> reply_;
  std::optional<StreamDecoder> decoder_;
  size_t fed_ = 0, emitted_ = 0;
  bool stopped_ = false;
  std::string text_, reasoning_;
};

}  // namespace

std::unique_ptr<Engine> Engine::open(const EngineOptions& opt) {
  return std::unique_ptr<Engine>(new Engine(EngineCore::open(opt)));
}

Engine::Engine(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
Engine::~Engine() = default;

ModelInfo Engine::info() const {
  const ModelConfig& c = core_->config();
  return ModelInfo{core_->checkpoint().dir, core_->backend().name(), core_->backend().device_name(), c.vocab,
                   c.canvas,  c.n_layers, c.max_positions, core_->has_tokenizer()};
}

const EngineOptions& Engine::options() const { return core_->options(); }

std::vector<int32_t> Engine::tokenize(std::string_view text, bool special) const {
  return core_->tokenizer().encode(text, special ? SpecialTokens::kMatch : SpecialTokens::kPlain);
}

std::string Engine::detokenize(std::span<const int32_t> ids, bool skip_special) const {
  return core_->tokenizer().decode(ids, skip_special);
}

Result Engine::generate(const Request& request, const EventSink& sink) const {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const RequestPrompt prompt = request_prompt(*core_, request);
  const SamplerOptions opt = request_sampler_options(*core_, request);
  const ModelConfig& cfg = core_->config();
  // The budget as the generation bounds it (the model's positions may cut it); checks the prompt's length first.
  const int budget = within_positions(opt, static_cast<int64_t>(prompt.ids.size()), cfg.canvas, cfg.max_positions)
                         .max_new_tokens;
  AnswerStream answer(*core_, prompt, opt, budget, request.stop);
  Result out;
  out.prompt_tokens = static_cast<int64_t>(prompt.ids.size());
  auto emit = [&](Event e) {
    if (sink.on_event) sink.on_event(e);
  };

  GenerateEvents ev;
  ev.step_rows = false;
  if (sink.on_event) ev.on_prefill = [&](int64_t done, int64_t total) { emit(PrefillEvent{done, total}); };
  bool prompt_timed = false;
  ev.on_encoded = [&](size_t) {
    if (prompt_timed) return;  // later calls: committed blocks
    prompt_timed = true;
    core_->backend().synchronize();  // the prompt's time ends when the device is done with it
    out.timings.prefill_s = since_start();
  };
  ev.on_block = [&](const BlockInfo& b, std::span<const int32_t> block) {
    if (out.timings.first_block_s == 0) out.timings.first_block_s = since_start();
    emit(answer.push(b, block));
  };
  ev.cancel = [&] { return answer.stop_string_matched() || (sink.cancel && sink.cancel()); };
  const GenerateResult res = core_->generate(prompt.ids, opt, &ev);
  DoneEvent done = answer.finish();

  out.tokens = res.tokens;
  out.text = answer.text();
  out.reasoning = answer.reasoning();
  out.finish = answer.stop_string_matched()          ? Finish::kStop
               : res.finish == FinishReason::kStop   ? Finish::kStop
               : res.finish == FinishReason::kLength ? Finish::kLength
                                                     : Finish::kCancelled;
  out.stop_token = res.stop_token;
  out.blocks = static_cast<int>(res.blocks.size());
  out.forwards = res.forwards;
  out.timings.total_s = since_start();
  done.result = out;
  emit(std::move(done));
  return out;
}

}  // namespace dg
