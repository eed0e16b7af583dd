// A Denoiser that writes a fixed reply (token ids) into the canvas with full confidence while encoding through the
// real model, so the server, the sessions and the KV caches run for real but the answer is known. `reply_for`
// picks the tests' scripted replies from the request: a tool call, reasoning, text for stop strings.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "chat/chat_tokens.h"
#include "diffusion/generate.h"
#include "serving/worker.h"
#include "io/tokenizer.h"

namespace dg::test {

class ScriptedReplyDenoiser final : public Denoiser {
 public:
  // After the reply, every row is `filler`; each denoise step takes at least `step_ms` (a slow model).
  ScriptedReplyDenoiser(const Model& model, std::vector<int32_t> reply, int32_t filler, int step_ms = 0)
      : model_(model), replies_{std::move(reply)}, filler_(filler), step_ms_(step_ms) {}
  // One reply per generation: a generation that starts past the end of the current reply (a repair, which follows
  // the bad reply and its error responses) writes the next one; the last one repeats.
  ScriptedReplyDenoiser(const Model& model, std::vector<std::vector<int32_t>> replies, int32_t filler)
      : model_(model), replies_(std::move(replies)), filler_(filler), step_ms_(0) {}
  int canvas() const override;
  int64_t vocab() const override;
  void encode(KvCache& kv, std::span<const int32_t> ids) override;
  void denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
               float temperature, RowStats* stats) override;
  void draw(std::span<const double> u, int32_t* out) override;
  void row_logits(int row, std::vector<float>& out) override;  // the scripted token 30, every other 0

 private:
  const Model& model_;
  std::vector<std::vector<int32_t>> replies_;
  size_t at_reply_ = 0;
  int32_t filler_;
  int step_ms_;
  int64_t start_ = -1;  // cache length at the first denoise: reply position 0
  std::vector<int32_t> last_;
};

// The scripted reply for a chat job, chosen by the last message:
//   a tool result                    -> "It is 18 C in Paris."
//   user text containing "weather"   -> reasoning, then call get_weather{city:"Paris"} (ends at <|tool_response>)
//   user text containing "count"     -> "one two three STOP four five"
//   user text containing "markup"    -> text with marker literals as text: "a <|turn> b" (plain characters)
//   user text containing "JSON"      -> '{"city": "Paris", "temp": 18} Done.' (an object, then prose)
//   user text containing "broken call" -> "Let me check." and a malformed call to get_weather
//   user text containing "mend"      -> get_weather{town:"Paris"} (no city: the schema refuses it), then, in the
//                                       generation after it (a repair), get_weather{city:"Paris"}
//   user text containing "stubborn"  -> get_weather{town:"Paris"} in every generation
//   a completion whose prompt says "pads" -> "Hello", <pad> <pad>, " there", <bos> <pad>, ", friend."
//   anything else (and completions)  -> "Hello from the script."
// Every reply but the call ends with <turn|>. A user text containing "slow" gets no reply but endless "x" tokens at
// 20 ms per denoise step (a long job to cancel, time out or queue behind).
std::vector<int32_t> scripted_reply(const Job& job, const Tokenizer& tok, const ChatTokens& t);
// The replies of each generation of the job (one unless the first is to be repaired).
std::vector<std::vector<int32_t>> scripted_replies(const Job& job, const Tokenizer& tok, const ChatTokens& t);
DenoiserFactory scripted_denoisers(const Tokenizer& tok);

}  // namespace dg::test
