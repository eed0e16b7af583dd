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
  std::optional<int32_t> token_id(std::string_view token) const;  // exact token string lookup
  std::string_view token(int32_t id) const;                      // raw token string ("" if out of range)
  bool is_special(int32_t id) const;
  std::optional<int32_t> bos_id() const;  // from the post-processor template, if any

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Incremental decoder: push ids as they are committed, receive only complete UTF-8 text; bytes of a
// character split across tokens are held back until the character completes.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  std::string flush();  // emits whatever is held (incomplete bytes become U+FFFD)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // ids not yet fully emitted
  size_t emitted_ = 0;        // bytes of decode(ids_) already returned
};

}  // namespace dg
