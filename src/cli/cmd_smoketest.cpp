// `diffgemma smoketest`: runs a battery of prompts (docs/SMOKETEST.md) through the chat engine path, prints a table
// and the sampler's statistics, and exits 4 when a prompt fails that the battery does not list as a known failure.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/data_paths.h"
#include "cli/sampler_options.h"
#include "core/error.h"
#include "smoketest/battery.h"
#include "smoketest/runner.h"

namespace dg::cli {
namespace {

struct SmokeOptions {
  ModelOptions model;
  SamplerFlags sampler;
  ToolCheckFlags tool_check;
  std::string battery = smoketest_battery();
  std::vector<std::string> only;
  std::string same_as;
  bool json = false, quiet = false;
  CLI::App* cmd = nullptr;
};

struct Row {
  const smoke::BatteryPrompt* prompt = nullptr;
  smoke::Outcome outcome;
  std::vector<std::string> failures;
  bool known_fail = false;  // the battery expects this prompt to fail with this sampler profile
  double seconds = 0;
  bool passed() const { return failures.empty(); }
  // PASS, FAIL, XFAIL (a known failure, failing), XPASS (a known failure that passed: update the battery)
  const char* status() const { return passed() ? (known_fail ? "XPASS" : "PASS") : (known_fail ? "XFAIL" : "FAIL"); }
  bool unexpected_failure() const { return !passed() && !known_fail; }
};

std::string one_line(std::string s, size_t width) {
  for (char& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  if (s.size() > width) s = s.substr(0, width - 3) + "...";  // bytes: may cut a UTF-8 character in a log line
  return s;
}

std::string steps_list(const smoke::Outcome& o) {
  std::vector<int> steps;
  for (const smoke::Round& r : o.rounds)
    for (const BlockInfo& b : r.blocks) steps.push_back(b.steps);
  return fmt::format("{}", fmt::join(steps, ","));
}

std::set<std::string> passed_in(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read '{}' (--same-as wants a file written by smoketest --json)", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  DG_CHECK(!j.is_discarded() && j.contains("prompts") && j["prompts"].is_array(),
           "'{}' is not a smoketest --json result", path);
  std::set<std::string> out;
  for (const auto& p : j["prompts"])
    if (p.value("passed", false)) out.insert(p.value("name", ""));
  return out;
}

nlohmann::json stats_json(const smoke::Stats& s) {
  return {{"blocks", s.blocks},
          {"steps", s.steps},
          {"forwards", s.forwards},
          {"committed_tokens", s.committed},
          {"answer_tokens", s.answer_tokens},
          {"steps_per_block", s.steps_per_block()},
          {"answer_tokens_per_forward", s.answer_tokens_per_forward()},
          {"committed_tokens_per_forward", s.committed_per_forward()},
          {"stops", {{"confident", s.confident}, {"plateau", s.plateau}, {"entropy", s.entropy}, {"max_steps", s.budget}}},
          {"rerolls", s.rerolls},
          {"trims", s.trims},
          {"pad_gated_steps", s.pad_gated}};
}

void run_smoketest(const SmokeOptions& o) {
  const smoke::Battery battery = smoke::load_battery(o.battery);
  for (const std::string& name : o.only)  // a usage error (exit 2), before the model loads
    if (std::none_of(battery.prompts.begin(), battery.prompts.end(), [&](const auto& p) { return p.name == name; }))
      throw CLI::ValidationError("--only", fmt::format("no prompt '{}' in {}", name, o.battery));
  auto engine = EngineCore::open(engine_options(o.model));
  // The battery's profile, seed and answer budget, unless the command line gives them.
  const bool profile_given = o.cmd->get_option("--sampler")->count() > 0;
  SamplerOptions base = engine->default_sampler(sampler_profile_from_name(profile_given ? o.sampler.profile
                                                                                        : battery.sampler));
  base.seed = battery.seed;
  base.max_new_tokens = battery.max_new_tokens;
  const SamplerOptions opt = o.sampler.apply(base);
  const smoke::StopIds ids = smoke::stop_ids(*engine);
  if (battery.canvas_length > 0 && battery.canvas_length != engine->config().canvas && !o.quiet)
    fmt::print(stderr, "smoketest: warning: the battery's budgets were measured at canvas {}, this model has {}\n",
               battery.canvas_length, engine->config().canvas);

  const std::string head = fmt::format("smoketest: {} ({}, {} sampler, seed {}), {}", o.model.model, o.model.backend,
                                       sampler_profile_name(opt.profile), opt.seed, o.battery);
  if (!o.json) fmt::print("{}\n  {:<18} {:<11} {:<6} {:>6} {:<11} {}\n", head, "name", "kind", "result", "tokens",
                          "steps", "answer");
  std::vector<Row> rows;
  smoke::Stats stats;
  for (const smoke::BatteryPrompt& p : battery.prompts) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), p.name) == o.only.end()) continue;
    Row row;
    row.prompt = &p;
    const auto t0 = std::chrono::steady_clock::now();
    row.outcome = smoke::run_prompt(*engine, p, opt, o.tool_check.resolve());
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    row.failures = smoke::check_outcome(p, row.outcome, ids);
    row.known_fail = std::find(p.known_fail.begin(), p.known_fail.end(), sampler_profile_name(opt.profile)) !=
                     p.known_fail.end();
    for (const smoke::Round& r : row.outcome.rounds) stats.add(r);
    if (!o.json) {
      const smoke::Round& last = row.outcome.rounds.back();
      fmt::print("  {:<18} {:<11} {:<6} {:>6} {:<11} {}\n", p.name, p.kind, row.status(),
                 last.tokens, steps_list(row.outcome), one_line(last.content, 60));
      for (const std::string& why : row.failures) fmt::print("  {:<18}   ↳ {}\n", "", one_line(why, 110));
      std::fflush(stdout);
    }
    rows.push_back(std::move(row));
  }

  std::vector<std::string> failed, known, xpass;
  for (const Row& r : rows) {
    if (r.unexpected_failure()) failed.push_back(r.prompt->name);
    if (r.known_fail && !r.passed()) known.push_back(r.prompt->name);
    if (r.known_fail && r.passed()) xpass.push_back(r.prompt->name);
  }
  const size_t n_passed = static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.passed(); }));
  std::vector<std::string> differs;  // --same-as: prompts whose verdict differs from the earlier run
  if (!o.same_as.empty()) {
    const std::set<std::string> before = passed_in(o.same_as);
    for (const Row& r : rows)
      if ((before.count(r.prompt->name) > 0) != r.passed()) differs.push_back(r.prompt->name);
  }

  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model.model;
    j["backend"] = o.model.backend;
    j["sampler"] = sampler_profile_name(opt.profile);
    j["seed"] = opt.seed;
    j["battery"] = o.battery;
    j["passed"] = n_passed;
    j["total"] = rows.size();
    j["unexpected_failures"] = failed;
    j["known_failures"] = known;
    j["unexpected_passes"] = xpass;
    j["prompts"] = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json p = {{"name", r.prompt->name}, {"kind", r.prompt->kind}, {"passed", r.passed()},
                          {"status", r.status()}, {"failures", r.failures}, {"seconds", r.seconds}};
      p["rounds"] = nlohmann::json::array();
      for (const smoke::Round& rd : r.outcome.rounds) {
        nlohmann::json calls = nlohmann::json::array();
        for (const ToolCall& c : rd.tool_calls)
          calls.push_back({{"name", c.name}, {"arguments", nlohmann::json::parse(c.arguments.dump())}});
        nlohmann::json steps = nlohmann::json::array(), ends = nlohmann::json::array();
        for (const BlockInfo& b : rd.blocks) {
          steps.push_back(b.steps);
          ends.push_back(stop_rule_name(b.stop));
        }
        p["rounds"].push_back({{"content", rd.content}, {"reasoning", rd.reasoning}, {"tool_calls", calls},
                               {"stop_token", rd.stop_token}, {"tokens", rd.tokens}, {"steps", steps},
                               {"block_ends", ends}, {"tool_errors", rd.tool_errors},
                               {"tool_attempts", rd.tool_attempts}});
      }
      j["prompts"].push_back(p);
    }
    j["stats"] = stats_json(stats);
    if (!o.same_as.empty()) j["differs_from_same_as"] = differs;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    fmt::print("passed {}/{}{}{}{}\n", n_passed, rows.size(),
               failed.empty() ? "" : fmt::format("; failed: {}", fmt::join(failed, ", ")),
               known.empty() ? "" : fmt::format("; known failures: {}", fmt::join(known, ", ")),
               xpass.empty() ? "" : fmt::format("; unexpected passes (update the battery): {}", fmt::join(xpass, ", ")));
    fmt::print("sampler: {} blocks, {:.2f} steps per block, {:.2f} answer tokens per forward ({:.2f} committed "
               "tokens, padding after the stop included); block ends: confident {}, plateau {}, entropy {}, "
               "step budget {}; re-rolls {}, confidence trims {}, pad-gated steps {}\n",
               stats.blocks, stats.steps_per_block(), stats.answer_tokens_per_forward(), stats.committed_per_forward(),
               stats.confident, stats.plateau, stats.entropy, stats.budget, stats.rerolls, stats.trims,
               stats.pad_gated);
    if (!o.same_as.empty())
      fmt::print("same pass set as {}: {}\n", o.same_as,
                 differs.empty() ? "yes" : fmt::format("no (differs: {})", fmt::join(differs, ", ")));
  }
  if (!failed.empty() || !differs.empty()) throw CommandExit{4};
}

}  // namespace

void register_smoketest(CLI::App& app) {
  auto o = std::make_shared<SmokeOptions>();
  CLI::App* cmd = app.add_subcommand("smoketest", "run a battery of prompts with known answers; exit 4 on an unexpected failure");
  o->cmd = cmd;
  add_model_options(cmd, o->model);
  cmd->add_option("--battery", o->battery, "battery JSON (docs/SMOKETEST.md)")->capture_default_str();
  cmd->add_option("--only", o->only, "run only these prompts (by name; repeatable)");
  cmd->add_option("--same-as", o->same_as, "also fail unless the pass set equals this earlier --json result's");
  cmd->add_flag("--json", o->json, "print one JSON object (every prompt's rounds and verdict, sampler statistics)");
  cmd->add_flag("-q,--quiet", o->quiet, "no warnings on stderr");
  o->tool_check.add_to(cmd);
  o->sampler.add_to(cmd);
  cmd->callback([o] { run_smoketest(*o); });
}

}  // namespace dg::cli
