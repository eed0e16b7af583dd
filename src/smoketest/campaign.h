// A campaign: sampler-option arms × batteries in one process, every result in one directory (docs/TOOLS.md, "The
// gates"). Each arm is a named set of options (the sampler and the tool check) already validated; each battery is
// the smoketest (smoketest/battery.h: verdicts pass, fail, xfail, xpass) or the programmatic battery
// (smoketest/programs.h: pass, wrong_output, compile_fail). DIR/results.jsonl gets one line per arm × prompt;
// DIR/campaign.json what was run; DIR/report.txt the summary, which `campaign --report DIR` rebuilds from the
// results alone, without a model.
#pragma once

#include <string>
#include <vector>

#include "engine/tool_check.h"
#include "engine/engine_core.h"

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

// What each arm runs of each battery: every prompt (or those named in `only`), once per seed (none: the arm's seed,
// else the smoketest battery's). A multi-seed run measures a rate: e.g. how often a tool call comes out valid.
struct CampaignScope {
  std::vector<uint64_t> seeds;
  std::vector<std::string> only;
};

// Runs everything, writing DIR (created; results.jsonl is started anew). Returns the result rows: arm, battery,
// prompt, seed, verdict, the answer, block statistics; smoke prompts with tools also `tool_valid` (the first reply
// called a declared tool with arguments that validate, as handed on after the tool check).
std::vector<Json> run_campaign(const EngineCore& engine, const std::vector<CampaignArm>& arms,
                               const std::vector<CampaignBattery>& batteries, const std::string& dir,
                               bool progress = true, const CampaignScope& scope = {});

// "1-50" or "3,7,42" (or a mix, "1-3,9"): the seeds of a multi-seed campaign. Throws dg::Error naming the text.
std::vector<uint64_t> parse_seeds(const std::string& text);

std::vector<Json> read_campaign(const std::string& dir);  // DIR/results.jsonl; throws dg::Error naming a bad line
// Per arm × battery: runs, the verdict counts, valid tool calls, answer tokens per forward, mean steps per block,
// seconds.
std::string campaign_report(const std::vector<Json>& rows);

}  // namespace dg::smoke
