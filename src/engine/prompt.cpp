#include "engine/prompt.h"

#include "core/error.h"

namespace dg {
namespace {

int32_t special(const Tokenizer& tok, const char* literal) {
  const auto id = tok.token_id(literal);
  DG_CHECK(id.has_value(), "the tokenizer has no '{}' token, so it is not a Gemma 4 chat tokenizer (use --raw)",
           literal);
  return *id;
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& ids) { out.insert(out.end(), ids.begin(), ids.end()); }

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::vector<int32_t> render_user_prompt(const Tokenizer& tok, const std::string& text, int32_t bos_id) {
  const int32_t turn_open = special(tok, "<|turn>"), turn_close = special(tok, "<turn|>");
  const int32_t chan_open = special(tok, "<|channel>"), chan_close = special(tok, "<channel|>");
  std::vector<int32_t> ids{bos_id, turn_open};
  append(ids, tok.encode("user\n", SpecialTokens::kPlain));
  append(ids, tok.encode(trim(text), SpecialTokens::kPlain));  // the reference template trims content
  ids.push_back(turn_close);
  append(ids, tok.encode("\n", SpecialTokens::kPlain));
  ids.push_back(turn_open);
  append(ids, tok.encode("model\n", SpecialTokens::kPlain));
  ids.push_back(chan_open);
  append(ids, tok.encode("thought\n", SpecialTokens::kPlain));
  ids.push_back(chan_close);
  return ids;
}

}  // namespace dg
