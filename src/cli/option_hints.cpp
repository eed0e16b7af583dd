#include "cli/option_hints.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string_view>
#include <utility>

namespace dg::cli {
namespace {

// Names other tools use that no spelling rule below relates to this engine's (only offered where the subcommand has
// them); --max-tokens, --model-path and the like are found by their words.
struct Alias {
  std::string_view name;
  std::vector<std::string_view> ours;
  std::string_view note;
};
const Alias kAliases[] = {
    {"n-predict", {"max-new-tokens"}, ""},
    {"temperature", {"t-max", "t-min"}, " (the temperature falls from --t-max at a block's first step to --t-min)"},
    {"temp", {"t-max", "t-min"}, " (the temperature falls from --t-max at a block's first step to --t-min)"},
};

// Edits from a to b: insertions, deletions, substitutions and swaps of two neighbours (a typo's "prot" for "port").
size_t edits(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::multiset<std::string> words(std::string_view name) {
  std::multiset<std::string> out;
  size_t at = 0;
  while (at <= name.size()) {
    const size_t end = std::min(name.find('-', at), name.size());
    if (end > at) out.emplace(name.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// Whether every word of `a` is a word of `b` and `b` has at most one more.
bool words_within(std::string_view a, std::string_view b) {
  const auto wa = words(a), wb = words(b);
  return wb.size() <= wa.size() + 1 && std::includes(wb.begin(), wb.end(), wa.begin(), wa.end());
}

}  // namespace

std::vector<std::string> unknown_option_hints(const CLI::App& cmd, const std::vector<std::string>& args) {
  std::vector<std::string> names;  // the subcommand's long option names, without dashes
  for (const CLI::Option* o : cmd.get_options())
    for (const std::string& l : o->get_lnames())
      if (l != "help") names.push_back(l);
  const auto has = [&](std::string_view n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  std::vector<std::string> out;
  for (const std::string& arg : args) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    std::vector<std::string> ours;
    std::string note;
    for (const Alias& a : kAliases) {
      if (a.name != name) continue;
      for (const std::string_view o : a.ours)
        if (has(o)) ours.emplace_back(o);
      if (!ours.empty()) note = a.note;
    }
    if (ours.empty()) {
      // Close spellings and cut-short names first, then names of the same words.
      const size_t limit = name.size() <= 4 ? 1 : 2;
      std::vector<std::pair<size_t, std::string>> ranked;
      for (const std::string& n : names) {
        const size_t e = edits(name, n);
        if (e <= limit || (name.size() >= 4 && n.compare(0, name.size(), name) == 0))
          ranked.emplace_back(e, n);
        else if (words_within(name, n) || words_within(n, name))
          ranked.emplace_back(100 + e, n);
      }
      std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (const auto& [rank, n] : ranked) ours.push_back(n);
    }
    if (ours.empty()) continue;
    if (ours.size() > 3) ours.resize(3);
    std::string line = "--" + name + ": did you mean --" + ours[0];
    for (size_t i = 1; i < ours.size(); ++i) line += (i + 1 == ours.size() ? " or --" : ", --") + ours[i];
    out.push_back(line + "?" + note);
  }
  return out;
}

std::string environment_value_hint(const CLI::App& cmd, const std::string& error, int argc, const char* const* argv) {
  for (const CLI::Option* o : cmd.get_options()) {
    const std::string& env = o->get_envname();
    if (env.empty() || o->get_lnames().empty()) continue;
    const std::string flag = "--" + o->get_lnames().front();
    if (error.rfind(flag + ":", 0) != 0) continue;
    const char* value = std::getenv(env.c_str());
    if (value == nullptr) return "";
    for (int i = 1; i < argc; ++i) {
      const std::string_view a(argv[i]);
      if (a == flag || a.rfind(flag + "=", 0) == 0) return "";
      for (const std::string& s : o->get_snames())
        if (a == "-" + s) return "";
    }
    return "the value of " + flag + " came from the environment: " + env + "=" + value;
  }
  return "";
}

}  // namespace dg::cli
