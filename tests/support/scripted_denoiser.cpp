#include "support/scripted_denoiser.h"

#include <chrono>
#include <thread>

#include "model/forward.h"

namespace dg::test {
namespace {

std::vector<int32_t> join_ids(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// <|tool_call>call:get_weather{KEY:<|"|>Paris<|"|>}<tool_call|><|tool_response>
std::vector<int32_t> weather_call(const Tokenizer& tok, const ChatTokens& t, const std::string& key) {
  auto text = [&](const std::string& s) { return tok.encode(s, SpecialTokens::kPlain); };
  return join_ids({{t.call_open}, text("call:get_weather{" + key + ":"), {t.quote}, text("Paris"), {t.quote},
                   text("}"), {t.call_close, t.response_open}});
}

}  // namespace

int ScriptedReplyDenoiser::canvas() const { return model_.config().canvas; }
int64_t ScriptedReplyDenoiser::vocab() const { return model_.config().vocab; }
void ScriptedReplyDenoiser::encode(KvCache& kv, std::span<const int32_t> ids) { model_.encode(kv, ids); }

void ScriptedReplyDenoiser::denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind, float, float,
                                    RowStats* stats) {
  if (step_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_ms_));
  if (start_ < 0) start_ = kv.len();
  if (kv.len() - start_ > static_cast<int64_t>(replies_[at_reply_].size())) {  // a generation after the reply
    if (at_reply_ + 1 < replies_.size()) ++at_reply_;
    start_ = kv.len();
  }
  const std::vector<int32_t>& reply = replies_[at_reply_];
  const auto at = static_cast<size_t>(kv.len() - start_);
  last_.assign(canvas.size(), filler_);
  for (size_t r = 0; r < canvas.size(); ++r) {
    if (at + r < reply.size()) last_[r] = reply[at + r];
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
  const std::vector<Message>& msgs = job.spec.conversation.messages;
  const std::string last = msgs.empty() ? std::string() : msgs.back().content;
  if (job.spec.kind == JobSpec::Kind::kCompletion &&
      tok.decode(job.spec.prompt, false).find("pads") != std::string::npos) {
    const int32_t pad = job.spec.sampler.pad_id, bos = job.spec.sampler.bos_id;
    return join_ids({text("Hello"), {pad, pad}, text(" there"), {bos, pad}, text(", friend."), {t.turn_close}});
  }
  if (job.spec.kind == JobSpec::Kind::kChat && !msgs.empty() && msgs.back().role == Role::kTool)
    return join_ids({text("It is 18 C in Paris."), {t.turn_close}});
  if (last.find("weather") != std::string::npos) {
    // Thinking on, the prompt opened the thought channel; off, the model opens it itself.
    const std::vector<int32_t> open = job.spec.render.thinking ? std::vector<int32_t>{}
                                                               : join_ids({{t.channel_open}, text("thought\n")});
    return join_ids({open, text("The user wants the weather; I will call the tool."), {t.channel_close, t.call_open},
                 text("call:get_weather{city:"), {t.quote}, text("Paris"), {t.quote}, text("}"),
                 {t.call_close, t.response_open}});
  }
  if (last.find("mend") != std::string::npos || last.find("stubborn") != std::string::npos)
    return weather_call(tok, t, "town");
  if (last.find("broken call") != std::string::npos)  // a call the parser refuses: no ':' after the key
    return join_ids({text("Let me check."), {t.call_open}, text("call:get_weather{city "), {t.quote}, text("Paris"),
                 {t.quote}, text("}"), {t.call_close}, {t.turn_close}});
  if (last.find("count") != std::string::npos) return join_ids({text("one two three STOP four five"), {t.turn_close}});
  if (last.find("markup") != std::string::npos) return join_ids({text("a <|turn> b"), {t.turn_close}});
  if (last.find("JSON") != std::string::npos)
    return join_ids({text(R"({"city": "Paris", "temp": 18} Done.)"), {t.turn_close}});
  return join_ids({text("Hello from the script."), {t.turn_close}});
}

std::vector<std::vector<int32_t>> scripted_replies(const Job& job, const Tokenizer& tok, const ChatTokens& t) {
  std::vector<std::vector<int32_t>> out{scripted_reply(job, tok, t)};
  const std::vector<Message>& msgs = job.spec.conversation.messages;
  if (!msgs.empty() && msgs.back().role == Role::kUser && msgs.back().content.find("mend") != std::string::npos)
    out.push_back(weather_call(tok, t, "city"));
  return out;
}

DenoiserFactory scripted_denoisers(const Tokenizer& tok) {
  const ChatTokens t = ChatTokens::from(tok);
  return [&tok, t](const Model& model, const Job& job) -> std::unique_ptr<Denoiser> {
    const std::vector<Message>& msgs = job.spec.conversation.messages;
    if (!msgs.empty() && msgs.back().content.find("slow") != std::string::npos)
      return std::make_unique<ScriptedReplyDenoiser>(model, std::vector<int32_t>{},
                                                     tok.encode("x", SpecialTokens::kPlain).at(0), 20);
    return std::make_unique<ScriptedReplyDenoiser>(model, scripted_replies(job, tok, t), t.turn_close);
  };
}

}  // namespace dg::test
