#include "engine/tool_check.h"

#include <fmt/format.h>

#include "chat/id_writer.h"
#include "chat/tools_render.h"
#include "core/error.h"
#include "diffusion/call_commit.h"

namespace dg {

ToolCheckMode tool_check_mode_from_name(const std::string& name) {
  if (name == "off") return ToolCheckMode::kOff;
  if (name == "retry") return ToolCheckMode::kRetry;
  if (name == "repair") return ToolCheckMode::kRepair;
  fail("unknown tool check mode '{}' (expected off, retry or repair)", name);
}

const char* tool_check_mode_name(ToolCheckMode m) {
  switch (m) {
    case ToolCheckMode::kOff: return "off";
    case ToolCheckMode::kRetry: return "retry";
    case ToolCheckMode::kRepair: return "repair";
  }
  return "off";
}

ToolSet ToolSet::from(const Json& tools, bool strict) {
  check_tools(tools);
  ToolSet s;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& f = tools[i].contains("function") ? tools[i]["function"] : tools[i];
    Tool t;
    t.name = f["name"].get<std::string>();
    const std::string where = fmt::format("tools[{}].function.parameters", i);
    DG_CHECK(!f.contains("strict") || f["strict"].is_boolean() || f["strict"].is_null(),
             "tools[{}].function.strict must be true or false", i);
    const bool strict_tool = strict || (f.contains("strict") && f["strict"].is_boolean() && f["strict"].get<bool>());
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      try {
        t.schema = JsonSchema::compile(f["parameters"], where, false);
      } catch (const Error&) {
        if (strict_tool) throw;
      }
    } else {
      t.schema = JsonSchema::compile(Json{{"type", "object"}}, where, false);
    }
    t.strict = strict_tool;
    if (strict_tool) {
      DG_CHECK(t.schema->root_accepts_object(), "{}: a strict tool's parameters must accept an object (\"type\": "
                                                "\"object\"): a call's arguments are one", where);
      DG_CHECK(CallGrammar::callable(t.name), "tools[{}].function.name '{}': a strict tool's name must be one a call "
                                              "can hold (no whitespace, '{{', '}}' or ',')", i, t.name);
    }
    s.tools_.push_back(std::move(t));
  }
  DG_CHECK(!s.strict() || static_cast<int>(s.tools_.size()) <= CallGrammar::kMaxTools,
           "tools: with a strict tool at most {} tools can be declared (got {})", CallGrammar::kMaxTools,
           s.tools_.size());
  return s;
}

bool ToolSet::declared(const std::string& name) const {
  for (const Tool& t : tools_)
    if (t.name == name) return true;
  return false;
}

bool ToolSet::strict() const {
  for (const Tool& t : tools_)
    if (t.strict) return true;
  return false;
}

std::shared_ptr<const ToolCallConstraint> ToolSet::call_constraint(std::shared_ptr<const JsonVocab> vocab,
                                                                   int32_t open_id) const {
  if (!strict()) return nullptr;
  auto c = std::make_shared<ToolCallConstraint>();
  c->vocab = std::move(vocab);
  c->open_id = open_id;
  for (const Tool& t : tools_)
    if (CallGrammar::callable(t.name))
      c->tools.push_back({t.name, t.strict ? t.schema : nullptr});
  return c;
}

const JsonSchema* ToolSet::schema(const std::string& name) const {
  for (const Tool& t : tools_)
    if (t.name == name) return t.schema.get();
  return nullptr;
}

std::string call_text(const ToolCall& c, const Tokenizer& tok, const ChatTokens& t) {
  IdWriter w(tok, t);
  render_call(w, c);
  return tok.decode(w.take());
}

std::string raw_call_name(const std::string& raw) {
  const size_t at = raw.find("call:");
  if (at == std::string::npos) return {};
  size_t end = at + 5;
  while (end < raw.size() && raw[end] != '{' && raw[end] != '<' && raw[end] != ' ' && end - at < 69) ++end;
  return raw.substr(at + 5, end - at - 5);
}

std::vector<ToolProblem> ToolSet::check(const Reply& r, const Tokenizer& tok, const ChatTokens& t) const {
  std::vector<ToolProblem> out;
  for (const ToolCallError& e : r.errors)
    out.push_back({raw_call_name(e.raw), fmt::format("the tool call could not be parsed ({}); write it as "
                                                     "call:NAME{{key:value,...}}", e.message),
                   e.raw});
  std::vector<std::string> names;
  for (const Tool& tool : tools_) names.push_back(tool.name);
  for (const ToolCall& c : r.tool_calls) {
    if (!declared(c.name)) {
      out.push_back({c.name, fmt::format("unknown tool '{}' (declared: {})", c.name, fmt::join(names, ", ")),
                     call_text(c, tok, t)});
      continue;
    }
    const JsonSchema* s = schema(c.name);
    if (!c.arguments.is_object()) {
      out.push_back({c.name, fmt::format("the arguments of '{}' must be an object of named values", c.name),
                     call_text(c, tok, t)});
      continue;
    }
    if (s == nullptr) continue;
    const std::vector<std::string> errs = s->validate(c.arguments);
    if (!errs.empty())
      out.push_back({c.name, fmt::format("invalid arguments for '{}': {}", c.name, fmt::join(errs, "; ")),
                     call_text(c, tok, t)});
  }
  return out;
}

}  // namespace dg
