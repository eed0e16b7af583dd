// Helpers for the tokenizer tests: small tokenizer.json files built in the test, UTF-8 checks, and the
// "test data missing" policy (skip locally, fail when DG_REQUIRE_TEST_DATA=1 as in CI).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/tokenizer.h"
#include "support/paths.h"

namespace dg::test {

// A BPE tokenizer.json: token i of `tokens` gets id i; no normalizer, pre-tokenizer or decoder.
inline nlohmann::json bpe_json(const std::vector<std::string>& tokens,
                               const std::vector<std::pair<std::string, std::string>>& merges = {}) {
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) m.push_back({a, b});
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}, {"unk_token", nullptr}, {"fuse_unk", false},
            {"byte_fallback", false}}}};
}

inline std::vector<std::string> byte_tokens() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b) out.push_back(fmt::format("<0x{:02X}>", b));
  return out;
}

inline nlohmann::json added_token(int id, const std::string& content, bool special, bool normalized = false) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", normalized}, {"special", special}};
}

inline std::string write_text(const std::string& text, const std::string& name = "tokenizer.json") {
  const std::string path = scratch_dir("tokenizer") + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

inline Tokenizer load_json(const nlohmann::json& j) { return Tokenizer::load(write_text(j.dump())); }

inline bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// Streams ids one at a time; checks every chunk is valid UTF-8 and returns the concatenation with flush().
inline std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special = false) {
  StreamDecoder stream(tok, skip_special);
  std::string out;
  for (const int32_t id : ids) {
    const std::string chunk = stream.push(id);
    EXPECT_TRUE(valid_utf8(chunk)) << "chunk after id " << id << " is not valid UTF-8";
    out += chunk;
  }
  const std::string tail = stream.flush();
  EXPECT_TRUE(valid_utf8(tail));
  return out + tail;
}

// Checks tok against a cases file of scripts/make_tokenizer_cases.py (ids and text from HF tokenizers):
// encode, kPlain encode, decode, skip_special decode and the streamed decode of every line.
inline void expect_matches_cases(const Tokenizer& tok, const std::string& path, int min_texts, int min_decodes) {
  using nlohmann::json;
  using Ids = std::vector<int32_t>;
  std::ifstream in(path);
  std::string line;
  int n_text = 0, n_decode = 0, n_fail = 0;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    const auto check = [&](bool ok, const std::string& what) {
      if (!ok && ++n_fail <= 20) ADD_FAILURE() << path << ":" << line_no << ": " << what;
    };
    const bool is_text = c.contains("text");
    const Ids ids = c.at(is_text ? "ids" : "decode_ids").get<Ids>();
    const auto decoded = c.at("decoded").get<std::string>();
    if (is_text) {
      ++n_text;
      const auto text = c.at("text").get<std::string>();
      const Ids got = tok.encode(text);
      check(got == ids, "encode differs: got " + json(got).dump() + " want " + json(ids).dump());
      // The literal check without BPE finds the first special id of the reference's encoding.
      std::optional<int32_t> first;
      for (const int32_t id : ids)
        if (tok.is_special(id)) {
          first = id;
          break;
        }
      check(tok.first_special_literal(text) == first, "first_special_literal differs from the encoding's");
      if (c.contains("ids_plain")) {
        check(tok.encode(text, SpecialTokens::kPlain) == c.at("ids_plain").get<Ids>(), "kPlain encode differs");
      }
    } else {
      ++n_decode;
    }
    check(tok.decode(ids) == decoded, "decode differs");
    check(stream_all(tok, ids) == decoded, "streamed decode differs");
    const auto skip = c.contains("decoded_skip") ? c.at("decoded_skip").get<std::string>() : decoded;
    check(tok.decode(ids, true) == skip, "skip_special decode differs");
    check(stream_all(tok, ids, true) == skip, "streamed skip_special decode differs");
  }
  EXPECT_EQ(n_fail, 0);
  EXPECT_GE(n_text, min_texts);
  EXPECT_GE(n_decode, min_decodes);
}

// Message of the dg::Error thrown by f ("" and a test failure when none is thrown).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than dg::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a dg::Error";
  return "";
}

inline bool require_test_data() {
  const char* v = std::getenv("DG_REQUIRE_TEST_DATA");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace dg::test

// Skips the test when a data file is missing, or fails it when DG_REQUIRE_TEST_DATA=1.
#define DG_NEED_TEST_FILE(path)                                                                          \
  do {                                                                                                   \
    if (!std::filesystem::exists(path)) {                                                                \
      if (::dg::test::require_test_data()) FAIL() << "missing test data " << (path);                     \
      GTEST_SKIP() << "missing " << (path) << "; run `scripts/setup.sh --test-data`";                    \
    }                                                                                                    \
  } while (0)
