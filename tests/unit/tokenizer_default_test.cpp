// The default tokenizer models/dg-tiny/tokenizer.json (scripts/train_tokenizer.py, docs/TOKENIZER.md): it
// loads, keeps the Gemma 4 reserved ids, and round-trips text through encode / decode / StreamDecoder.
#include "unit/tokenizer_test_util.h"

namespace dg::test {
namespace tokenizer_default_test {

using Ids = std::vector<int32_t>;

const std::string kPath = source_path("models/dg-tiny/tokenizer.json");
const std::string kCasesPath = source_path("tests/fixtures/tokenizer/dg_tiny_cases.jsonl");

const Tokenizer& tiny() {
  static const Tokenizer tok = Tokenizer::load(kPath);
  return tok;
}

TEST(TokenizerDefault, ReservedIdsAndLayout) {
  DG_NEED_TEST_FILE(kPath);
  const Tokenizer& tok = tiny();
  EXPECT_EQ(tok.vocab_size(), 4096);
  EXPECT_EQ(tok.bos_id(), 2);
  const std::vector<std::pair<int32_t, std::string>> special = {
      {0, "<pad>"},          {1, "<eos>"},           {2, "<bos>"},          {3, "<unk>"},   {4, "<mask>"},
      {46, "<|tool>"},       {47, "<tool|>"},        {48, "<|tool_call>"},  {49, "<tool_call|>"},
      {50, "<|tool_response>"}, {51, "<tool_response|>"}, {52, "<|\"|>"},    {98, "<|think|>"},
      {100, "<|channel>"},   {101, "<channel|>"},    {105, "<|turn>"},      {106, "<turn|>"}};
  for (const auto& [id, text] : special) {
    EXPECT_EQ(tok.token(id), text);
    EXPECT_TRUE(tok.is_special(id)) << text;
  }
  EXPECT_EQ(tok.token(107), "\n");
  EXPECT_EQ(tok.token(108), "\n\n");
  EXPECT_FALSE(tok.is_special(107));
  EXPECT_EQ(tok.token(5), "<unused0>");
  EXPECT_FALSE(tok.is_special(5));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tok.token(256 + b), fmt::format("<0x{:02X}>", b));
  EXPECT_TRUE(tok.token_id("\xE2\x96\x81").has_value());  // ▁
  EXPECT_EQ(tok.encode(" the"), (Ids{*tok.token_id("\xE2\x96\x81the")}));
}

TEST(TokenizerDefault, RoundTrips) {
  DG_NEED_TEST_FILE(kPath);
  const Tokenizer& tok = tiny();
  const std::vector<std::string> texts = {
      "",
      "The GNU General Public License is a free, copyleft license for software.",
      "  leading and trailing  \n\n\nlines\n",
      "Unicode: \xE4\xB8\xAD\xE6\x96\x87, \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, caf\xC3\xA9, "
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "code:\n\tif (x < 3) { return y; }\n",
      "<bos><|turn>user\nhi<turn|>\n<|channel>thought<channel|><eos>",
  };
  for (const auto& text : texts) {
    const Ids ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text);
    EXPECT_EQ(stream_all(tok, ids), text);
    EXPECT_EQ(tok.decode(tok.encode(text, SpecialTokens::kPlain)), text);
    for (const int32_t id : ids) EXPECT_LT(id, tok.vocab_size());
  }
  const Ids turn = tok.encode("<|turn>user\nhi<turn|>");
  EXPECT_EQ(turn.front(), 105);
  EXPECT_EQ(turn.back(), 106);
  EXPECT_EQ(turn[turn.size() - 2 - tok.encode("hi").size()], 107);  // "\n" is its added token
  const Ids plain = tok.encode("<|turn>user\nhi<turn|>", SpecialTokens::kPlain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 105) + std::count(plain.begin(), plain.end(), 106), 0);
}

// Optional: written with --extra-tokenizer by scripts/make_tokenizer_cases.py.
TEST(TokenizerDefault, MatchesHuggingFaceCases) {
  DG_NEED_TEST_FILE(kPath);
  if (!std::filesystem::exists(kCasesPath)) GTEST_SKIP() << "no " << kCasesPath << " (optional)";
  expect_matches_cases(tiny(), kCasesPath, 2500, 250);
}

}  // namespace tokenizer_default_test
}  // namespace dg::test
