#include "smoketest/campaign.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/chat.h"
#include "smoketest/battery.h"
#include "smoketest/programs.h"
#include "smoketest/runner.h"

namespace dg::smoke {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Json block_stats(const std::vector<Round>& rounds) {
  int blocks = 0, steps = 0, forwards = 0, tokens = 0, attempts = 0;
  for (const Round& r : rounds) {
    for (const BlockInfo& b : r.blocks) {
      ++blocks;
      steps += b.steps;
      forwards += b.forwards;
    }
    tokens += r.tokens;
    attempts += r.tool_attempts;
  }
  return {{"blocks", blocks}, {"steps", steps}, {"forwards", forwards}, {"tokens", tokens}, {"tool_attempts", attempts}};
}

bool wanted(const CampaignScope& scope, const std::string& prompt) {
  return scope.only.empty() || std::find(scope.only.begin(), scope.only.end(), prompt) != scope.only.end();
}

// The seeds a prompt runs with: the scope's, else the arm's seed (given) or the fallback.
std::vector<std::optional<uint64_t>> seeds_of(const CampaignScope& scope) {
  std::vector<std::optional<uint64_t>> out;
  for (const uint64_t s : scope.seeds) out.emplace_back(s);
  if (out.empty()) out.emplace_back(std::nullopt);
  return out;
}

// Whether the first reply called declared tools, every call's arguments validating (as handed on).
bool tool_valid(const EngineCore& e, const BatteryPrompt& p, const Round& first) {
  if (first.tool_calls.empty() || first.tool_errors > 0) return false;
  const ToolSet tools = ToolSet::from(p.tools);
  Reply r;
  r.tool_calls = first.tool_calls;
  return tools.check(r, e.tokenizer(), ChatTokens::from(e.tokenizer())).empty();
}

void smoke_rows(const EngineCore& e, const CampaignArm& arm, const std::string& path, const CampaignScope& scope,
                std::vector<Json>& rows, const std::function<void(const Json&)>& emit) {
  const Battery b = load_battery(path);
  const StopIds ids = stop_ids(e);
  for (const std::optional<uint64_t> seed : seeds_of(scope))
    for (const BatteryPrompt& p : b.prompts) {
      if (!wanted(scope, p.name)) continue;
      SamplerOptions opt = arm.sampler;
      opt.seed = seed ? *seed : arm.seed_given ? arm.sampler.seed : b.seed;
      const auto t0 = std::chrono::steady_clock::now();
      const Outcome o = run_prompt(e, p, opt, arm.tools);
      const std::vector<std::string> why = check_outcome(p, o, ids);
      const bool known = std::find(p.known_fail.begin(), p.known_fail.end(), sampler_profile_name(opt.profile)) !=
                         p.known_fail.end();
      const char* verdict = why.empty() ? (known ? "xpass" : "pass") : (known ? "xfail" : "fail");
      Json row{{"arm", arm.name}, {"battery", "smoke"}, {"prompt", p.name}, {"seed", opt.seed}, {"verdict", verdict},
               {"reasons", why}, {"answer", o.rounds.back().content}, {"seconds", seconds_since(t0)}};
      if (!p.tools.empty()) row["tool_valid"] = tool_valid(e, p, o.rounds.front());
      row.update(block_stats(o.rounds));
      rows.push_back(row);
      emit(row);
    }
}

void program_rows(const EngineCore& e, const CampaignArm& arm, const std::string& path, const CampaignScope& scope,
                  std::vector<Json>& rows, const std::function<void(const Json&)>& emit) {
  const std::vector<ProgramPrompt> prompts = load_programs(path);
  for (const std::optional<uint64_t> seed : seeds_of(scope))
    for (const ProgramPrompt& p : prompts) {
      if (!wanted(scope, p.name)) continue;
      const auto t0 = std::chrono::steady_clock::now();
      ChatOptions co;
      co.sampler = arm.sampler;
      if (seed) co.sampler.seed = *seed;
      co.tool_check = arm.tools;
      ChatSession chat(e, co);
      Round round;
      ChatEvents ev;
      ev.on_block = [&](const BlockInfo& b) { round.blocks.push_back(b); };
      const TurnResult t = chat.user(p.prompt, &ev);
      round.tokens = t.tokens;
      const ProgramResult r = judge_program(p, t.reply.content);
      Json cases = Json::array();
      for (const CaseRun& c : r.cases)
        cases.push_back(
            {{"pass", c.pass}, {"timed_out", c.timed_out}, {"exit_code", c.exit_code}, {"output", c.output}});
      Json row{{"arm", arm.name}, {"battery", "programmatic"}, {"prompt", p.name}, {"seed", co.sampler.seed},
               {"language", p.language}, {"verdict", verdict_name(r.verdict)}, {"fenced", r.fenced},
               {"program", r.program},
               {"diagnostics", r.diagnostics.substr(0, 2000)}, {"cases", cases}, {"seconds", seconds_since(t0)}};
      row.update(block_stats({round}));
      rows.push_back(row);
      emit(row);
    }
}

}  // namespace

std::vector<Json> run_campaign(const EngineCore& engine, const std::vector<CampaignArm>& arms,
                               const std::vector<CampaignBattery>& batteries, const std::string& dir, bool progress,
                               const CampaignScope& scope) {
  DG_CHECK(!arms.empty() && !batteries.empty(), "a campaign needs at least one arm and one battery");
  std::filesystem::create_directories(dir);
  Json meta{{"model", engine.checkpoint().dir}, {"backend", engine.options().backend}, {"arms", Json::array()},
            {"batteries", Json::array()}};
  for (const CampaignArm& a : arms) meta["arms"].push_back({{"name", a.name}, {"options", a.options}});
  for (const CampaignBattery& b : batteries) meta["batteries"].push_back({{"kind", b.kind}, {"path", b.path}});
  std::ofstream out(dir + "/results.jsonl", std::ios::binary | std::ios::trunc);
  DG_CHECK(out.good(), "cannot write '{}/results.jsonl'", dir);
  Json seeds = Json::array();
  for (const uint64_t v : scope.seeds) seeds.push_back(v);
  meta["seeds"] = seeds;
  meta["only"] = scope.only;
  std::ofstream(dir + "/campaign.json") << meta.dump(1) << "\n";
  std::vector<Json> rows;
  auto emit = [&](const Json& row) {
    out << row.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    out.flush();
    if (progress)
      fmt::print(stderr, "campaign: {} · {} · {} · seed {}: {}\n", row["arm"].get<std::string>(),
                 row["battery"].get<std::string>(), row["prompt"].get<std::string>(), row["seed"].get<uint64_t>(),
                 row["verdict"].get<std::string>());
  };
  for (const CampaignArm& a : arms)
    for (const CampaignBattery& b : batteries) {
      DG_CHECK(b.kind == "smoke" || b.kind == "programmatic", "unknown battery kind '{}' (smoke or programmatic)",
               b.kind);
      if (b.kind == "smoke") smoke_rows(engine, a, b.path, scope, rows, emit);
      if (b.kind == "programmatic") program_rows(engine, a, b.path, scope, rows, emit);
    }
  std::ofstream(dir + "/report.txt") << campaign_report(rows);
  return rows;
}

std::vector<uint64_t> parse_seeds(const std::string& text) {
  std::vector<uint64_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    const size_t dash = part.find('-');
    uint64_t lo = 0, hi = 0;
    try {
      size_t used = 0;
      lo = std::stoull(part.substr(0, dash), &used);
      DG_CHECK(used == (dash == std::string::npos ? part.size() : dash), "");
      hi = lo;
      if (dash != std::string::npos) {
        hi = std::stoull(part.substr(dash + 1), &used);
        DG_CHECK(used == part.size() - dash - 1, "");
      }
    } catch (const std::exception&) {
      fail("seeds '{}': '{}' is not a seed or a range A-B", text, part);
    }
    DG_CHECK(lo <= hi && hi - lo < 100000, "seeds '{}': bad range '{}'", text, part);
    for (uint64_t v = lo; v <= hi; ++v) out.push_back(v);
    at = comma + 1;
  }
  return out;
}

std::vector<Json> read_campaign(const std::string& dir) {
  const std::string path = dir + "/results.jsonl";
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read '{}' (a directory written by `diffgemma campaign --out`)", path);
  std::vector<Json> rows;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, false);
    DG_CHECK(!j.is_discarded() && j.is_object() && j.contains("arm") && j.contains("battery") &&
                 j.contains("verdict"),
             "{}:{}: not a campaign result line", path, n);
    rows.push_back(std::move(j));
  }
  return rows;
}

std::string campaign_report(const std::vector<Json>& rows) {
  struct Cell {
    int prompts = 0, tokens = 0, forwards = 0, steps = 0, blocks = 0, fenced = 0, attempts = 0;
    int tool_rows = 0, tool_valid = 0;
    double seconds = 0;
    std::map<std::string, int> verdicts;
  };
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, Cell> cells;
  for (const Json& r : rows) {
    const auto key = std::make_pair(r["arm"].get<std::string>(), r["battery"].get<std::string>());
    if (cells.count(key) == 0) order.push_back(key);
    Cell& c = cells[key];
    ++c.prompts;
    ++c.verdicts[r["verdict"].get<std::string>()];
    c.tokens += r.value("tokens", 0);
    c.forwards += r.value("forwards", 0);
    c.steps += r.value("steps", 0);
    c.blocks += r.value("blocks", 0);
    c.fenced += r.value("fenced", false) ? 1 : 0;
    c.attempts += r.value("tool_attempts", 0);
    if (r.contains("tool_valid")) {
      ++c.tool_rows;
      c.tool_valid += r["tool_valid"].get<bool>() ? 1 : 0;
    }
    c.seconds += r.value("seconds", 0.0);
  }
  std::string s = fmt::format("{:<16} {:<13} {:>7}  {:<44} {:>11} {:>9} {:>10} {:>8}\n", "arm", "battery", "runs",
                              "verdicts", "valid calls", "tok/fwd", "steps/blk", "seconds");
  for (const auto& key : order) {
    const Cell& c = cells[key];
    std::string v;
    for (const auto& [name, n] : c.verdicts) v += fmt::format("{}{} {}", v.empty() ? "" : ", ", n, name);
    if (c.fenced > 0) v += fmt::format(" ({} fenced)", c.fenced);
    if (c.attempts > 0) v += fmt::format(" ({} tool attempts)", c.attempts);
    const std::string calls = c.tool_rows > 0 ? fmt::format("{}/{}", c.tool_valid, c.tool_rows) : "-";
    s += fmt::format("{:<16} {:<13} {:>7}  {:<44} {:>11} {:>9.2f} {:>10.2f} {:>8.1f}\n", key.first, key.second,
                     c.prompts, v, calls,
                     c.forwards ? static_cast<double>(c.tokens) / c.forwards : 0.0,
                     c.blocks ? static_cast<double>(c.steps) / c.blocks : 0.0, c.seconds);
  }
  return s;
}

}  // namespace dg::smoke
