// Tokenizer: Hugging Face tokenizer.json with a BPE model (byte fallback) and the Gemma pipeline:
// added tokens matched as whole literals (leftmost-longest), Replace(" " -> "▁") normalizer, the Split
// pre-tokenizer, BPE merges by rank, and the Replace/ByteFallback/Fuse decoder.
// Reference: the HF `tokenizers` library; exactness is tested against ids it produced (tests/unit/tokenizer_*).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dg {

enum class SpecialTokens : uint8_t {
  kMatch,  // added tokens marked special are recognised in the text (prompt templates, --raw prompts)
  kPlain,  // special tokens are encoded as ordinary text (client content can never smuggle a marker)
};

class Tokenizer {
 public:
  // Throws dg::Error naming the file on a missing file, malformed JSON or an unsupported model type.
  static Tokenizer load(const std::string& path);
  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Encodes UTF-8 text (no BOS is added). Invalid UTF-8 throws dg::Error naming the byte offset.
  std::vector<int32_t> encode(std::string_view text, SpecialTokens mode = SpecialTokens::kMatch) const;
  // Decodes ids to text exactly as the HF decoder chain does (byte-fallback runs fused; invalid bytes -> U+FFFD).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  int vocab_size() const;  // number of ids (model vocab and added tokens)
  // The bytes id contributes to a decoded text in the middle of it: a byte-fallback token's one byte, otherwise
  // the token through the decoder steps but Strip (which only touches the ends of the whole text).
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view token) const;  // exact token string lookup
  std::string_view token(int32_t id) const;                      // raw token string ("" if out of range)
  bool is_special(int32_t id) const;
  // The first special token that encode(text, kMatch) matches as a literal, without encoding the rest (no BPE): a
  // cheap check that client text smuggles no marker. nullopt: none. Special ids that only BPE would produce (an unk
  // token where byte fallback is missing, a single_word special its neighbours reject and merges rebuild) are not
  // reported; no Gemma tokenizer has either.
  std::optional<int32_t> first_special_literal(std::string_view text) const;
  std::optional<int32_t> bos_id() const;  // from the post-processor template, if any

 private:
  friend class StreamDecoder;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Incremental decoder: push ids as they are committed, receive only complete UTF-8 text; bytes of a
// character split across tokens are held back until the character completes. The concatenation of every
// push() and the final flush() equals Tokenizer::decode of all ids. Each decoder step keeps only what it
// must hold back (an unfinished byte-fallback run, a possible partial match), never the whole history.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  std::string flush();  // ends the stream: emits what is held (incomplete bytes become U+FFFD), then resets

 private:
  struct Stage {                    // what one decoder step holds back
    std::vector<std::string> held;  // token steps: the open byte-fallback run; text steps: unsettled text
    size_t seen = 0;                // Strip after Fuse: leading characters stripped so far
    bool settled = false;           // text steps: the start of the text no longer changes the output
  };
  std::vector<std::string> run(std::vector<std::string> pieces, bool finish);

  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<Stage> stages_;  // one per decoder step
  size_t n_tokens_ = 0;        // tokens passed on (no decoder: they are joined with " ")
};

}  // namespace dg
