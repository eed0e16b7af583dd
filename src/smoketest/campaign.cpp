#include "smoketest/campaign.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>

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

void smoke_rows(const Engine& e, const CampaignArm& arm, const std::string& path, std::vector<Json>& rows,
                const std::function<void(const Json&)>& emit) {
  const Battery b = load_battery(path);
  SamplerOptions opt = arm.sampler;
  if (!arm.seed_given) opt.seed = b.seed;
  const StopIds ids = stop_ids(e);
  for (const BatteryPrompt& p : b.prompts) {
    const auto t0 = std::chrono::steady_clock::now();
    const Outcome o = run_prompt(e, p, opt, arm.tools);
    const std::vector<std::string> why = check_outcome(p, o, ids);
    const bool known = std::find(p.known_fail.begin(), p.known_fail.end(), sampler_profile_name(opt.profile)) !=
                       p.known_fail.end();
    const char* verdict = why.empty() ? (known ? "xpass" : "pass") : (known ? "xfail" : "fail");
    Json row{{"arm", arm.name}, {"battery", "smoke"}, {"prompt", p.name}, {"verdict", verdict}, {"reasons", why},
             {"answer", o.rounds.back().content}, {"seconds", seconds_since(t0)}};
    row.update(block_stats(o.rounds));
    rows.push_back(row);
    emit(row);
  }
}

void program_rows(const Engine& e, const CampaignArm& arm, const std::string& path, std::vector<Json>& rows,
                  const std::function<void(const Json&)>& emit) {
  for (const ProgramPrompt& p : load_programs(path)) {
    const auto t0 = std::chrono::steady_clock::now();
    ChatOptions co;
    co.sampler = arm.sampler;
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
      cases.push_back({{"pass", c.pass}, {"timed_out", c.timed_out}, {"exit_code", c.exit_code}, {"output", c.output}});
    Json row{{"arm", arm.name}, {"battery", "programmatic"}, {"prompt", p.name}, {"language", p.language},
             {"verdict", verdict_name(r.verdict)}, {"fenced", r.fenced}, {"program", r.program},
             {"diagnostics", r.diagnostics.substr(0, 2000)}, {"cases", cases}, {"seconds", seconds_since(t0)}};
    row.update(block_stats({round}));
    rows.push_back(row);
    emit(row);
  }
}

}  // namespace

std::vector<Json> run_campaign(const Engine& engine, const std::vector<CampaignArm>& arms,
                               const std::vector<CampaignBattery>& batteries, const std::string& dir, bool progress) {
  DG_CHECK(!arms.empty() && !batteries.empty(), "a campaign needs at least one arm and one battery");
  std::filesystem::create_directories(dir);
  Json meta{{"model", engine.checkpoint().dir}, {"backend", engine.options().backend}, {"arms", Json::array()},
            {"batteries", Json::array()}};
  for (const CampaignArm& a : arms) meta["arms"].push_back({{"name", a.name}, {"options", a.options}});
  for (const CampaignBattery& b : batteries) meta["batteries"].push_back({{"kind", b.kind}, {"path", b.path}});
  std::ofstream(dir + "/campaign.json") << meta.dump(1) << "\n";
  std::ofstream out(dir + "/results.jsonl", std::ios::binary | std::ios::trunc);
  DG_CHECK(out.good(), "cannot write '{}/results.jsonl'", dir);
  std::vector<Json> rows;
  auto emit = [&](const Json& row) {
    out << row.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    out.flush();
    if (progress)
      fmt::print(stderr, "campaign: {} · {} · {}: {}\n", row["arm"].get<std::string>(),
                 row["battery"].get<std::string>(), row["prompt"].get<std::string>(),
                 row["verdict"].get<std::string>());
  };
  for (const CampaignArm& a : arms)
    for (const CampaignBattery& b : batteries) {
      DG_CHECK(b.kind == "smoke" || b.kind == "programmatic", "unknown battery kind '{}' (smoke or programmatic)",
               b.kind);
      if (b.kind == "smoke") smoke_rows(engine, a, b.path, rows, emit);
      if (b.kind == "programmatic") program_rows(engine, a, b.path, rows, emit);
    }
  std::ofstream(dir + "/report.txt") << campaign_report(rows);
  return rows;
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
    c.seconds += r.value("seconds", 0.0);
  }
  std::string s = fmt::format("{:<16} {:<13} {:>7}  {:<44} {:>9} {:>10} {:>8}\n", "arm", "battery", "prompts",
                              "verdicts", "tok/fwd", "steps/blk", "seconds");
  for (const auto& key : order) {
    const Cell& c = cells[key];
    std::string v;
    for (const auto& [name, n] : c.verdicts) v += fmt::format("{}{} {}", v.empty() ? "" : ", ", n, name);
    if (c.fenced > 0) v += fmt::format(" ({} fenced)", c.fenced);
    if (c.attempts > 0) v += fmt::format(" ({} tool attempts)", c.attempts);
    s += fmt::format("{:<16} {:<13} {:>7}  {:<44} {:>9.2f} {:>10.2f} {:>8.1f}\n", key.first, key.second, c.prompts, v,
                     c.forwards ? static_cast<double>(c.tokens) / c.forwards : 0.0,
                     c.blocks ? static_cast<double>(c.steps) / c.blocks : 0.0, c.seconds);
  }
  return s;
}

}  // namespace dg::smoke
