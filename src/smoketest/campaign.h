// A campaign: sampler-option arms × batteries in one process, every result in one directory (docs/TOOLS.md, "The
// gates"). Each arm is a named set of options (the sampler and the tool check) already validated; each battery is
// the smoketest (smoketest/battery.h: verdicts pass, fail, xfail, xpass) or the programmatic battery
// (smoketest/programs.h: pass, wrong_output, compile_fail). DIR/results.jsonl gets one line per arm × prompt;
// DIR/campaign.json what was run; DIR/report.txt the summary, which `campaign --report DIR` rebuilds from the
// results alone, without a model.
#pragma once

#include <string>
#include <vector>

#include "chat/tool_check.h"
#include "dg/engine.h"

namespace dg::smoke {

struct CampaignArm {
  std::string name;
  std::string options;  // as given, for the record
  SamplerOptions sampler;
  bool seed_given = false;  // else the smoketest battery's seed is used there
  ToolCheckOptions tools;
};

struct CampaignBattery {
  std::string kind;  // smoke | programmatic
  std::string path;
};

// Runs everything, writing DIR (created; results.jsonl is started anew). Returns the result rows.
std::vector<Json> run_campaign(const Engine& engine, const std::vector<CampaignArm>& arms,
                               const std::vector<CampaignBattery>& batteries, const std::string& dir,
                               bool progress = true);

std::vector<Json> read_campaign(const std::string& dir);  // DIR/results.jsonl; throws dg::Error naming a bad line
// Per arm × battery: prompts, the verdict counts, answer tokens per forward, mean steps per block, seconds.
std::string campaign_report(const std::vector<Json>& rows);

}  // namespace dg::smoke
