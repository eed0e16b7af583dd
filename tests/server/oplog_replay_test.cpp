// The op-log of a server session (two conversations over two slots, prefix reuse, a completion, a client that
// hangs up mid-generation) replays identically, in process and through `diffgemma replay`; a changed token in
// the log is reported as the first divergence, at its line. The log is private (0600 in a 0700 directory) and can
// be written without content (counts instead of token ids), which replay refuses by name, as a log of a version it
// does not know.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace oplog_replay_test {

std::string record_session() {
  server::ServerOptions o;
  o.log_dir = scratch_dir("oplog");
  o.slots = 2;
  TestServer s(o);
  json a = chat_request("Conversation A", {{"max_tokens", 70}});
  auto a1 = s.post("/v1/chat/completions", a);
  EXPECT_TRUE(a1 && a1->status == 200);
  EXPECT_TRUE(s.post("/v1/chat/completions", chat_request("Conversation B")));
  a["messages"].push_back(json::parse(a1->body)["choices"][0]["message"]);
  a["messages"].push_back({{"role", "user"}, {"content", "A again"}});
  auto a2 = s.post("/v1/chat/completions", a);
  EXPECT_TRUE(a2 && a2->status == 200);
  EXPECT_GT(json::parse(a2->body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 10);
  EXPECT_TRUE(s.post("/v1/completions", {{"prompt", "raw text"}, {"max_tokens", 5}, {"steps", 2}, {"seed", 1}}));
  // A long answer and no confident stop, so that every block runs its 8 steps whatever the weights and the hang-up
  // at step 3 lands mid-generation (the trained embedded model answers "hang up" in one block of a few steps, done
  // before the server sees the client go). The threshold must be > 0; the softcap (±30) keeps a row's entropy
  // above ~2e-21 over 4,096 ids, so 1e-30 is never reached.
  s.stream("/v1/chat/completions",
           chat_request("Count from 1 to 40.", {{"max_tokens", 400}, {"steps", 8}, {"confidence_threshold", 1e-30},
                                                {"stream", true}, {"drafts", true}}),
           [&](const std::string& got) { return got.find("\"step\":3") == std::string::npos; });
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"cancelled\"}") == 1; }));
  const std::string path = s.srv->oplog_path();
  EXPECT_FALSE(path.empty());
  return path;
}

TEST(OpLog, AServerSessionReplaysIdenticallyAndAChangedTokenIsFound) {
  const std::string path = record_session();
  const ReplayReport r = replay_oplog(tiny_server_engine(), path);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_EQ(r.jobs, 5);
  EXPECT_GE(r.blocks, 4) << "every generation but the cancelled one commits a block";

  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  bool cancelled = false;
  for (const std::string& l : lines) cancelled = cancelled || l.find("\"finish\":\"cancelled\"") != std::string::npos;
  EXPECT_TRUE(cancelled) << "the hung-up generation is in the log as cancelled";
  // Every record says when it was written (seconds since the log opened, in order); a route how long its job queued.
  double t = 0;
  int routes = 0;
  for (const std::string& l : lines) {
    const json j = json::parse(l);
    ASSERT_TRUE(j.contains("t") && j["t"].is_number()) << l;
    EXPECT_GE(j["t"].get<double>(), t) << l;
    t = j["t"].get<double>();
    // A block says when each of its steps ended (seconds from the block's start, increasing, one per step); an end
    // record what the backend's graphs did meanwhile (none on the CPU).
    if (j.value("event", "") == "block") {
      const std::vector<double> ends = j.at("step_ends").get<std::vector<double>>();
      EXPECT_EQ(static_cast<int>(ends.size()), j.at("steps").get<int>()) << l;
      for (size_t k = 0; k < ends.size(); ++k) EXPECT_GE(ends[k], k == 0 ? 0.0 : ends[k - 1]) << l;
    }
    if (j.value("event", "") == "end") {
      EXPECT_EQ(j.at("graphs").at("captures").get<int>(), 0) << l;
    }
    if (j.value("op", "") != "route") continue;
    ++routes;
    ASSERT_TRUE(j.contains("queued")) << l;
    EXPECT_GE(j["queued"].get<double>(), 0.0) << l;
  }
  EXPECT_EQ(routes, 5);

  const ProcessResult cli = run_command(cli_path() + " replay " + path);
  EXPECT_EQ(cli.code, 0) << cli.out;
  EXPECT_NE(cli.out.find("identical"), std::string::npos) << cli.out;

  // Change the third token of the second committed block.
  int changed_line = 0, blocks = 0;
  for (size_t i = 0; i < lines.size() && changed_line == 0; ++i) {
    json j = json::parse(lines[i]);
    if (j.value("event", "") != "block" || ++blocks < 2) continue;
    j["ids"][2] = (j["ids"][2].get<int>() + 1) % 4096;
    lines[i] = j.dump();
    changed_line = static_cast<int>(i) + 1;
  }
  ASSERT_GT(changed_line, 0);
  const std::string bad = path + ".changed.jsonl";
  {
    std::ofstream out(bad);
    for (const std::string& l : lines) out << l << "\n";
  }
  const ReplayReport d = replay_oplog(tiny_server_engine(), bad);
  ASSERT_TRUE(d.diverged);
  EXPECT_NE(d.divergence.find(fmt::format("line {} ", changed_line)), std::string::npos) << d.divergence;
  EXPECT_NE(d.divergence.find("token 2"), std::string::npos) << d.divergence;
  const ProcessResult cli_bad = run_command(cli_path() + " replay " + bad);
  EXPECT_EQ(cli_bad.code, 1) << cli_bad.out;
  EXPECT_NE(cli_bad.out.find("diverged"), std::string::npos) << cli_bad.out;
}

int mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<int>(st.st_mode & 0777);
}

TEST(OpLog, IsPrivateAndCanBeWrittenWithoutContent) {
  const std::string root = scratch_dir("oplog-private");
  for (const bool content : {true, false}) {
    server::ServerOptions o;
    o.log_dir = root + (content ? "/with/logs" : "/without/logs");
    o.log_content = content;
    std::string path;
    {
      TestServer s(o, true);
      auto r = s.post("/v1/chat/completions", chat_request("my PIN is 4711"));
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      path = s.srv->oplog_path();
    }
    EXPECT_EQ(mode_of(path), 0600) << path;
    EXPECT_EQ(mode_of(o.log_dir), 0700);
    EXPECT_EQ(mode_of(std::filesystem::path(o.log_dir).parent_path().string()), 0700) << "created parents too";
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("\"content\":false"), content ? std::string::npos : text.find("\"content\":false"));
    int syncs = 0, blocks = 0;
    for (size_t at = 0, nl; at < text.size(); at = nl + 1) {
      nl = text.find('\n', at);
      const json j = json::parse(text.substr(at, nl - at));
      syncs += j.value("op", "") == "sync" ? 1 : 0;
      blocks += j.value("event", "") == "block" ? 1 : 0;
      if (j.value("op", "") == "sync") {
        EXPECT_EQ(j.contains("append"), content) << j;
      }
      if (j.value("event", "") == "block") {
        EXPECT_EQ(j.contains("ids"), content) << j;
      }
    }
    EXPECT_GE(syncs, 1);
    EXPECT_GE(blocks, 1);
    if (content) {
      // A log of a version this build does not know is refused by name (2 is written; 1 still replays).
      std::string v3 = text;
      const size_t at = v3.find("\"version\":2");
      ASSERT_NE(at, std::string::npos) << text.substr(0, 300);
      v3.replace(at, 11, "\"version\":3");
      const std::string bad = path + ".v3.jsonl";
      std::ofstream(bad) << v3;
      try {
        replay_oplog(tiny_server_engine(), bad);
        ADD_FAILURE() << "a log of version 3 cannot be replayed";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("version 3"), std::string::npos) << e.what();
      }
      continue;
    }
    EXPECT_NE(text.find("\"append_count\":"), std::string::npos) << text;
    EXPECT_NE(text.find("\"ids_count\":"), std::string::npos) << text;
    EXPECT_NE(text.find("\"content\":false"), std::string::npos) << text;
    try {
      replay_oplog(tiny_server_engine(), path);
      ADD_FAILURE() << "a log without content cannot be replayed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("without content"), std::string::npos) << e.what();
    }
  }
}

}  // namespace oplog_replay_test
}  // namespace dg::test
