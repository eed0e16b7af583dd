// How deeply a JSON text nests arrays and objects, to refuse client JSON before it is parsed: a copy, a dump and
// the chat renderers walk a Json recursively, one stack frame per level, so a few megabytes of `[[[[...` from a
// client would otherwise exhaust the stack of the thread that renders it (the whole server process goes down).
#pragma once

#include <string_view>

namespace dg {

// The deepest nesting that request bodies, chat commands, saved conversations and tool-call arguments may have:
// far above any real request (a tool schema nested 16 levels deep is about 40), far below what a stack holds.
constexpr int kMaxJsonDepth = 128;

// The deepest nesting of arrays and objects in `text` (its brackets outside strings; exact for valid JSON).
int json_depth(std::string_view text);

}  // namespace dg
