// The streaming decoder: append-only deltas whose concatenation is the parsed reply, whatever the block
// boundaries; never half a UTF-8 character; a fuzz loop (random and mutated outputs, random chunking) that must
// never crash and must keep those invariants (60 s under AddressSanitizer, a few seconds otherwise).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "chat/id_writer.h"
#include "chat/stream.h"
#include "chat/tools_parse.h"
#include "chat/tools_render.h"
#include "chat_test_util.h"

namespace dg::test {
namespace reply_stream_test {

const std::vector<int32_t> kStops = {1, 106, 50};

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

struct Streamed {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
  std::vector<ToolCallError> errors;
};

// Streams ids in chunks cut at the given points; checks every delta on the way.
Streamed stream(const std::vector<int32_t>& ids, const std::vector<size_t>& cuts, bool in_thought) {
  ReplyStream s(tiny_tokenizer(), tiny_chat_tokens(), kStops, in_thought);
  Streamed out;
  auto take = [&](const std::vector<ReplyEvent>& events) {
    for (const ReplyEvent& e : events) {
      switch (e.kind) {
        case ReplyEvent::Kind::kContent: out.content += e.text; break;
        case ReplyEvent::Kind::kReasoning: out.reasoning += e.text; break;
        case ReplyEvent::Kind::kToolCall: out.calls.push_back(e.call); break;
        case ReplyEvent::Kind::kToolError: out.errors.push_back(e.error); break;
      }
      if (e.kind == ReplyEvent::Kind::kContent || e.kind == ReplyEvent::Kind::kReasoning) {
        EXPECT_FALSE(e.text.empty());
        EXPECT_TRUE(valid_utf8(e.text)) << "a delta splits a character";
      }
    }
  };
  size_t at = 0;
  for (size_t c : cuts) {
    c = std::min(c, ids.size());
    if (c < at) continue;
    take(s.push(std::span<const int32_t>(ids).subspan(at, c - at)));
    at = c;
  }
  take(s.push(std::span<const int32_t>(ids).subspan(at)));
  take(s.finish());
  return out;
}

void expect_consistent(const std::vector<int32_t>& ids, const std::vector<size_t>& cuts, bool in_thought) {
  const Reply whole = parse_reply(ids, tiny_tokenizer(), tiny_chat_tokens(), kStops, in_thought);
  const Streamed s = stream(ids, cuts, in_thought);
  ASSERT_EQ(s.content, whole.content);
  ASSERT_EQ(s.reasoning, whole.reasoning);
  ASSERT_EQ(s.calls.size(), whole.tool_calls.size());
  ASSERT_EQ(s.errors.size(), whole.errors.size());
  for (size_t i = 0; i < s.errors.size(); ++i) ASSERT_EQ(s.errors[i].raw, whole.errors[i].raw);
  ASSERT_TRUE(valid_utf8(whole.content) && valid_utf8(whole.reasoning));
  for (const ToolCall& c : whole.tool_calls) (void)c.arguments.dump();  // valid JSON text, never a throw
}

std::vector<int32_t> sample_output() {
  std::vector<int32_t> ids;
  auto t = [&](const std::string& s) {
    for (int32_t id : plain(s)) ids.push_back(id);
  };
  t("Reasoning with émoji 🚀 and 日本語.\n");
  ids.push_back(101);
  t("  The answer: ça va — ");
  IdWriter w(tiny_tokenizer(), tiny_chat_tokens());
  ToolCall c;
  c.name = "lookup";
  c.arguments = Json::parse(R"({"q":"naïve 🚀","n":[1,2.5,{"deep":null}]})");
  render_call(w, c);
  for (int32_t id : w.take()) ids.push_back(id);
  t(" done ");
  ids.push_back(106);
  t("ignored");
  return ids;
}

TEST(ReplyStream, DeltasAreTheParsedReplyForEveryChunking) {
  const std::vector<int32_t> ids = sample_output();
  for (size_t k = 0; k <= ids.size(); ++k) expect_consistent(ids, {k}, true);  // every single cut
  std::vector<size_t> every;
  for (size_t k = 0; k <= ids.size(); ++k) every.push_back(k);
  expect_consistent(ids, every, true);  // one token at a time
  const Reply r = parse_reply(ids, tiny_tokenizer(), tiny_chat_tokens(), kStops, true);
  EXPECT_EQ(r.reasoning, "Reasoning with émoji 🚀 and 日本語.");
  EXPECT_EQ(r.content, "The answer: ça va —  done");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments["q"], "naïve 🚀");
}

TEST(ReplyStream, SplitCharactersWaitForTheirLastByte) {
  // "é" as two byte-fallback tokens (<0xC3> <0xA9>) pushed in separate blocks.
  const Tokenizer& tok = tiny_tokenizer();
  const auto c3 = tok.token_id("<0xC3>"), a9 = tok.token_id("<0xA9>");
  ASSERT_TRUE(c3 && a9);
  ReplyStream s(tok, tiny_chat_tokens(), kStops, false);
  const std::vector<int32_t> a = plain("caf"), b = {*c3}, c = {*a9};
  std::string got;
  for (const auto* part : {&a, &b, &c})
    for (const ReplyEvent& e : s.push(*part)) {
      EXPECT_TRUE(valid_utf8(e.text));
      got += e.text;
    }
  for (const ReplyEvent& e : s.finish()) got += e.text;
  EXPECT_EQ(got, "café");
}

TEST(ReplyStream, TrailingWhitespaceWaitsForMoreText) {
  ReplyStream s(tiny_tokenizer(), tiny_chat_tokens(), kStops, false);
  std::string first;
  for (const ReplyEvent& e : s.push(plain("Hello  "))) first += e.text;
  EXPECT_EQ(first, "Hello");
  std::string second;
  for (const ReplyEvent& e : s.push(plain("world\n\n"))) second += e.text;
  for (const ReplyEvent& e : s.finish()) second += e.text;
  EXPECT_EQ(second, "  world");
}

// Random outputs: markers, text, byte-fallback fragments, any id; and mutations of a valid output.
TEST(ReplyFuzz, RandomAndMutatedOutputsNeverCrash) {
#if defined(__SANITIZE_ADDRESS__)
  const auto budget = std::chrono::seconds(60);
#else
  const auto budget = std::chrono::seconds(3);
#endif
  const Tokenizer& tok = tiny_tokenizer();
  const ChatTokens& t = tiny_chat_tokens();
  const std::vector<int32_t> markers = {t.bos, t.eos, t.turn_open, t.turn_close, t.channel_open, t.channel_close,
                                        t.think, t.tool_open, t.tool_close, t.call_open, t.call_close,
                                        t.response_open, t.response_close, t.quote, 0, 107, 108};
  const std::vector<int32_t> seed_ids = sample_output();
  std::vector<int32_t> syntax;
  for (const char* s : {"call:", "f", "{", "}", "[", "]", ",", ":", "1", "-2.5e3", "true", "None", " ", "key"})
    for (int32_t id : plain(s)) syntax.push_back(id);
  std::mt19937_64 rng(20261129);
  auto pick = [&](const std::vector<int32_t>& v) { return v[rng() % v.size()]; };
  const auto start = std::chrono::steady_clock::now();
  int64_t runs = 0;
  while (std::chrono::steady_clock::now() - start < budget) {
    std::vector<int32_t> ids;
    if (rng() % 2 == 0) {
      const size_t n = rng() % 64;
      for (size_t i = 0; i < n; ++i) {
        switch (rng() % 5) {
          case 0: ids.push_back(pick(markers)); break;
          case 1: ids.push_back(pick(syntax)); break;
          case 2: ids.push_back(256 + static_cast<int32_t>(rng() % 256)); break;  // byte fallback
          case 3: ids.push_back(t.quote); break;
          default: ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(tok.vocab_size() + 8)) - 4);
        }
      }
    } else {
      ids = seed_ids;
      const int edits = 1 + static_cast<int>(rng() % 6);
      for (int e = 0; e < edits && !ids.empty(); ++e) {
        const size_t at = rng() % ids.size();
        switch (rng() % 3) {
          case 0: ids.erase(ids.begin() + static_cast<long>(at)); break;
          case 1: ids.insert(ids.begin() + static_cast<long>(at), rng() % 2 ? pick(markers) : pick(syntax)); break;
          default: ids[at] = rng() % 2 ? pick(markers) : 256 + static_cast<int32_t>(rng() % 256);
        }
      }
    }
    std::vector<size_t> cuts;
    for (size_t k = 0; k < 3; ++k) cuts.push_back(ids.empty() ? 0 : rng() % (ids.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    const bool in_thought = rng() % 2;
    expect_consistent(ids, cuts, in_thought);
    if (::testing::Test::HasFatalFailure()) {
      std::string dump;
      for (int32_t id : ids) dump += std::to_string(id) + " ";
      FAIL() << "input: " << dump;
    }
    // The call parser alone, on raw bodies.
    const CallParse p = parse_call(ids, tok, t);
    if (p.ok) (void)p.call.arguments.dump();
    ++runs;
  }
  EXPECT_GT(runs, 1000);
}

}  // namespace reply_stream_test
}  // namespace dg::test
