// A chat turn that no longer fits the model's positions (max_position_embeddings): the new message alone or the
// history with it is a dg::Error that says so and what to do, and the conversation and its cache stay as they were,
// so the session goes on (a shorter message, or a clear). The same holds for changes that generate nothing (a
// message, a system prompt, tools added as they are): refused and undone. An answer stops within the chat's context.
// A turn reports its prefill chunk by chunk. The embedded model with a 160-position config keeps every turn short.
#include <gtest/gtest.h>

#include "chat_test_util.h"
#include "core/error.h"
#include "engine/chat.h"
#include "support/embedded_copy.h"
#include "support/expect_error.h"

namespace dg::test {
namespace chat_context_test {

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += " river";  // one token each
  return s;
}

// The embedded model with 160 positions, a cache of `context` tokens (0: the default), prefill in chunks of 16.
std::unique_ptr<EngineCore> small_engine(int64_t context = 0) {
  EngineOptions eo;
  eo.model_dir = embedded_model_with_positions(160);
  eo.prefill_chunk = 16;
  if (context > 0) eo.context = context;
  return EngineCore::open(eo);
}

// Two steps a block, answers of up to `max_new` tokens.
ChatOptions quick(const EngineCore& engine, int max_new = 8) {
  ChatOptions co;
  co.sampler = engine.default_sampler(SamplerProfile::kContract);
  co.sampler.steps = 2;
  co.sampler.max_new_tokens = max_new;
  return co;
}

TEST(ChatContext, ATurnBeyondThePositionsIsAnErrorAndTheSessionGoesOn) {
  const auto engine = small_engine();
  ChatSession chat(*engine, quick(*engine));
  const int64_t empty = chat.kv_tokens();

  // The message alone is too long.
  DG_EXPECT_ERROR(chat.user(words(200)), "no longer fits", "160 positions", "max_position_embeddings",
                  "clear or rewind the conversation", "shorter message");
  EXPECT_TRUE(chat.conversation().messages.empty());
  EXPECT_EQ(chat.kv_tokens(), empty);

  // A turn that fits, its prefill reported chunk by chunk.
  std::vector<std::pair<int64_t, int64_t>> calls;
  ChatEvents ev;
  ev.on_prefill = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  const TurnResult first = chat.user(words(60), &ev);
  ASSERT_GT(first.prompt.encoded, 32);
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(calls.front(), std::make_pair(int64_t{0}, first.prompt.encoded));
  EXPECT_EQ(calls[1], std::make_pair(int64_t{16}, first.prompt.encoded));
  EXPECT_EQ(calls.back(), std::make_pair(first.prompt.encoded, first.prompt.encoded));
  EXPECT_EQ(calls.size(), 2 + static_cast<size_t>((first.prompt.encoded - 1) / 16));

  // The history with the next message no longer fits: the error, then the session as it was.
  const uint64_t fp = chat.fingerprint();
  const int64_t kv = chat.kv_tokens();
  DG_EXPECT_ERROR(chat.user(words(60)), "no longer fits", "160 positions", "32-token canvas",
                  "at most 128 fit");
  EXPECT_EQ(chat.conversation().messages.size(), 2u);
  EXPECT_EQ(chat.kv_tokens(), kv);
  EXPECT_EQ(chat.fingerprint(), fp);
  const TurnResult short_one = chat.user("hi");  // a shorter message still fits
  EXPECT_EQ(short_one.prompt.reused, kv);
  chat.clear();  // and after a clear, the long one does
  const TurnResult again = chat.user(words(60));
  EXPECT_EQ(again.prompt.reused, empty);
}

// The chat's own context (--ctx, EngineOptions::context) below the model's positions binds the same way, and the
// error says which limit it was and how to raise it.
TEST(ChatContext, TheChatsContextBindsBelowThePositions) {
  const auto engine = small_engine(96);
  ChatSession chat(*engine, quick(*engine));
  const int64_t empty = chat.kv_tokens();
  DG_EXPECT_ERROR(chat.user(words(60)), "no longer fits", "context (--ctx) holds 96 tokens", "at most 64 fit",
                  "larger --ctx (the model takes up to 160)");
  EXPECT_TRUE(chat.conversation().messages.empty());
  EXPECT_EQ(chat.kv_tokens(), empty);
  chat.user(words(20));  // what fits still runs
  EXPECT_EQ(chat.conversation().messages.size(), 2u);
}

// Changes that generate nothing are held to the same context when the cache settles on them: one that does not fit
// is an error, and the conversation, the options and the cache are as they were before it (the CPU cache would
// otherwise grow past --ctx, and a device cache, sized to it, refuse the write after the change was made).
TEST(ChatContext, AChangeThatDoesNotFitIsUndone) {
  const auto engine = small_engine(96);
  ChatSession chat(*engine, quick(*engine));
  chat.user(words(20));
  const size_t messages = chat.conversation().messages.size();
  const int64_t kv = chat.kv_tokens();
  const uint64_t fp = chat.fingerprint();
  Message m;
  m.role = Role::kUser;
  m.content = words(120);
  chat.add_message(m);
  DG_EXPECT_ERROR(chat.settle(), "no longer fits", "context (--ctx) holds 96 tokens", "the change was undone");
  EXPECT_EQ(chat.conversation().messages.size(), messages);
  EXPECT_EQ(chat.kv_tokens(), kv);
  EXPECT_EQ(chat.fingerprint(), fp);
  chat.set_system(words(100));
  DG_EXPECT_ERROR(chat.settle(), "no longer fits", "the change was undone");
  EXPECT_EQ(chat.conversation().messages.size(), messages);
  EXPECT_NE(chat.conversation().messages.front().role, Role::kSystem);
  EXPECT_EQ(chat.fingerprint(), fp);
  chat.set_system("Be brief.");  // what fits still settles
  EXPECT_NO_THROW(chat.settle());
  EXPECT_EQ(chat.conversation().messages.size(), messages + 1);
}

// An answer stops where the chat's context ends, not the model's positions: its blocks stay within the cache.
TEST(ChatContext, AnAnswerStopsWithinTheChatsContext) {
  const auto engine = small_engine(96);
  ChatOptions co = quick(*engine, 200);
  co.sampler.stop_ids = {};  // no stop token: the answer runs to its budget
  ChatSession chat(*engine, co);
  const TurnResult r = chat.user(words(20));
  // The last block's canvas, at the prompt plus the answer before it, ends within the 96 positions: the answer
  // has at most 96 - prompt - 32 + 1 tokens (the model's 160 positions alone would allow far more).
  const int64_t prompt = r.prompt.reused + r.prompt.encoded;
  EXPECT_EQ(r.finish, "length");
  EXPECT_LE(prompt + r.tokens + 32 - 1, 96) << "prompt " << prompt << ", answer " << r.tokens;
}

}  // namespace chat_context_test
}  // namespace dg::test
