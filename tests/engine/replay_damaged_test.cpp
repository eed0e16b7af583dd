// `diffgemma replay` on an op-log that was edited or damaged: a field of the wrong type, a negative count, a sampler
// that is not an object is an error naming the line (exit 1), never an internal error (exit 3: a negative "keep"
// asked for a vector larger than memory, a wrong type surfaced as the JSON library's exception without a line).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace replay_damaged_test {

using nlohmann::json;

// One `ask --oplog` generation: open, sync, generate, its blocks, end.
std::vector<json> recorded_log(const std::string& dir) {
  const std::string log = dir + "/ask.jsonl";
  const ProcessResult r = run_command(cli_path() + " ask -m " + source_path("models/dg-tiny") +
                                      " -p 'Why is the sky blue?' --steps 2 --max-new-tokens 8 -q --oplog " + log +
                                      " > /dev/null");
  EXPECT_EQ(r.code, 0) << r.out;
  std::vector<json> lines;
  std::ifstream in(log);
  for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  return lines;
}

size_t index_of(const std::vector<json>& lines, const char* key, const char* value) {
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].value(key, "") == value) return i;
  ADD_FAILURE() << "no record with " << key << " " << value;
  return 0;
}

TEST(ReplayDamaged, AnEditedRecordIsAnErrorNamingItsLine) {
  const std::string dir = scratch_dir("replay-damaged");
  const std::vector<json> log = recorded_log(dir);
  ASSERT_GE(log.size(), 4u);
  const size_t sync = index_of(log, "op", "sync"), gen = index_of(log, "op", "generate"),
               block = index_of(log, "event", "block");
  const auto replay = [&](const std::function<void(std::vector<json>&)>& edit) {
    std::vector<json> lines = log;
    edit(lines);
    const std::string path = dir + "/edited.jsonl";
    {
      std::ofstream out(path);
      for (const json& l : lines) out << l.dump() << "\n";
    }
    return run_command(cli_path() + " replay -m " + source_path("models/dg-tiny") + " " + path, true);
  };
  const ProcessResult same = replay([](std::vector<json>&) {});
  EXPECT_EQ(same.code, 0) << same.out;
  const std::string at_sync = "op-log line " + std::to_string(sync + 1) + ": ";
  const std::string at_gen = "op-log line " + std::to_string(gen + 1) + ": ";
  const std::vector<std::pair<std::function<void(std::vector<json>&)>, std::string>> cases = {
      {[&](std::vector<json>& l) { l[sync]["keep"] = -3; }, at_sync + "\"keep\" is negative (-3)"},
      {[&](std::vector<json>& l) { l[sync]["op"] = 5; }, ""},  // no op: the record is skipped, replay diverges
      {[&](std::vector<json>& l) { l[sync]["job"] = "x"; }, ""},
      {[&](std::vector<json>& l) { l[gen]["sampler"] = "x"; }, at_gen + "\"sampler\" must be an object"},
      {[&](std::vector<json>& l) { l[gen]["sampler"]["json_object"] = "x"; }, at_gen + "a field has the wrong type"},
      {[&](std::vector<json>& l) { l[block]["job"] = "x"; }, at_gen + "a field has the wrong type"},
      {[&](std::vector<json>& l) { l[block]["event"] = 5; }, at_gen + "a field has the wrong type"},
      {[&](std::vector<json>& l) { l[0]["ring_slack"] = -1; }, "op-log line 1: \"ring_slack\" is negative"},
      {[&](std::vector<json>& l) { l[0]["content"] = "no"; }, ""},
      {[&](std::vector<json>& l) { l[0]["context"] = "x"; }, "the open record's \"context\" must be an integer"},
      {[&](std::vector<json>& l) { l[0]["model"] = 5; }, "the open record's \"model\" must be a string"},
      {[&](std::vector<json>& l) { l[0]["op"] = 5; }, "does not start with an op-log open record"}};
  for (const auto& [edit, message] : cases) {
    const ProcessResult r = replay(edit);
    EXPECT_NE(r.code, 3) << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
    if (!message.empty()) {
      EXPECT_EQ(r.code, 1) << r.out;
      EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    }
  }
}

}  // namespace replay_damaged_test
}  // namespace dg::test
