// Minimal Gemma 4 chat rendering for `diffgemma ask`: one user turn and the model's generation prompt with the
// thought channel closed (thinking off). Specials are inserted by id; the user's text is encoded as plain text so
// it can never smuggle a marker. (The full chat format with system turns, tools and thinking is src/chat/.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace dg {

// <bos><|turn>user\n{trimmed text}<turn|>\n<|turn>model\n<|channel>thought\n<channel|>
std::vector<int32_t> render_user_prompt(const Tokenizer& tok, const std::string& text, int32_t bos_id);

}  // namespace dg
