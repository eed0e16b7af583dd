// The tokenizer on the real 262,144-token Gemma tokenizer.json: exactness against ids and text produced by
// HF `tokenizers` (tests/fixtures/tokenizer/gemma3_cases.jsonl, written by scripts/make_tokenizer_cases.py),
// plus cases whose ids were cross-checked with transformers.js (@lenml/tokenizers 3.7.2), round trips,
// special-token modes, byte fallback, streaming and long inputs.
#include <random>

#include "unit/tokenizer_test_util.h"

namespace dg::test {
namespace tokenizer_test {

using Ids = std::vector<int32_t>;

const std::string kTokenizerPath = source_path(".cache/test-data/gemma3/tokenizer.json");
const std::string kCasesPath = source_path("tests/fixtures/tokenizer/gemma3_cases.jsonl");

// Loaded once per process (a few seconds).
const Tokenizer& gemma() {
  static const Tokenizer tok = Tokenizer::load(kTokenizerPath);
  return tok;
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Ids byte_ids(const Tokenizer& tok, std::string_view text) {
  Ids out;
  for (const unsigned char c : text) out.push_back(*tok.token_id(fmt::format("<0x{:02X}>", c)));
  return out;
}

TEST(TokenizerGemma, MatchesHuggingFaceCases) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  DG_NEED_TEST_FILE(kCasesPath);
  expect_matches_cases(gemma(), kCasesPath, 2500, 300);
}

TEST(TokenizerGemma, CrossCheckedIds) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  EXPECT_EQ(tok.encode("Hello world"), (Ids{9259, 1902}));
  EXPECT_EQ(tok.encode(" Hello"), (Ids{26352}));
  EXPECT_EQ(tok.encode("<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n"),
            (Ids{105, 2364, 107, 9259, 106, 107, 105, 4368, 107}));
  EXPECT_EQ(tok.encode("\n"), (Ids{107}));
  EXPECT_EQ(tok.encode("\n\n"), (Ids{108}));
  EXPECT_EQ(tok.encode("\t"), (Ids{255968}));
  EXPECT_EQ(tok.encode("a  b"), (Ids{236746, 138, 236763}));
  EXPECT_EQ(tok.encode("</th>x"), (Ids{182, 236781}));
  EXPECT_EQ(tok.encode("\xF0\x9F\x98\x80"), (Ids{242398}));  // 😀
  EXPECT_EQ(tok.encode("\xE4\xB8\xAD\xE6\x96\x87"), (Ids{55041}));  // 中文
  EXPECT_EQ(tok.encode(""), Ids{});
}

TEST(TokenizerGemma, SpecialLiteralsOnlyInMatchMode) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  const std::string prompt = "<bos><start_of_turn>user\nhi<end_of_turn>\n<eos>";
  const Ids matched = tok.encode(prompt);
  const Ids plain = tok.encode(prompt, SpecialTokens::kPlain);
  for (const int32_t id : {2, 105, 106, 1}) {
    EXPECT_NE(std::find(matched.begin(), matched.end(), id), matched.end()) << id;
    EXPECT_EQ(std::find(plain.begin(), plain.end(), id), plain.end()) << id;
    EXPECT_TRUE(tok.is_special(id));
  }
  for (const int32_t id : plain) EXPECT_FALSE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.decode(plain), prompt);  // the literals come back as text
  EXPECT_EQ(tok.decode(matched), prompt);
  EXPECT_EQ(tok.decode(matched, true), "user\nhi\n");
  // Non-special added tokens ("\n", "</th>") are matched in both modes.
  EXPECT_EQ(tok.encode("\n</th>", SpecialTokens::kPlain), (Ids{107, 182}));
  EXPECT_EQ(tok.encode("<start_of_tur"), tok.encode("<start_of_tur", SpecialTokens::kPlain));
  // The literal check: the first special literal, none in plain text or past non-special added tokens.
  EXPECT_EQ(tok.first_special_literal(prompt), std::optional<int32_t>(2));
  EXPECT_EQ(tok.first_special_literal("hi<end_of_turn> and <bos>"), std::optional<int32_t>(106));
  EXPECT_EQ(tok.first_special_literal("\n</th><start_of_tur"), std::nullopt);
  EXPECT_EQ(tok.first_special_literal(""), std::nullopt);
}

TEST(TokenizerGemma, ByteFallbackForUnknownCodepoints) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  const std::string pua = "\xF3\xB0\x80\x80";  // U+F0000, private use: not in the vocab
  ASSERT_FALSE(tok.token_id(pua).has_value());
  EXPECT_EQ(tok.encode(pua), byte_ids(tok, pua));
  EXPECT_EQ(tok.encode(pua), (Ids{481, 414, 366, 366}));
  EXPECT_EQ(tok.decode(tok.encode("a" + pua + "b")), "a" + pua + "b");
  EXPECT_EQ(tok.decode(byte_ids(tok, "\xE4\xB8")), "\xEF\xBF\xBD\xEF\xBF\xBD");  // truncated 中
}

// Deterministic mixed text: words, spaces, newlines, CJK, emoji, private use, special literals.
std::string mixed_text(std::mt19937& rng, size_t n_pieces) {
  static const std::vector<std::string> pieces = {
      "the", " ", "  ", "\n", "\n\n\n", "\t", "Hello", ",", ".", "tokenizer", "\xE4\xB8\xAD\xE6\x96\x87",
      "\xE3\x81\x93\xE3\x82\x93", "\xED\x95\x9C", "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "\xF3\xB0\x80\x80", "\xEE\x80\x80", "e\xCC\x81", "<bos>", "<start_of_turn>", "</th>", "<0x41>", "123",
      "\xEF\xBF\xBD", "{\"a\": [1, 2]}", "def f(x):\n    return x\n", "\xD8\xB3\xD9\x84\xD8\xA7\xD9\x85"};
  std::string out;
  for (size_t i = 0; i < n_pieces; ++i) out += pieces[rng() % pieces.size()];
  return out;
}

TEST(TokenizerGemma, RoundTripAndStream) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  std::mt19937 rng(11);
  for (int n = 0; n < 400; ++n) {
    const std::string text = mixed_text(rng, 1 + rng() % 12);
    const Ids ids = tok.encode(text);
    ASSERT_EQ(tok.decode(ids), text);
    ASSERT_EQ(stream_all(tok, ids), text);
    ASSERT_EQ(tok.decode(tok.encode(text, SpecialTokens::kPlain)), text);
  }
}

TEST(TokenizerGemma, StreamHoldsSplitCharacters) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  const std::string pua = "\xF3\xB0\x80\x80";
  const Ids ids = tok.encode("x" + pua + " y");
  ASSERT_EQ(ids, cat({tok.encode("x"), byte_ids(tok, pua), tok.encode(" y")}));  // x, 4 bytes, ▁y
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(ids[0]), "x");
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(stream.push(ids[i]), "") << i;
  EXPECT_EQ(stream.push(ids[5]), pua + " y");
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(stream.push(std::span<const int32_t>(ids)), "x" + pua + " y");
}

TEST(TokenizerGemma, LongInputsEncode) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  std::mt19937 rng(3);
  std::string text;
  size_t n_chars = 0;
  while (n_chars < 20000) {
    const std::string piece = mixed_text(rng, 1);
    for (const unsigned char c : piece) n_chars += (c & 0xC0) != 0x80;
    text += piece;
  }
  const Ids ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  // One 20,000-character word: no spaces, so no split anywhere before BPE.
  const std::string word(20000, 'a');
  EXPECT_EQ(tok.decode(tok.encode(word)), word);
  std::string cjk;
  for (int i = 0; i < 20000; ++i) cjk += i % 3 ? "\xE4\xB8\xAD" : "\xF3\xB0\x80\x80";
  EXPECT_EQ(tok.decode(tok.encode(cjk)), cjk);
}

TEST(TokenizerGemma, Accessors) {
  DG_NEED_TEST_FILE(kTokenizerPath);
  const Tokenizer& tok = gemma();
  EXPECT_EQ(tok.vocab_size(), 262145);
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.token(2), "<bos>");
  EXPECT_EQ(tok.token(262144), "<image_soft_token>");
  EXPECT_EQ(tok.token(262145), "");
  EXPECT_EQ(tok.token_id("<eos>"), 1);
  EXPECT_EQ(tok.token_id("<0x41>"), 238 + 0x41);
  EXPECT_TRUE(tok.is_special(262144));
  EXPECT_FALSE(tok.is_special(107));
}

}  // namespace tokenizer_test
}  // namespace dg::test
