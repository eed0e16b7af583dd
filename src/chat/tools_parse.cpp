#include "chat/tools_parse.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace dg {
namespace {

constexpr int kQuote = -1;  // the <|"|> token among the body's bytes

class ArgParser {
 public:
  explicit ArgParser(std::vector<int> u) : u_(std::move(u)) {}

  CallParse run() {
    CallParse r;
    skip_ws();
    for (char c : std::string_view("call:"))
      if (!eat(c)) return fail(r, "expected 'call:'");
    const size_t name_at = i_;
    while (i_ < u_.size() && u_[i_] != '{' && u_[i_] != kQuote && !is_ws(u_[i_]) && u_[i_] != '}' && u_[i_] != ',')
      r.call.name += static_cast<char>(u_[i_++]);
    if (r.call.name.empty()) return fail(r, "expected a tool name after 'call:'", name_at);
    skip_ws();
    Json args;
    if (i_ >= u_.size() || u_[i_] != '{') return fail(r, "expected '{' after the tool name");
    if (!object(args)) return fail(r, err_, err_at_);
    skip_ws();
    if (i_ < u_.size()) return fail(r, "unexpected text after the arguments");
    r.call.arguments = std::move(args);
    r.ok = true;
    return r;
  }

 private:
  static bool is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  void skip_ws() {
    while (i_ < u_.size() && is_ws(u_[i_])) ++i_;
  }
  bool eat(int c) {
    if (i_ < u_.size() && u_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool error(std::string msg) {
    if (err_.empty()) {
      err_ = std::move(msg);
      err_at_ = i_;
    }
    return false;
  }
  CallParse& fail(CallParse& r, const std::string& msg, size_t at = SIZE_MAX) {
    r.ok = false;
    r.error = fmt::format("{} at byte {}", msg, at == SIZE_MAX ? i_ : at);
    return r;
  }

  bool value(Json& out) {
    skip_ws();
    if (i_ >= u_.size()) return error("expected a value, found the end of the call");
    if (depth_ >= kMaxCallDepth) return error(fmt::format("values nested deeper than {}", kMaxCallDepth));
    const int c = u_[i_];
    if (c == kQuote) return string(out);
    if (c == '{') return object(out);
    if (c == '[') return array(out);
    return bare(out);
  }

  bool string(Json& out) {
    ++i_;  // the opening <|"|>
    std::string s;
    while (i_ < u_.size() && u_[i_] != kQuote) s += static_cast<char>(u_[i_++]);
    if (i_ >= u_.size()) return error("unterminated string");
    ++i_;
    out = std::move(s);
    return true;
  }

  bool key(std::string& k) {
    skip_ws();
    if (i_ < u_.size() && u_[i_] == kQuote) {
      Json s;
      if (!string(s)) return false;
      k = s.get<std::string>();
      return true;
    }
    const size_t at = i_;
    while (i_ < u_.size() && u_[i_] != ':' && u_[i_] != kQuote && u_[i_] != '{' && u_[i_] != '}' && u_[i_] != '[' &&
           u_[i_] != ']' && u_[i_] != ',')
      k += static_cast<char>(u_[i_++]);
    while (!k.empty() && is_ws(static_cast<unsigned char>(k.back()))) k.pop_back();
    if (k.empty()) {
      i_ = at;
      return error("expected a key");
    }
    return true;
  }

  bool object(Json& out) {
    ++i_;  // '{'
    ++depth_;
    out = Json::object();
    skip_ws();
    if (eat('}')) {
      --depth_;
      return true;
    }
    for (;;) {
      std::string k;
      if (!key(k)) return false;
      skip_ws();
      if (!eat(':')) return error(fmt::format("expected ':' after key '{}'", k));
      Json v;
      if (!value(v)) return false;
      out[k] = std::move(v);
      skip_ws();
      if (eat(',')) continue;
      if (eat('}')) break;
      return error(i_ >= u_.size() ? "unclosed '{'" : "expected ',' or '}'");
    }
    --depth_;
    return true;
  }

  bool array(Json& out) {
    ++i_;  // '['
    ++depth_;
    out = Json::array();
    skip_ws();
    if (eat(']')) {
      --depth_;
      return true;
    }
    for (;;) {
      Json v;
      if (!value(v)) return false;
      out.push_back(std::move(v));
      skip_ws();
      if (eat(',')) continue;
      if (eat(']')) break;
      return error(i_ >= u_.size() ? "unclosed '['" : "expected ',' or ']'");
    }
    --depth_;
    return true;
  }

  bool bare(Json& out) {
    const size_t at = i_;
    std::string s;
    while (i_ < u_.size() && u_[i_] != ',' && u_[i_] != '}' && u_[i_] != ']' && u_[i_] != kQuote)
      s += static_cast<char>(u_[i_++]);
    while (!s.empty() && is_ws(static_cast<unsigned char>(s.back()))) s.pop_back();
    if (s == "true" || s == "false") {
      out = s == "true";
      return true;
    }
    if (s == "null" || s == "None") {
      out = nullptr;
      return true;
    }
    if (number(s, out)) return true;
    i_ = at;
    return error(s.empty() ? "expected a value" : fmt::format("unquoted value '{}'", s.substr(0, 40)));
  }

  // A JSON number: -?digits(.digits)?([eE][+-]?digits)?; integers that fit stay integers.
  static bool number(const std::string& s, Json& out) {
    size_t k = 0;
    auto digits = [&] {
      const size_t b = k;
      while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
      return k > b;
    };
    if (k < s.size() && s[k] == '-') ++k;
    if (!digits()) return false;
    bool integral = true;
    if (k < s.size() && s[k] == '.') {
      ++k;
      integral = false;
      if (!digits()) return false;
    }
    if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
      ++k;
      integral = false;
      if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
      if (!digits()) return false;
    }
    if (k != s.size()) return false;
    if (integral) {
      int64_t v = 0;
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
        out = v;
        return true;
      }
    }
    double d = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
    if (r.ec != std::errc()) return false;  // out of range too: reported, never a silent 0
    out = d;
    return true;
  }

  std::vector<int> u_;
  size_t i_ = 0;
  int depth_ = 0;
  std::string err_;
  size_t err_at_ = 0;
};

}  // namespace

CallParse parse_call(std::span<const int32_t> body, const Tokenizer& tok, const ChatTokens& t) {
  std::vector<int> units;
  std::vector<int32_t> run;
  auto flush = [&] {
    if (run.empty()) return;
    for (char c : tok.decode(run)) units.push_back(static_cast<unsigned char>(c));
    run.clear();
  };
  for (int32_t id : body) {
    if (id == t.quote) {
      flush();
      units.push_back(kQuote);
    } else if (tok.is_special(id) || t.is_marker(id)) {
      CallParse r;
      r.error = fmt::format("unexpected '{}' inside a tool call", tok.token(id));
      return r;
    } else {
      run.push_back(id);
    }
  }
  flush();
  return ArgParser(std::move(units)).run();
}

}  // namespace dg
