// replay_oplog: re-executes the ops of an op-log (oplog.h) on fresh sessions and compares every recorded outcome:
// sync statistics, committed blocks token by token, finish, forwards, cache length and fingerprint.
#include <fstream>
#include <map>
#include <vector>

#include "core/error.h"
#include "engine/chat.h"
#include "engine/oplog.h"

namespace dg {
namespace {

struct Record {
  int line = 0;
  Json j;
};

std::vector<Record> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read the op-log '{}'", path);
  std::vector<Record> recs;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = Json::parse(text, nullptr, false);
    DG_CHECK(!j.is_discarded() && j.is_object(), "{}:{}: not a JSON object", path, line);
    recs.push_back({line, std::move(j)});
  }
  DG_CHECK(!recs.empty() && recs[0].j.contains("op") && recs[0].j["op"] == "open",
           "{}: the first record must be {{\"op\":\"open\"}}", path);
  DG_CHECK(!recs[0].j.contains("content") || recs[0].j["content"] != false,
           "{}: this op-log was written without content (serve --log-without-content): it holds token counts, not "
           "the token ids a replay needs", path);
  return recs;
}

template <typename T>
T field(const Record& r, const char* key) {
  DG_CHECK(r.j.contains(key), "op-log line {}: \"{}\" is missing", r.line, key);
  try {
    return r.j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("op-log line {}: \"{}\" has the wrong type", r.line, key);
  }
}

class Replayer {
 public:
  Replayer(const EngineCore& engine, const Record& open) : engine_(engine) {
    const int version = field<int>(open, "version");
    DG_CHECK(version == 1 || version == 2, "op-log line {}: version {} is not one this diffgemma replays (1, 2)",
             open.line, version);
    v1_ = version == 1;
    SessionOptions so;
    so.ring_slack = field<int64_t>(open, "ring_slack");
    DG_CHECK(so.ring_slack >= 0, "op-log line {}: \"ring_slack\" is negative ({})", open.line, so.ring_slack);
    const int n = field<int>(open, "slots");
    DG_CHECK(n >= 1 && n <= 4096, "op-log line {}: bad slot count {}", open.line, n);
    for (int i = 0; i < n; ++i) slots_.push_back(std::make_unique<Session>(engine.open_session(so)));
  }

  // Returns false at the first divergence (report_.divergence says where). A record whose fields have the wrong
  // type (an edited or damaged log) is an error naming its line, not an internal one.
  bool run(const std::vector<Record>& recs) {
    for (size_t i = 1; i < recs.size(); ++i) {
      const Record& r = recs[i];
      ++report_.records;
      try {
        const std::string op = r.j.contains("op") && r.j["op"].is_string() ? r.j["op"].get<std::string>() : "";
        if (op == "sync" && !sync(r)) return false;
        if (op == "generate" && !generate(recs, i)) return false;
        if (op == "clear") slot(r).clear();
      } catch (const nlohmann::json::exception& e) {
        fail("op-log line {}: a field has the wrong type or is missing ({}); the log is damaged or was edited",
             r.line, e.what());
      }
    }
    return true;
  }
  ReplayReport& report() { return report_; }

 private:
  Session& slot(const Record& r) {
    const int s = field<int>(r, "slot");
    DG_CHECK(s >= 0 && s < static_cast<int>(slots_.size()), "op-log line {}: slot {} out of range", r.line, s);
    return *slots_[static_cast<size_t>(s)];
  }

  // JSON mode's vocabulary table, as the server built it, for a sampler record that asks for JSON mode.
  std::shared_ptr<const JsonVocab> json_vocab(const Json& sampler) {
    if (!sampler.value("json_object", false)) return nullptr;
    const auto stops = sampler.value("stop_ids", std::vector<int32_t>{});
    if (json_ == nullptr || stops != json_stops_) {
      json_ = chat_json_vocab(engine_.tokenizer(), ChatTokens::from(engine_.tokenizer()), stops);
      json_stops_ = stops;
    }
    return json_;
  }

  // The strict tool calls' vocabulary table, as the server built it, for a sampler record that constrains calls.
  std::shared_ptr<const JsonVocab> call_vocab(const Json& sampler) {
    if (!sampler.contains("tool_calls")) return nullptr;
    const auto stops = sampler["tool_calls"].value("stop_ids", std::vector<int32_t>{});
    if (calls_ == nullptr || stops != calls_stops_) {
      calls_ = chat_call_vocab(engine_.tokenizer(), ChatTokens::from(engine_.tokenizer()), stops);
      calls_stops_ = stops;
    }
    return calls_;
  }

  bool diverge(const Record& r, const std::string& what) {
    report_.diverged = true;
    report_.divergence = fmt::format("line {} (job {}, slot {}): {}", r.line, r.j.value("job", -1),
                                     r.j.value("slot", -1), what);
    return false;
  }

  template <typename T>
  bool same(const Record& r, const char* key, const T& got) {
    const T want = field<T>(r, key);
    if (want == got) return true;
    return diverge(r, fmt::format("{}: recorded {}, replayed {}", key, Json(want).dump(), Json(got).dump()));
  }

  bool sync(const Record& r) {
    Session& s = slot(r);
    const auto keep = field<int64_t>(r, "keep");
    DG_CHECK(keep >= 0, "op-log line {}: \"keep\" is negative ({})", r.line, keep);
    if (keep > s.size()) return diverge(r, fmt::format("keeps {} tokens but the slot holds {}", keep, s.size()));
    std::vector<int32_t> target(s.tokens().begin(), s.tokens().begin() + keep);
    const auto append = field<std::vector<int32_t>>(r, "append");
    target.insert(target.end(), append.begin(), append.end());
    const SyncStats st = s.sync(target);
    return same(r, "reused", st.reused) && same(r, "encoded", st.encoded) && same(r, "rewound", st.rewound) &&
           same(r, "reprefilled", st.reprefilled) && same(r, "kv_len", s.size());
  }

  bool generate(const std::vector<Record>& recs, size_t at) {
    const Record& g = recs[at];
    const auto job = field<int64_t>(g, "job");
    std::vector<const Record*> blocks;
    const Record* end = nullptr;
    for (size_t k = at + 1; k < recs.size() && end == nullptr; ++k) {
      const Json& j = recs[k].j;
      if (j.value("job", int64_t{-1}) != job) continue;
      const std::string ev = j.value("event", "");
      if (ev == "block") blocks.push_back(&recs[k]);
      if (ev == "end") end = &recs[k];
    }
    if (end == nullptr) return diverge(g, "the log ends before this generation does (the server stopped mid-job)");
    Session& s = slot(g);
    SamplerOptions opt;
    try {
      DG_CHECK(g.j.contains("sampler") && g.j["sampler"].is_object(), "\"sampler\" must be an object");
      const Json& sampler = g.j["sampler"];
      opt = sampler_from_json(sampler, json_vocab(sampler), call_vocab(sampler));
    } catch (const Error& e) {
      fail("op-log line {}: {}", g.line, e.what());
    }
    const bool cancelled = field<std::string>(*end, "finish") == "cancelled";
    const auto forwards = field<int>(*end, "forwards");
    int steps = 0;
    std::vector<std::vector<int32_t>> got;
    GenerateEvents ge;
    ge.on_step = [&](const StepInfo&, const StepView&) { ++steps; };
    ge.step_rows = false;
    ge.on_block = [&](const BlockInfo&, std::span<const int32_t> b) { got.emplace_back(b.begin(), b.end()); };
    if (cancelled) ge.cancel = [&] { return steps >= forwards; };
    const GenerateResult res = s.generate(opt, &ge);
    ++report_.jobs;
    for (size_t b = 0; b < std::max(got.size(), blocks.size()); ++b) {
      if (b >= blocks.size())
        return diverge(*end, fmt::format("replay committed a block {} the log does not have", b));
      if (b >= got.size()) return diverge(*blocks[b], fmt::format("replay ended before block {}", b));
      const auto want = field<std::vector<int32_t>>(*blocks[b], "ids");
      const std::vector<int32_t>& have = got[b];
      size_t k = 0;
      while (k < want.size() && k < have.size() && want[k] == have[k]) ++k;
      if (k < want.size() || k < have.size())
        return diverge(*blocks[b], fmt::format("block {} token {}: recorded {}, replayed {}", b, k,
                                               k < want.size() ? want[k] : -1, k < have.size() ? have[k] : -1));
      ++report_.blocks;
    }
    return same(*end, "finish", std::string(finish_name(res.finish))) && same(*end, "forwards", res.forwards) &&
           same(*end, "tokens", static_cast<int>(res.tokens.size())) && same(*end, "kv_len", s.size()) &&
           same(*end, "kv_fingerprint", fmt::format("{:016x}", v1_ ? s.fingerprint_v1() : s.fingerprint()));
  }

  bool v1_ = false;  // a version-1 log: its fingerprints are KvCache::fingerprint_v1's
  const EngineCore& engine_;
  std::vector<std::unique_ptr<Session>> slots_;
  std::shared_ptr<const JsonVocab> json_, calls_;
  std::vector<int32_t> json_stops_, calls_stops_;
  ReplayReport report_;
};

}  // namespace

ReplayReport replay_oplog(const EngineCore& engine, const std::string& path) {
  const std::vector<Record> recs = read_records(path);
  Replayer r(engine, recs[0]);
  r.run(recs);
  return r.report();
}

}  // namespace dg
