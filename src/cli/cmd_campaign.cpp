// `diffgemma campaign`: sampler-option arms × batteries in one process (smoketest/campaign.h). Every arm's options
// are parsed by the same option table as `ask` before the model is opened, so a typo fails at once.
//   diffgemma campaign --arm base= --arm 'ref=--sampler reference' --battery smoke --battery programmatic --out DIR
//   diffgemma campaign --arm off='--tool-check off' --arm repair= --only tool_multiply --seeds 1-50 --out DIR
//   diffgemma campaign --report DIR     (the summary from DIR/results.jsonl, no model)
#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/app.h"
#include "cli/data_paths.h"
#include "cli/sampler_options.h"
#include "core/error.h"
#include "smoketest/battery.h"
#include "smoketest/campaign.h"
#include "smoketest/programs.h"

namespace dg::cli {
namespace {

struct CampaignOptions {
  ModelOptions model;
  std::vector<std::string> arms, batteries, only;
  std::string seeds;
  std::string out, report, smoke_file = smoketest_battery(), programs_file = programmatic_battery();
  bool quiet = false;
};

struct ParsedArm {
  std::string name, options;
  SamplerFlags sampler;
  ToolCheckFlags tools;
  bool seed_given = false;
};

ParsedArm parse_arm(const std::string& spec) {
  const size_t eq = spec.find('=');
  DG_CHECK(eq != std::string::npos && eq > 0, "--arm '{}': expected NAME=OPTIONS (OPTIONS may be empty)", spec);
  ParsedArm a;
  a.name = spec.substr(0, eq);
  a.options = spec.substr(eq + 1);
  CLI::App app("arm " + a.name);
  a.sampler.add_to(&app);
  a.tools.add_to(&app);
  try {
    app.parse(a.options, false);
  } catch (const CLI::ParseError& e) {
    fail("--arm '{}': {}", spec, e.what());
  }
  a.seed_given = app.count("--seed") > 0;
  return a;
}

// What the command line asks, checked as the command line is (a usage error, exit 2, before the model loads): the
// arms (their options, each name once), the batteries, the seeds, --out, and --only naming prompts that exist (a
// misspelt one ran nothing and exited 0).
struct CampaignPlan {
  std::vector<ParsedArm> arms;
  std::vector<smoke::CampaignBattery> batteries;
  smoke::CampaignScope scope;
};

CampaignPlan plan_campaign(const CampaignOptions& o) {
  const auto usage = [](const Error& e) { return CLI::ValidationError(e.what()); };
  if (o.out.empty()) throw CLI::ValidationError("give --out DIR (or --report DIR to summarise an earlier campaign)");
  CampaignPlan plan;
  for (const std::string& spec : o.arms.empty() ? std::vector<std::string>{"default="} : o.arms) {
    try {
      plan.arms.push_back(parse_arm(spec));
    } catch (const Error& e) {
      throw usage(e);
    }
    for (size_t i = 0; i + 1 < plan.arms.size(); ++i)
      if (plan.arms[i].name == plan.arms.back().name)
        throw CLI::ValidationError(fmt::format("--arm '{}': an arm named '{}' is already given (the results are "
                                               "told apart by name)", spec, plan.arms.back().name));
  }
  for (const std::string& b : o.batteries.empty() ? std::vector<std::string>{"smoke"} : o.batteries) {
    if (b != "smoke" && b != "programmatic")
      throw CLI::ValidationError(fmt::format("--battery '{}': smoke or programmatic", b));
    plan.batteries.push_back({b, b == "smoke" ? o.smoke_file : o.programs_file});
  }
  try {
    if (!o.seeds.empty()) plan.scope.seeds = smoke::parse_seeds(o.seeds);
  } catch (const Error& e) {
    throw CLI::ValidationError(fmt::format("--seeds: {}", e.what()));
  }
  plan.scope.only = o.only;
  std::vector<std::string> names;  // the prompts of the chosen batteries (a file that cannot be read: exit 1)
  for (const smoke::CampaignBattery& b : plan.batteries) {
    if (b.kind == "smoke")
      for (const smoke::BatteryPrompt& p : smoke::load_battery(b.path).prompts) names.push_back(p.name);
    else
      for (const smoke::ProgramPrompt& p : smoke::load_programs(b.path)) names.push_back(p.name);
  }
  for (const std::string& name : o.only)
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw CLI::ValidationError(fmt::format("--only: no prompt '{}' in the chosen batteries ({})", name,
                                             fmt::join(o.batteries.empty() ? std::vector<std::string>{"smoke"}
                                                                           : o.batteries, ", ")));
  return plan;
}

void run_campaign_cmd(const CampaignOptions& o) {
  if (!o.report.empty()) {
    fmt::print("{}", smoke::campaign_report(smoke::read_campaign(o.report)));
    return;
  }
  const CampaignPlan plan = plan_campaign(o);
  const std::vector<ParsedArm>& parsed = plan.arms;
  const std::vector<smoke::CampaignBattery>& batteries = plan.batteries;
  const smoke::CampaignScope& scope = plan.scope;
  const auto engine = EngineCore::open(engine_options(o.model));
  std::vector<smoke::CampaignArm> arms;
  for (const ParsedArm& p : parsed)
    arms.push_back({p.name, p.options, p.sampler.resolve(*engine), p.seed_given, p.tools.resolve()});
  const std::vector<Json> rows = smoke::run_campaign(*engine, arms, batteries, o.out, !o.quiet, scope);
  fmt::print("{}", smoke::campaign_report(rows));
}

}  // namespace

void register_campaign(CLI::App& app) {
  auto o = std::make_shared<CampaignOptions>();
  CLI::App* cmd = app.add_subcommand("campaign", "run sampler-option arms against batteries; one results directory");
  add_model_options(cmd, o->model);
  cmd->add_option("--arm", o->arms,
                  "NAME=OPTIONS: an arm, with any sampler and --tool-check options of `ask` (repeatable; default: "
                  "one arm with the defaults)")
      ->type_name("NAME=OPTS");
  cmd->add_option("--battery", o->batteries, "smoke | programmatic (repeatable; default smoke)");
  cmd->add_option("--smoke-battery", o->smoke_file, "the smoketest battery file")->capture_default_str();
  cmd->add_option("--programs", o->programs_file, "the programmatic battery file")->capture_default_str();
  cmd->add_option("--seeds", o->seeds,
                  "run every prompt once per seed: A-B, a list A,B,C or a mix (default: the arm's --seed, else the "
                  "smoketest battery's)")
      ->type_name("SEEDS");
  cmd->add_option("--only", o->only, "run only these prompts (repeatable)");
  cmd->add_option("--out", o->out, "results directory (results.jsonl, campaign.json, report.txt)");
  cmd->add_option("--report", o->report, "print the summary of an earlier campaign's directory (no model needed)");
  cmd->add_flag("-q,--quiet", o->quiet, "no per-prompt progress on stderr");
  cmd->callback([o] { run_campaign_cmd(*o); });
}

}  // namespace dg::cli
