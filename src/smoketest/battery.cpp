#include "smoketest/battery.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace dg::smoke {
namespace {

const std::set<std::string> kKinds = {"adherence", "thinking", "tool", "multiblock", "convergence"};
const std::set<std::string> kPromptKeys = {
    "name",      "kind",      "prompt", "think",         "tools",         "raw",              "accept",    "accept_regex",
    "require",   "reject",    "min_tokens", "max_steps", "call",          "tool_response", "continuation_raw",
    "known_fail"};

std::string get_string(const Json& j, const char* key, const std::string& where, bool required) {
  if (!j.contains(key)) {
    DG_CHECK(!required, "{}: missing \"{}\"", where, key);
    return "";
  }
  DG_CHECK(j[key].is_string(), "{}: \"{}\" must be a string", where, key);
  return j[key].get<std::string>();
}

int get_int(const Json& j, const char* key, const std::string& where, int fallback, int min) {
  if (!j.contains(key)) return fallback;
  DG_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() >= min && j[key].get<int64_t>() <= 1000000,
           "{}: \"{}\" must be an integer >= {}", where, key, min);
  return j[key].get<int>();
}

std::vector<std::string> get_strings(const Json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  DG_CHECK(j[key].is_array(), "{}: \"{}\" must be an array of strings", where, key);
  for (const Json& s : j[key]) {
    DG_CHECK(s.is_string() && !s.get<std::string>().empty(), "{}: \"{}\" must hold non-empty strings", where, key);
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::regex make_regex(const std::string& pattern, const std::string& where) {
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    fail("{}: bad regex '{}' in \"accept_regex\": {}", where, pattern, e.what());
  }
}

BatteryPrompt parse_prompt(const Json& j, const std::string& where) {
  DG_CHECK(j.is_object(), "{}: a prompt must be a JSON object", where);
  for (const auto& [key, _] : j.items()) DG_CHECK(kPromptKeys.count(key) > 0, "{}: unknown field \"{}\"", where, key);
  BatteryPrompt p;
  p.name = get_string(j, "name", where, true);
  const std::string at = fmt::format("{} ({})", where, p.name);
  p.kind = get_string(j, "kind", at, true);
  DG_CHECK(kKinds.count(p.kind) > 0, "{}: unknown kind '{}' (adherence, thinking, tool, multiblock, convergence)", at,
           p.kind);
  p.prompt = get_string(j, "prompt", at, true);
  if (j.contains("think")) {
    DG_CHECK(j["think"].is_boolean(), "{}: \"think\" must be true or false", at);
    p.think = j["think"].get<bool>();
  }
  if (j.contains("tools") && !j["tools"].is_null()) {
    DG_CHECK(j["tools"].is_array(), "{}: \"tools\" must be an array", at);
    for (const Json& t : j["tools"])
      p.tools.push_back(t.is_object() && !t.contains("function") ? Json{{"type", "function"}, {"function", t}} : t);
    check_tools(p.tools);
  }
  p.raw = get_string(j, "raw", at, false);
  p.accept = get_strings(j, "accept", at);
  p.accept_regex = get_strings(j, "accept_regex", at);
  for (const std::string& r : p.accept_regex) make_regex(r, at);
  p.require = get_strings(j, "require", at);
  p.reject = get_strings(j, "reject", at);
  p.known_fail = get_strings(j, "known_fail", at);
  for (const std::string& k : p.known_fail)
    DG_CHECK(k == "contract" || k == "reference", "{}: \"known_fail\" holds sampler profiles (contract, reference), "
             "not '{}'", at, k);
  p.min_tokens = get_int(j, "min_tokens", at, 0, 0);
  DG_CHECK(j.contains("max_steps"), "{}: missing \"max_steps\" (the step budget per block)", at);
  p.max_steps = get_int(j, "max_steps", at, 0, 1);
  if (p.kind == "tool") {
    DG_CHECK(j.contains("call") && j["call"].is_object(), "{}: a tool prompt needs \"call\" {{name, arguments}}", at);
    p.call_name = get_string(j["call"], "name", at + ": call", true);
    DG_CHECK(j["call"].contains("arguments") && j["call"]["arguments"].is_object(),
             "{}: \"call.arguments\" must be an object", at);
    p.call_arguments = j["call"]["arguments"];
    p.tool_response = get_string(j, "tool_response", at, true);
    p.continuation_raw = get_string(j, "continuation_raw", at, false);
    DG_CHECK(!p.tools.empty(), "{}: a tool prompt needs \"tools\"", at);
  } else {
    DG_CHECK(!j.contains("call") && !j.contains("tool_response"), "{}: \"call\" belongs to kind \"tool\" only", at);
  }
  return p;
}

}  // namespace

Battery parse_battery(const Json& j, const std::string& where) {
  DG_CHECK(j.is_object(), "{}: a battery must be a JSON object", where);
  Battery b;
  b.version = get_int(j, "version", where, 1, 1);
  DG_CHECK(b.version == 1, "{}: battery version {} is not supported (1)", where, b.version);
  if (j.contains("seed")) {
    DG_CHECK(j["seed"].is_number_integer() && j["seed"].get<int64_t>() >= 0,
             "{}: \"seed\" must be a non-negative integer", where);
    b.seed = j["seed"].get<uint64_t>();
  }
  if (j.contains("sampler")) b.sampler = get_string(j, "sampler", where, true);
  DG_CHECK(b.sampler == "contract" || b.sampler == "reference", "{}: \"sampler\" must be contract or reference",
           where);
  b.canvas_length = get_int(j, "canvas_length", where, 0, 0);
  b.max_new_tokens = get_int(j, "max_new_tokens", where, 160, 1);
  DG_CHECK(j.contains("prompts") && j["prompts"].is_array() && !j["prompts"].empty(),
           "{}: \"prompts\" must be a non-empty array", where);
  std::set<std::string> names;
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    b.prompts.push_back(parse_prompt(j["prompts"][i], fmt::format("{}: prompts[{}]", where, i)));
    DG_CHECK(names.insert(b.prompts.back().name).second, "{}: prompts[{}]: duplicate name '{}'", where, i,
             b.prompts.back().name);
  }
  return b;
}

Battery load_battery(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read the battery '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const Json j = Json::parse(ss.str(), nullptr, false);
  DG_CHECK(!j.is_discarded(), "'{}' is not valid JSON", path);
  return parse_battery(j, path);
}

std::string normalize_words(const std::string& s) {
  std::string out = " ";
  for (const char c : s) {
    const char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    const bool word = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (word)
      out += l;
    else if (out.back() != ' ')
      out += ' ';
  }
  if (out.back() != ' ') out += ' ';
  return out;
}

bool has_phrase(const std::string& text, const std::string& phrase) {
  const std::string p = normalize_words(phrase);
  return p != " " && normalize_words(text).find(p) != std::string::npos;
}

std::vector<std::string> check_outcome(const BatteryPrompt& p, const Outcome& o, const StopIds& ids) {
  std::vector<std::string> why;
  if (!o.render_error.empty()) why.push_back("render: " + o.render_error);
  if (o.rounds.empty()) {
    why.push_back("no reply");
    return why;
  }
  int most = 0;
  for (const Round& r : o.rounds)
    for (const BlockInfo& b : r.blocks) most = std::max(most, b.steps);
  if (most > p.max_steps) why.push_back(fmt::format("steps: a block took {} > {}", most, p.max_steps));

  const Round& first = o.rounds.front();
  if (p.kind == "tool") {
    const bool one_call = first.tool_calls.size() == 1 && first.tool_errors == 0;
    const bool right = one_call && first.tool_calls[0].name == p.call_name &&
                       first.tool_calls[0].arguments == p.call_arguments;
    if (!right) {
      std::string got = first.tool_calls.empty() ? "no call"
                                                 : first.tool_calls[0].name + first.tool_calls[0].arguments.dump();
      if (first.tool_errors > 0) got = fmt::format("{} malformed call(s)", first.tool_errors);
      why.push_back(fmt::format("call: wanted {}{}, got {}", p.call_name, p.call_arguments.dump(), got));
    }
    if (first.stop_token != ids.response_open) why.push_back("call: not ended by <|tool_response>");
    if (o.rounds.size() < 2) return why;
  } else if (!first.tool_calls.empty() || first.tool_errors > 0) {
    why.push_back("call: a tool call where an answer was expected");
  }

  const Round& last = o.rounds.back();
  if (last.stop_token != ids.turn_close && last.stop_token != ids.eos)
    why.push_back(last.stop_token < 0 ? "stop: no stop token within the token budget"
                                      : fmt::format("stop: ended by token {}, not <turn|>", last.stop_token));
  if (normalize_words(last.content) == " ") why.push_back("empty: no answer text");
  if (!p.accept.empty() || !p.accept_regex.empty()) {
    bool ok = std::any_of(p.accept.begin(), p.accept.end(), [&](const std::string& a) { return has_phrase(last.content, a); });
    for (const std::string& r : p.accept_regex)
      ok = ok || std::regex_search(last.content, make_regex(r, p.name));
    if (!ok) {
      std::vector<std::string> all = p.accept;
      for (const std::string& r : p.accept_regex) all.push_back("/" + r + "/");
      why.push_back(fmt::format("answer: none of \"{}\"", fmt::join(all, "\", \"")));
    }
  }
  for (const std::string& r : p.require)
    if (!has_phrase(last.content, r)) why.push_back(fmt::format("require: no \"{}\"", r));
  for (const std::string& r : p.reject)
    if (has_phrase(last.content, r)) why.push_back(fmt::format("reject: has \"{}\"", r));
  if (last.tokens < p.min_tokens) why.push_back(fmt::format("short: {} tokens < {}", last.tokens, p.min_tokens));
  return why;
}

}  // namespace dg::smoke
