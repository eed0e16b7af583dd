// `diffgemma campaign`: sampler-option arms × batteries in one process (smoketest/campaign.h). Every arm's options
// are parsed by the same option table as `ask` before the model is opened, so a typo fails at once.
//   diffgemma campaign --arm base= --arm 'ref=--sampler reference' --battery smoke --battery programmatic --out DIR
//   diffgemma campaign --arm off='--tool-check off' --arm repair= --only tool_multiply --seeds 1-50 --out DIR
//   diffgemma campaign --report DIR     (the summary from DIR/results.jsonl, no model)
#include <fstream>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/sampler_options.h"
#include "core/error.h"
#include "smoketest/campaign.h"

namespace dg::cli {
namespace {

struct CampaignOptions {
  ModelOptions model;
  std::vector<std::string> arms, batteries, only;
  std::string seeds;
  std::string out, report, smoke_file = "tests/fixtures/smoketest/battery.json",
                           programs_file = "tests/fixtures/programmatic/battery.json";
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

void run_campaign_cmd(const CampaignOptions& o) {
  if (!o.report.empty()) {
    fmt::print("{}", smoke::campaign_report(smoke::read_campaign(o.report)));
    return;
  }
  DG_CHECK(!o.out.empty(), "give --out DIR (or --report DIR to summarise an earlier campaign)");
  std::vector<ParsedArm> parsed;
  for (const std::string& spec : o.arms.empty() ? std::vector<std::string>{"default="} : o.arms)
    parsed.push_back(parse_arm(spec));
  std::vector<smoke::CampaignBattery> batteries;
  for (const std::string& b : o.batteries.empty() ? std::vector<std::string>{"smoke"} : o.batteries) {
    DG_CHECK(b == "smoke" || b == "programmatic", "--battery '{}': smoke or programmatic", b);
    batteries.push_back({b, b == "smoke" ? o.smoke_file : o.programs_file});
  }
  smoke::CampaignScope scope;
  if (!o.seeds.empty()) scope.seeds = smoke::parse_seeds(o.seeds);
  scope.only = o.only;
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
