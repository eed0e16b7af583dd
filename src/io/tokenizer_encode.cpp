// Tokenizer::encode and the id/token accessors. The pipeline is HF tokenizers' encode_single_sequence:
// added tokens with normalized=false are split out of the raw text first (leftmost-longest, honouring
// single_word / lstrip / rstrip), every remaining piece is normalized on its own, added tokens with
// normalized=true are split out of that, the pre-tokenizer splits the rest into words, and BPE encodes
// each word. Nothing is added around the result (no BOS).
#include "core/error.h"
#include "io/tokenizer_impl.h"

namespace dg {

namespace {

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
  return tok::is_word_char(tok::utf8_decode_at(s, i));
}

bool starts_with_word(std::string_view s) { return !s.empty() && tok::is_word_char(tok::utf8_decode_at(s, 0)); }

// Start of the whitespace run that ends `s` (the regex `\s*$`).
size_t trailing_space_start(std::string_view s) {
  size_t i = s.size();
  while (i > 0) {
    size_t j = i - 1;
    while (j > 0 && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80) --j;
    if (!tok::is_unicode_space(tok::utf8_decode_at(s, j))) break;
    i = j;
  }
  return i;
}

// Length of the whitespace run that starts `s` (the regex `^\s*`).
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && tok::is_unicode_space(tok::utf8_decode_at(s, i))) {
    i += tok::utf8_char_len(static_cast<uint8_t>(s[i]));
  }
  return i;
}

}  // namespace

const tok::AddedToken* Tokenizer::Impl::added_token(int32_t id) const {
  const auto it = added_by_id.find(id);
  return it == added_by_id.end() ? nullptr : &added[it->second];
}

const std::string* Tokenizer::Impl::token_string(int32_t id) const {
  if (const auto* t = added_token(id)) return &t->content;
  return model.token_of(id);
}

bool Tokenizer::Impl::special(int32_t id) const {
  // HF tests the token's content against the special set, not the id.
  const std::string* s = token_string(id);
  if (s == nullptr) return false;
  const auto it = added_by_content.find(*s);
  if (it == added_by_content.end()) return false;
  const auto* t = added_token(it->second);
  return t != nullptr && t->special;
}

void Tokenizer::Impl::split_added(std::string_view text, const tok::LiteralTrie& trie, SpecialTokens mode,
                                  std::vector<tok::Piece>& out) const {
  size_t start_offset = 0;
  for (const auto& m : trie.find_all(text)) {
    const tok::AddedToken& t = *added_token(m.value);
    if (mode == SpecialTokens::kPlain && t.special) continue;  // consumed by the matcher, left as text
    size_t start = m.start, stop = m.end;
    if (t.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (t.rstrip) stop += leading_space_len(text.substr(stop));
    if (start_offset < start) out.push_back({std::string(text.substr(start_offset, start - start_offset)), -1});
    out.push_back({std::string(), t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({std::string(text.substr(start_offset)), -1});
}

bool Tokenizer::Impl::walk_added(std::string_view text, SpecialTokens mode,
                                 const std::function<bool(tok::Piece&)>& on) const {
  if (const auto bad = tok::utf8_invalid_offset(text)) {
    fail("tokenizer: input text is not valid UTF-8 at byte offset {}", *bad);
  }
  std::vector<tok::Piece> pieces, sub;
  split_added(text, raw_trie, mode, pieces);
  for (auto& piece : pieces) {
    if (piece.id >= 0) {
      if (!on(piece)) return false;
      continue;
    }
    sub.clear();
    split_added(tok::normalize(normalizer, std::move(piece.text)), norm_trie, mode, sub);
    for (auto& s : sub)
      if (!on(s)) return false;
  }
  return true;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, SpecialTokens mode) const {
  const Impl& impl = *impl_;
  std::vector<int32_t> ids;
  impl.walk_added(text, mode, [&](tok::Piece& p) {
    if (p.id >= 0) {
      ids.push_back(p.id);
    } else {
      for (const auto& word : tok::pre_tokenize(impl.pre_tokenizer, std::move(p.text))) impl.model.tokenize(word, ids);
    }
    return true;
  });
  return ids;
}

std::optional<int32_t> Tokenizer::first_special_literal(std::string_view text) const {
  std::optional<int32_t> found;
  impl_->walk_added(text, SpecialTokens::kMatch, [&](tok::Piece& p) {
    if (p.id >= 0 && impl_->special(p.id)) found = p.id;
    return !found;
  });
  return found;
}

int Tokenizer::vocab_size() const { return impl_->n_ids; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  return impl_->model.id_of(token);
}

std::string_view Tokenizer::token(int32_t id) const {
  const std::string* s = impl_->token_string(id);
  return s == nullptr ? std::string_view() : std::string_view(*s);
}

bool Tokenizer::is_special(int32_t id) const { return impl_->special(id); }

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }

}  // namespace dg
