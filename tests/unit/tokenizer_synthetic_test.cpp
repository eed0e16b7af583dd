// Tokenizer behaviour on small tokenizer.json files built here: BPE merge order, byte fallback and <unk>,
// added-token matching (leftmost-longest, single_word, lstrip/rstrip, normalized, special in kPlain),
// normalizer and Split behaviours, decoder steps, StreamDecoder == decode, and load/encode errors.
// Expected values follow HF tokenizers semantics (its own unit tests where one exists, cited by name).
#include <random>

#include "unit/tokenizer_test_util.h"

namespace dg::test {
namespace tokenizer_synthetic_test {

using nlohmann::json;
using Ids = std::vector<int32_t>;

std::vector<std::string> chars_of(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// One id per character of s, looked up in tok (each character must be a token).
Ids char_ids(const Tokenizer& tok, std::string_view s) {
  Ids out;
  for (const auto& c : chars_of(s)) {
    const auto id = tok.token_id(c);
    EXPECT_TRUE(id.has_value()) << "no token for '" << c << "'";
    out.push_back(id.value_or(-1));
  }
  return out;
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Every distinct character of `text` as a token, in first-seen order.
std::vector<std::string> char_vocab(std::string_view text) {
  std::vector<std::string> out;
  for (auto& c : chars_of(text)) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

json replace_step(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

json split_step(const std::string& pattern, const std::string& behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"String", pattern}}}, {"behavior", behavior}, {"invert", invert}};
}

TEST(TokenizerSynthetic, MergesApplyLowestRankFirst) {
  const auto tok = load_json(bpe_json({"a", "b", "c", "ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  EXPECT_EQ(tok.encode("abc"), (Ids{5}));  // b+c (rank 0) first, then a+bc
  const auto no_abc = load_json(bpe_json({"a", "b", "c", "ab", "bc"}, {{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(no_abc.encode("abc"), (Ids{3, 2}));  // a+b wins; "ab"+"c" is not a merge
  const auto tie = load_json(bpe_json({"a", "aa"}, {{"a", "a"}}));
  EXPECT_EQ(tie.encode("aaa"), (Ids{1, 0}));  // equal ranks: leftmost first
  EXPECT_EQ(tie.encode("aaaa"), (Ids{1, 1}));
  const auto unlisted = load_json(bpe_json({"a", "b", "ab"}));
  EXPECT_EQ(unlisted.encode("ab"), (Ids{0, 1}));  // "ab" is in the vocab but no merge makes it
}

TEST(TokenizerSynthetic, MergesAsStrings) {
  auto j = bpe_json({"a", "b", "c", "ab", "bc", "abc"});
  j["model"]["merges"] = {"#version: 0.2", "b c", "a b", "a bc"};
  EXPECT_EQ(load_json(j).encode("abc"), (Ids{5}));
  j["model"]["merges"] = {"a b c"};
  EXPECT_NE(error_of([&] { load_json(j); }).find("a b c"), std::string::npos);
}

TEST(TokenizerSynthetic, ByteFallbackAndUnk) {
  auto tokens = std::vector<std::string>{"<unk>", "a"};
  for (const auto& b : byte_tokens()) tokens.push_back(b);
  auto j = bpe_json(tokens);
  j["model"]["byte_fallback"] = true;
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load_json(j).encode("a\xC3\xA9"), (Ids{1, 2 + 0xC3, 2 + 0xA9}));  // "aé"

  auto unk = bpe_json({"<unk>", "a"});
  unk["model"]["unk_token"] = "<unk>";
  unk["model"]["fuse_unk"] = true;
  EXPECT_EQ(load_json(unk).encode("a\xC3\xA9\xC3\xA9"), (Ids{1, 0}));  // HF test_unk_get_fused
  EXPECT_EQ(load_json(unk).encode("\xC3\xA9" "a\xC3\xA9"), (Ids{0, 1, 0}));
  unk["model"]["fuse_unk"] = false;
  EXPECT_EQ(load_json(unk).encode("a\xC3\xA9\xC3\xA9"), (Ids{1, 0, 0}));  // HF test_unk_not_fused
  unk["model"]["unk_token"] = nullptr;
  EXPECT_EQ(load_json(unk).encode("a\xC3\xA9"), (Ids{1}));  // no unk token: the character is dropped

  // A character whose bytes are not all tokens becomes <unk>; as in HF BPE::merge_word a pending <unk> is
  // only emitted when a character found in the vocab (or the end) follows, after byte-fallback symbols.
  auto partial = bpe_json({"<unk>", "a", "<0xC3>", "<0xA9>"});
  partial["model"]["byte_fallback"] = true;
  partial["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load_json(partial).encode("\xC3\xBC\xC3\xA9"), (Ids{2, 3, 0}));  // "üé"
  EXPECT_EQ(load_json(partial).encode("\xC3\xBC" "a"), (Ids{0, 1}));
}

TEST(TokenizerSynthetic, AddedTokensLeftmostLongest) {
  auto j = bpe_json({"x", "a", "b", "c", "d"});
  j["added_tokens"] = {added_token(5, "ab", false), added_token(6, "abc", false), added_token(7, "bcd", false)};
  const auto tok = load_json(j);
  EXPECT_EQ(tok.encode("xabcd"), (Ids{0, 6, 4}));
  EXPECT_EQ(tok.encode("xbcd"), (Ids{0, 7}));
  EXPECT_EQ(tok.encode("abab"), (Ids{5, 5}));
}

TEST(TokenizerSynthetic, AddedTokenSingleWord) {  // HF added_vocabulary test_single_word_is_correct
  const std::string text = "<mask> My name <mask> A<mask> <mask>ony <mask>";
  auto j = bpe_json(char_vocab(text));
  auto mask = added_token(100, "<mask>", false);
  mask["single_word"] = true;
  j["added_tokens"] = {mask};
  const auto tok = load_json(j);
  const int32_t m = *tok.token_id("<mask>");
  EXPECT_EQ(tok.encode(text), cat({{m}, char_ids(tok, " My name "), {m}, char_ids(tok, " A<mask> <mask>ony "), {m}}));
}

TEST(TokenizerSynthetic, AddedTokenStripsSpaces) {  // HF added_vocabulary test_lstrip_unicode_space
  const std::string text = "Hi <mask> there\t<mask>\t<mask>\u2000";
  auto j = bpe_json(char_vocab(text));
  auto mask = added_token(100, "<mask>", false);
  mask["single_word"] = mask["lstrip"] = mask["rstrip"] = true;
  j["added_tokens"] = {mask};
  const auto tok = load_json(j);
  const int32_t m = *tok.token_id("<mask>");
  EXPECT_EQ(tok.encode(text), cat({char_ids(tok, "Hi"), {m}, char_ids(tok, "there"), {m, m}}));
}

TEST(TokenizerSynthetic, NormalizedAddedTokensMatchAfterNormalizing) {
  auto j = bpe_json({"x", "a", "b", "y", "q", "r", "\xE2\x96\x81"});
  j["normalizer"] = replace_step(" ", "\xE2\x96\x81");
  j["added_tokens"] = {added_token(7, "a b", false, true), added_token(8, "q r", false, false)};
  const auto tok = load_json(j);
  EXPECT_EQ(tok.encode("xa byq r"), (Ids{0, 7, 3, 8}));
  EXPECT_EQ(tok.encode("a  b"), (Ids{1, 6, 6, 2}));
}

TEST(TokenizerSynthetic, NormalizerRunsOnEachPiece) {
  auto j = bpe_json({"\xE2\x96\x81", "h", "i", "<", "s", ">"});
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}}}};
  j["added_tokens"] = {added_token(6, "<s>", true)};
  const auto tok = load_json(j);
  EXPECT_EQ(tok.encode("<s>hi"), (Ids{6, 0, 1, 2}));
  EXPECT_EQ(tok.encode("hi<s>hi"), (Ids{0, 1, 2, 6, 0, 1, 2}));
  EXPECT_EQ(tok.encode(""), Ids{});
}

TEST(TokenizerSynthetic, SplitBehaviors) {
  auto j = bpe_json({"a", "-", "a-", "-a"}, {{"a", "-"}, {"-", "a"}});
  EXPECT_EQ(load_json(j).encode("a-a"), (Ids{2, 0}));
  const auto with = [&](const json& pre) {
    auto k = j;
    k["pre_tokenizer"] = pre;
    return load_json(k);
  };
  EXPECT_EQ(with(split_step("-", "Removed")).encode("a-a"), (Ids{0, 0}));
  EXPECT_EQ(with(split_step("-", "Isolated")).encode("a-a"), (Ids{0, 1, 0}));
  EXPECT_EQ(with(split_step("-", "MergedWithPrevious")).encode("a-a"), (Ids{2, 0}));
  EXPECT_EQ(with(split_step("-", "MergedWithNext")).encode("a-a"), (Ids{0, 3}));
  EXPECT_EQ(with(split_step("-", "MergedWithNext")).encode("a--a"), (Ids{0, 1, 3}));
  EXPECT_EQ(with(split_step("-", "Contiguous")).encode("a--a"), (Ids{0, 1, 1, 0}));
  EXPECT_EQ(with(split_step("a", "Removed", true)).encode("a-a"), (Ids{0, 0}));
  const json seq = {{"type", "Sequence"}, {"pretokenizers", {split_step("x", "Removed"), split_step("-", "Isolated")}}};
  EXPECT_EQ(with(seq).encode("a-a"), (Ids{0, 1, 0}));
}

TEST(TokenizerSynthetic, SpecialTokensInPlainMode) {
  auto j = bpe_json({"<", "s", ">", "x", "a", "b"});
  j["added_tokens"] = {added_token(6, "<s>", true), added_token(7, "<x>", false), added_token(8, "<ab>", true),
                       added_token(9, "b>", false)};
  const auto tok = load_json(j);
  EXPECT_EQ(tok.encode("<s><x>"), (Ids{6, 7}));
  EXPECT_EQ(tok.encode("<s><x>", SpecialTokens::kPlain), (Ids{0, 1, 2, 7}));
  EXPECT_EQ(tok.encode("<ab>"), (Ids{8}));
  // The matcher consumes the special literal and leaves it as text (HF encode_special_tokens): the
  // non-special "b>" inside it is not matched.
  EXPECT_EQ(tok.encode("<ab>", SpecialTokens::kPlain), (Ids{0, 4, 5, 2}));
  EXPECT_EQ(tok.encode("xb>", SpecialTokens::kPlain), (Ids{3, 9}));
}

json gemma_decoder() {
  return {{"type", "Sequence"},
          {"decoders", {replace_step("\xE2\x96\x81", " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
}

TEST(TokenizerSynthetic, DecoderByteFallbackRule) {  // HF decoders/byte_fallback.rs tests
  auto tokens = byte_tokens();
  tokens.push_back("\xE2\x96\x81" "a");  // 256
  tokens.push_back("b");                 // 257
  auto j = bpe_json(tokens);
  j["decoder"] = gemma_decoder();
  const auto tok = load_json(j);
  EXPECT_EQ(tok.decode(Ids{0x61}), "a");
  EXPECT_EQ(tok.decode(Ids{0xE5, 0x8F, 0xAB}), "\xE5\x8F\xAB");  // 叫
  EXPECT_EQ(tok.decode(Ids{0xE5, 0x8F, 257}), "\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  EXPECT_EQ(tok.decode(Ids{0x61, 0xE5, 257}), "\xEF\xBF\xBD\xEF\xBF\xBD" "b");  // a whole invalid run is lost
  EXPECT_EQ(tok.decode(Ids{256, 0x61, 257}), " aab");
  EXPECT_EQ(tok.decode(Ids{256, 1000, -3}), " a");  // unknown ids are dropped
}

TEST(TokenizerSynthetic, DecoderStripAfterFuse) {
  auto j = bpe_json({"\xE2\x96\x81hi", "\xE2\x96\x81there", "\xE2\x96\x81\xE2\x96\x81x"});
  j["decoder"] = gemma_decoder();
  j["decoder"]["decoders"].push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  const auto tok = load_json(j);
  EXPECT_EQ(tok.decode(Ids{0, 1}), "hi there");
  EXPECT_EQ(tok.decode(Ids{2, 0}), " x hi");
  EXPECT_EQ(stream_all(tok, {0, 1}), "hi there");
}

TEST(TokenizerSynthetic, NoDecoderAndSkipSpecial) {
  auto j = bpe_json({"a", "b"});
  j["added_tokens"] = {added_token(2, "<s>", true), added_token(3, "<x>", false)};
  const auto tok = load_json(j);
  EXPECT_EQ(tok.decode(Ids{2, 0, 1, 3}), "<s> a b <x>");
  EXPECT_EQ(tok.decode(Ids{2, 0, 1, 3}, true), "a b <x>");
  EXPECT_EQ(stream_all(tok, {2, 0, 1, 3}), "<s> a b <x>");
  EXPECT_EQ(stream_all(tok, {2, 0, 1, 3}, true), "a b <x>");
}

// Random id sequences through several decoder chains: the streamed text always equals decode().
TEST(TokenizerSynthetic, StreamEqualsDecodeForEveryChain) {
  auto tokens = byte_tokens();
  for (const char* t : {"\xE2\x96\x81", "a", "b", "x", "ab", "\xE2\x96\x81\xE2\x96\x81", "xx", "\xE5\x8F\xAB"}) {
    tokens.push_back(t);
  }
  auto base = bpe_json(tokens);
  base["added_tokens"] = {added_token(264, "<s>", true), added_token(265, "<n>", false)};
  const json strip = {{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 3}};
  const std::vector<json> chains = {
      gemma_decoder(),
      {{"type", "Sequence"},
       {"decoders",
        {replace_step("\xE2\x96\x81", " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
         {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}},
      {{"type", "Sequence"},
       {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}, replace_step("ab", "[AB]")}}},
      {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}, strip}}},
      {{"type", "Sequence"}, {"decoders", {{{"type", "Fuse"}}, {{"type", "ByteFallback"}}}}},
      {{"type", "Sequence"}, {"decoders", {strip, {{"type", "ByteFallback"}}, replace_step("\xE2\x96\x81", "_")}}},
      {{"type", "ByteFallback"}},
      nullptr,
  };
  // Mostly bytes of valid text (so runs complete), some random bytes, words and specials.
  std::vector<int32_t> pool;
  for (const unsigned char c : std::string("a\xC3\xA9\xE5\x8F\xAB\xF0\x9F\x98\x80")) pool.push_back(c);
  for (int i = 256; i < 266; ++i) pool.push_back(i);
  std::mt19937 rng(7);
  for (size_t c = 0; c < chains.size(); ++c) {
    auto j = base;
    j["decoder"] = chains[c];
    const auto tok = load_json(j);
    for (int n = 0; n < 300; ++n) {
      Ids ids(rng() % 24);
      for (auto& id : ids) id = rng() % 5 == 0 ? static_cast<int32_t>(rng() % 256) : pool[rng() % pool.size()];
      for (const bool skip : {false, true}) {
        EXPECT_EQ(stream_all(tok, ids, skip), tok.decode(ids, skip)) << "chain " << c << " sequence " << n;
      }
    }
  }
}

TEST(TokenizerSynthetic, StreamHoldsIncompleteRuns) {
  auto j = bpe_json(byte_tokens());
  j["decoder"] = gemma_decoder();
  const auto tok = load_json(j);
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.push(0x98), "");
  EXPECT_EQ(stream.push(0x80), "");  // a run can still turn invalid until it ends
  EXPECT_EQ(stream.flush(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.push(0xE5), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");  // an unfinished character becomes U+FFFD
}

TEST(TokenizerSynthetic, LoadErrorsNameTheFileAndPart) {
  const std::string missing = scratch_dir("tokenizer") + "/absent.json";
  EXPECT_NE(error_of([&] { Tokenizer::load(missing); }).find(missing), std::string::npos);
  const std::string bad = write_text("{\"model\": {\"type\": \"BPE\",", "bad.json");
  const std::string msg = error_of([&] { Tokenizer::load(bad); });
  EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;

  const auto expect_error = [](json j, const std::vector<std::string>& parts) {
    const std::string path = write_text(j.dump());
    const std::string msg = error_of([&] { Tokenizer::load(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
  };
  const json base = bpe_json({"a", "b", "ab"}, {{"a", "b"}});
  auto j = base;
  j["model"]["type"] = "WordPiece";
  expect_error(j, {"WordPiece"});
  j = base;
  j["model"].erase("vocab");
  expect_error(j, {"vocab"});
  j = base;
  j["model"].erase("merges");
  expect_error(j, {"merges"});
  j = base;
  j.erase("model");
  expect_error(j, {"model"});
  j = base;
  j["model"]["merges"] = json::array({json::array({"a", "zz"})});
  expect_error(j, {"zz"});
  j = base;
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  expect_error(j, {"NFC"});
  j = base;
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}};
  expect_error(j, {"Regex"});
  j = base;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}};
  expect_error(j, {"ByteLevel"});
  j = base;
  j["decoder"] = {{"type", "Metaspace"}};
  expect_error(j, {"Metaspace"});
  j = base;
  j["model"]["vocab"]["a"] = "zero";
  expect_error(j, {"a"});
}

TEST(TokenizerSynthetic, IgnoresUnusedTopLevelMembers) {
  auto j = bpe_json({"a", "b", "ab"}, {{"a", "b"}});
  j["default"] = bpe_json({"b", "a"});  // e.g. an ES-module copy left in an exported file
  j["extra"] = {1, "x", {{"model", nullptr}}};
  const auto tok = load_json(j);
  EXPECT_EQ(tok.encode("ab"), (Ids{2}));
  EXPECT_EQ(tok.vocab_size(), 3);
}

TEST(TokenizerSynthetic, InvalidUtf8Throws) {
  const auto tok = load_json(bpe_json({"a", "b"}));
  EXPECT_NE(error_of([&] { tok.encode("ab\xFF" "a"); }).find("byte offset 2"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.encode("a\xE4\xB8"); }).find("byte offset 1"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.encode("\xC0\x80"); }).find("byte offset 0"), std::string::npos);      // overlong
  EXPECT_NE(error_of([&] { tok.encode("a\xED\xA0\x80"); }).find("byte offset 1"), std::string::npos);  // surrogate
  EXPECT_NE(error_of([&] { tok.encode("\xF4\x90\x80\x80"); }).find("byte offset 0"), std::string::npos);
  EXPECT_EQ(tok.encode(std::string("a\0b", 3)), (Ids{0, 1}));  // NUL is valid UTF-8 (dropped: not in vocab)
}

TEST(TokenizerSynthetic, Accessors) {
  auto j = bpe_json({"a", "b"});
  j["added_tokens"] = {added_token(2, "<s>", true), added_token(3, "<new>", false)};
  j["post_processor"] = json::parse(R"({
      "type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [2], "tokens": ["<s>"]}}})");
  const auto tok = load_json(j);
  EXPECT_EQ(tok.vocab_size(), 4);
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.token(3), "<new>");
  EXPECT_EQ(tok.token(1), "b");
  EXPECT_EQ(tok.token(4), "");
  EXPECT_EQ(tok.token(-1), "");
  EXPECT_EQ(tok.token_id("<new>"), 3);
  EXPECT_EQ(tok.token_id("zzz"), std::nullopt);
  EXPECT_TRUE(tok.is_special(2));
  EXPECT_FALSE(tok.is_special(3));
  EXPECT_FALSE(tok.is_special(0));
  EXPECT_EQ(load_json(bpe_json({"a"})).bos_id(), std::nullopt);
}

}  // namespace tokenizer_synthetic_test
}  // namespace dg::test
