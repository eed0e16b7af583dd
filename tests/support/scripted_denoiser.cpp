#include "support/scripted_denoiser.h"

#include <chrono>
#include <thread>

#include "model/forward.h"

namespace dg::test {

int ScriptedReplyDenoiser::canvas() const { return model_.config().canvas; }
int64_t ScriptedReplyDenoiser::vocab() const { return model_.config().vocab; }
void ScriptedReplyDenoiser::encode(KvCache& kv, std::span<const int32_t> ids) { model_.encode(kv, ids); }

void ScriptedReplyDenoiser::denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind, float, float,
                                    RowStats* stats) {
  if (step_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms_));
  if (start_ < 0) start_ = kv.len();
  const auto at = static_cast<size_t>(kv.len() - start_);
  last_.assign(canvas.size(), filler_);
  for (size_t r = 0; r < canvas.size(); ++r) {
    if (at + r < reply_.size()) last_[r] = reply_[at + r];
    stats[r] = RowStats{last_[r], 0.0f, 1.0f};
  }
}

void ScriptedReplyDenoiser::draw(std::span<const double> u, int32_t* out) {
  for (size_t r = 0; r < u.size(); ++r) out[r] = last_[r];
}

void ScriptedReplyDenoiser::row_logits(int row, std::vector<float>& out) {
  out.assign(static_cast<size_t>(vocab()), 0.0f);
  out[static_cast<size_t>(last_.at(static_cast<size_t>(row)))] = 30.0f;
}

std::vector<int32_t> scripted_reply(const Job& job, const Tokenizer& tok, const ChatTokens& t) {
  auto text = [&](const std::string& s) { return tok.encode(s, SpecialTokens::kPlain); };
  auto join = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const std::vector<Message>& msgs = job.spec.conversation.messages;
  const std::string last = msgs.empty() ? std::string() : msgs.back().content;
  if (job.spec.kind == JobSpec::Kind::kCompletion &&
      tok.decode(job.spec.prompt, false).find("pads") != std::string::npos) {
    const int32_t pad = job.spec.sampler.pad_id, bos = job.spec.sampler.bos_id;
    return join({text("Hello"), {pad, pad}, text(" there"), {bos, pad}, text(", friend."), {t.turn_close}});
  }
  if (job.spec.kind == JobSpec::Kind::kChat && !msgs.empty() && msgs.back().role == Role::kTool)
    return join({text("It is 18 C in Paris."), {t.turn_close}});
  if (last.find("weather") != std::string::npos) {
    // Thinking on, the prompt opened the thought channel; off, the model opens it itself.
    const std::vector<int32_t> open = job.spec.render.thinking ? std::vector<int32_t>{}
                                                               : join({{t.channel_open}, text("thought\n")});
    return join({open, text("The user wants the weather; I will call the tool."), {t.channel_close, t.call_open},
                 text("call:get_weather{city:"), {t.quote}, text("Paris"), {t.quote}, text("}"),
                 {t.call_close, t.response_open}});
  }
  if (last.find("broken call") != std::string::npos)  // a call the parser refuses: no ':' after the key
    return join({text("Let me check."), {t.call_open}, text("call:get_weather{city "), {t.quote}, text("Paris"),
                 {t.quote}, text("}"), {t.call_close}, {t.turn_close}});
  if (last.find("count") != std::string::npos) return join({text("one two three STOP four five"), {t.turn_close}});
  if (last.find("markup") != std::string::npos) return join({text("a <|turn> b"), {t.turn_close}});
  if (last.find("JSON") != std::string::npos)
    return join({text(R"({"city": "Paris", "temp": 18} Done.)"), {t.turn_close}});
  return join({text("Hello from the script."), {t.turn_close}});
}

DenoiserFactory scripted_denoisers(const Tokenizer& tok) {
  const ChatTokens t = ChatTokens::from(tok);
  return [&tok, t](const Model& model, const Job& job) -> std::unique_ptr<Denoiser> {
    const std::vector<Message>& msgs = job.spec.conversation.messages;
    if (!msgs.empty() && msgs.back().content.find("slow") != std::string::npos)
      return std::make_unique<ScriptedReplyDenoiser>(model, std::vector<int32_t>{},
                                                     tok.encode("x", SpecialTokens::kPlain).at(0), 20);
    return std::make_unique<ScriptedReplyDenoiser>(model, scripted_reply(job, tok, t), t.turn_close);
  };
}

}  // namespace dg::test
