// The Gemma 4 tool grammar, rendered into an IdWriter (markers by id, strings between <|"|> tokens):
//   declaration  <|tool>declaration:NAME{description:<|"|>…<|"|>,parameters:{properties:{…},required:[…],
//                type:<|"|>OBJECT<|"|>}}<tool|>      from an OpenAI tool (JSON schema parameters)
//   call         <|tool_call>call:NAME{key:value,…}<tool_call|>
//   response     <|tool_response>response:NAME{value:<|"|>…<|"|>}<tool_response|>   (objects field by field)
// Keys in Jinja dictsort order, types upper-cased; semantics of format_function_declaration / format_argument /
// format_tool_response_block in the Gemma 4 chat_template.jinja (docs/CHAT.md).
#pragma once

#include <string>

#include "chat/conversation.h"
#include "chat/id_writer.h"

namespace dg {

// One tools[] entry without the <|tool> <tool|> wrapper.
void render_declaration(IdWriter& w, const Json& tool);
// A value: strings quoted, true/false, numbers as Python prints them, null as None, objects in dictsort order
// with keys quoted (escape_keys) or bare, arrays.
void render_argument(IdWriter& w, const Json& v, bool escape_keys);
// <|tool_call>call:NAME{…}<tool_call|>
void render_call(IdWriter& w, const ToolCall& c);
// <|tool_response>response:NAME{…}<tool_response|>; `response` is a string, an object or any other value.
void render_response(IdWriter& w, const std::string& name, const Json& response);

}  // namespace dg
