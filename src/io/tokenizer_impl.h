// Internals of dg::Tokenizer shared by its translation units (tokenizer*.cpp); not part of the public API.
// Each piece mirrors one part of the HF `tokenizers` pipeline: the added-token matcher (AddedVocabulary),
// the normalizer and pre-tokenizer steps, the BPE model (BPE::merge_word + Word::merge_all), the decoders.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/tokenizer.h"
#include "io/utf8_lead.h"

namespace dg::tok {

// ---- UTF-8 -------------------------------------------------------------------------------------------------
using dg::utf8_invalid_offset;  // io/utf8_lead.h
// Byte length of the (well-formed) character that starts with `lead`.
size_t utf8_char_len(uint8_t lead);
// Code point of the well-formed character at s[i].
uint32_t utf8_decode_at(std::string_view s, size_t i);
// Unicode White_Space (the `\s` of the Rust regex crate).
bool is_unicode_space(uint32_t cp);
// Approximation of the Unicode `\w` class (Alphabetic, Mark, Nd, Pc, Join_Control); exact for ASCII.
bool is_word_char(uint32_t cp);

// ---- literal matching ------------------------------------------------------------------------------------
// Leftmost-longest matching of a set of non-empty byte strings (the Aho-Corasick LeftmostLongest semantics
// of the HF added-token matcher): scanning left to right, the first position where any pattern starts
// wins, and among the patterns starting there the longest.
class LiteralTrie {
 public:
  void add(std::string_view pattern, int32_t value);
  bool empty() const { return n_patterns_ == 0; }
  struct Match {
    size_t start, end;
    int32_t value;
  };
  // All non-overlapping leftmost-longest matches, in order.
  std::vector<Match> find_all(std::string_view text) const;

 private:
  int32_t child(int32_t node, uint8_t byte) const;
  std::vector<int32_t> value_{-1};                     // per node: pattern value, -1 if none
  std::array<int32_t, 256> root_{};                    // root's children (0: none)
  std::unordered_map<uint64_t, int32_t> edges_;        // (node << 8 | byte) -> child for deeper nodes
  size_t n_patterns_ = 0;
};

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A slice of the input: plain text to run through the model, or one added token.
struct Piece {
  std::string text;
  int32_t id = -1;  // >= 0: the id of a matched added token
};

// ---- normalizer / pre-tokenizer ------------------------------------------------------------------------
struct NormalizerStep {
  enum class Kind : uint8_t { kReplace, kPrepend };
  Kind kind = Kind::kReplace;
  std::string pattern;  // kReplace: the literal to find
  std::string content;  // kReplace: replacement; kPrepend: the prefix
};
std::string normalize(const std::vector<NormalizerStep>& steps, std::string text);

enum class SplitBehavior : uint8_t { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
struct SplitStep {
  std::string pattern;  // literal
  SplitBehavior behavior = SplitBehavior::kRemoved;
  bool invert = false;
};
// Applies the Split steps in order; returns the non-empty words.
std::vector<std::string> pre_tokenize(const std::vector<SplitStep>& steps, std::string text);

// ---- BPE model ---------------------------------------------------------------------------------------------
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class Bpe {
 public:
  // Throws dg::Error (prefixed by `where`) when a merge names a token that is not in the vocab.
  void build(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions opt,
             const std::string& where);
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> id_of(std::string_view token) const;
  const std::string* token_of(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  size_t size() const { return vocab_.size(); }

 private:
  struct MergeTarget {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_present_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  std::array<int32_t, 256> byte_ids_{};  // id of "<0xNN>", -1 when absent
  BpeOptions opt_;
};

// ---- decoder ----------------------------------------------------------------------------------------------
struct DecodeStep {
  enum class Kind : uint8_t { kReplace, kByteFallback, kFuse, kStrip };
  Kind kind = Kind::kFuse;
  std::string pattern;  // kReplace
  std::string content;  // kReplace: replacement; kStrip: the character to strip
  size_t start = 0;     // kStrip
  size_t stop = 0;      // kStrip
};
// The byte a "<0xNN>" token stands for (the HF ByteFallback test), or -1.
int byte_token_value(std::string_view token);
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content);
std::string strip_token(std::string_view token, const DecodeStep& step);
// HF Decoder::decode: decode_chain through every step, then concatenation.
std::string decode_tokens(const std::vector<DecodeStep>& steps, std::vector<std::string> tokens);

}  // namespace dg::tok

namespace dg {

struct Tokenizer::Impl {
  std::string path;
  tok::Bpe model;
  std::vector<tok::AddedToken> added;                  // in file order
  std::unordered_map<int32_t, size_t> added_by_id;     // id -> index in `added`
  tok::Vocab added_by_content;                         // content -> id
  tok::LiteralTrie raw_trie;                           // normalized == false tokens, matched on raw text
  tok::LiteralTrie norm_trie;                          // normalized == true tokens, matched after normalizing
  std::vector<tok::NormalizerStep> normalizer;
  std::vector<tok::SplitStep> pre_tokenizer;
  bool has_decoder = false;
  std::vector<tok::DecodeStep> decoder;
  std::optional<int32_t> bos;
  int32_t n_ids = 0;

  const tok::AddedToken* added_token(int32_t id) const;
  const std::string* token_string(int32_t id) const;
  bool special(int32_t id) const;
  // The HF AddedVocabulary::find_matches split of `text`, then the slices.
  void split_added(std::string_view text, const tok::LiteralTrie& trie, SpecialTokens mode,
                   std::vector<tok::Piece>& out) const;
  // encode's stages before the pre-tokenizer, in text order: added tokens matched in the raw text, then in each
  // normalized rest. `on(piece)` gets each piece (an added token's id, or text still to pre-tokenize, id -1) and
  // returns false to stop the walk; walk_added returns whether it ran to the end. Invalid UTF-8 throws.
  bool walk_added(std::string_view text, SpecialTokens mode, const std::function<bool(tok::Piece&)>& on) const;
};

}  // namespace dg
