#include "engine/oplog.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "diffusion/call_commit.h"
#include "diffusion/json_schema.h"
#include "diffusion/sampler_settings.h"

namespace dg {

OpLog::OpLog(const std::string& path, bool content) : path_(path), content_(content) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  DG_CHECK(fd_ >= 0, "cannot create the op-log '{}': {}", path, std::strerror(errno));
  ::fchmod(fd_, 0600);  // a file that was there already is made private too
}

OpLog::~OpLog() {
  if (fd_ >= 0) ::close(fd_);
}

void OpLog::write(Json r) {
  if (!content_) {
    for (const char* key : {"append", "ids"}) {
      if (!r.contains(key)) continue;
      r[std::string(key) + "_count"] = r[key].size();
      r.erase(key);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);  // stamped under the lock, so the lines' t are in file order
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - opened_);
  r["t"] = static_cast<double>(us.count()) / 1e6;
  std::string line = r.dump(-1, ' ', false, Json::error_handler_t::replace);
  line += '\n';
  for (size_t at = 0; at < line.size();) {
    const ssize_t n = ::write(fd_, line.data() + at, line.size() - at);
    if (n < 0 && errno == EINTR) continue;
    DG_CHECK(n > 0, "cannot write the op-log '{}': {}", path_, std::strerror(errno));
    at += static_cast<size_t>(n);
  }
}

void create_private_dirs(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path at;
  for (const fs::path& part : fs::path(dir).lexically_normal()) {
    at /= part;
    if (part.empty() || fs::is_directory(at)) continue;
    DG_CHECK(::mkdir(at.c_str(), 0700) == 0 || errno == EEXIST, "cannot create the directory '{}': {}", at.string(),
             std::strerror(errno));
  }
}

Json oplog_open_record(const EngineCore& engine, int slots, int64_t ring_slack, bool content) {
  const EngineOptions& eo = engine.options();
  return {{"op", "open"},
          {"version", 2},  // 2: kv_fingerprint is KvCache::fingerprint's (row digests); 1: fingerprint_v1's
          {"content", content},
          {"model", engine.checkpoint().dir},
          {"backend", eo.backend},
          {"precision", std::string(storage_name(engine.precision().act))},
          {"kv_precision", std::string(storage_name(engine.precision().kv))},
          {"attention_topk", attn_topk_name(engine.model().attention_topk())},
          {"expert_act", eo.expert_act},
          {"linear_act", eo.linear_act},
          {"vocab_act", eo.vocab_act},
          {"tokenizer", eo.tokenizer},
          {"context", eo.context},
          {"slots", slots},
          {"ring_slack", ring_slack}};
}

namespace {

// The backend's graph work since `at` (the op-log's timeline: where a block's first step spends its host time).
Json graphs_since(const Session& s, const GraphStats& at) {
  const GraphStats g = s.model().backend().graph_stats();
  auto ms = [](double sec) { return std::round(sec * 1e5) / 1e2; };
  return {{"captures", g.captures - at.captures}, {"instantiations", g.instantiations - at.instantiations},
          {"updates", g.updates - at.updates}, {"capture_ms", ms(g.capture_s - at.capture_s)},
          {"instantiate_ms", ms(g.instantiate_s - at.instantiate_s)}, {"update_ms", ms(g.update_s - at.update_s)}};
}

}  // namespace

void SessionRecorder::synced(const Session& s, int64_t keep, std::span<const int32_t> append, const SyncStats& st) {
  log_.write({{"op", "sync"}, {"job", job_}, {"slot", slot_}, {"keep", keep},
              {"append", std::vector<int32_t>(append.begin(), append.end())}, {"reused", st.reused},
              {"encoded", st.encoded}, {"rewound", st.rewound}, {"reprefilled", st.reprefilled},
              {"kv_len", s.size()}});
}

void SessionRecorder::generating(const Session& s, const SamplerOptions& opt) {
  if (!fixed_job_) ++job_;
  graphs_at_start_ = s.model().backend().graph_stats();
  log_.write({{"op", "generate"}, {"job", job_}, {"slot", slot_}, {"sampler", sampler_to_json(opt)}});
}

void SessionRecorder::committed(const Session&, const BlockInfo& b, std::span<const int32_t> ids) {
  std::vector<double> ends;  // the timeline of the block's steps, to 0.1 ms
  for (const float t : b.step_ends) ends.push_back(std::round(static_cast<double>(t) * 1e4) / 1e4);
  log_.write({{"event", "block"}, {"job", job_}, {"slot", slot_}, {"block", b.block}, {"steps", b.steps},
              {"ids", std::vector<int32_t>(ids.begin(), ids.end())}, {"step_ends", std::move(ends)}});
}

void SessionRecorder::generated(const Session& s, const GenerateResult& res) {
  log_.write({{"event", "end"}, {"job", job_}, {"slot", slot_}, {"finish", finish_name(res.finish)},
              {"forwards", res.forwards}, {"tokens", static_cast<int>(res.tokens.size())}, {"kv_len", s.size()},
              {"kv_fingerprint", fmt::format("{:016x}", s.fingerprint())},
              {"graphs", graphs_since(s, graphs_at_start_)}});
}

void SessionRecorder::cleared(const Session&) { log_.write({{"op", "clear"}, {"job", job_}, {"slot", slot_}}); }

void SessionRecorder::note(Json record) {
  Json j{{"op", "note"}, {"job", job_}, {"slot", slot_}};
  for (auto it = record.begin(); it != record.end(); ++it) j[it.key()] = it.value();
  log_.write(std::move(j));
}

// A record lists the run's and the generation config's settings, the model's ids, then the contract's settings
// (the order every op-log so far has).
Json sampler_to_json(const SamplerOptions& o) {
  Json j{{"profile", sampler_profile_name(o.profile)}};
  const auto put = [&](bool contract) {
    for (const SamplerSetting& s : kSamplerSettings)
      if ((s.group == SettingGroup::kContract) == contract) std::visit([&](auto m) { j[s.name] = o.*m; }, s.member);
  };
  put(false);
  j["stop_ids"] = o.stop_ids;
  j["pad_id"] = o.pad_id;
  j["bos_id"] = o.bos_id;
  put(true);
  if (o.json) j["json_object"] = true;  // written only when on: logs without JSON mode read as before
  if (o.json_schema) j["json_schema"] = o.json_schema->source();
  if (o.tool_calls) {  // written only when on, as JSON mode
    Json tools = Json::array();
    for (const CallTool& t : o.tool_calls->tools)
      tools.push_back({{"name", t.name}, {"parameters", t.schema ? t.schema->source() : Json()}});
    // The table's stop ids (a call's closing walk starts at one) may differ from the sampler's (a repair's).
    j["tool_calls"] = {{"open_id", o.tool_calls->open_id}, {"stop_ids", o.tool_calls->vocab->stop_ids},
                       {"tools", tools}};
  }
  return j;
}

namespace {

// Whether an integer field fits T (nlohmann converts a float or a wider integer without a check).
template <typename T>
bool fits(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!v.is_number_integer()) return false;
  if constexpr (std::is_signed_v<T>) {
    const int64_t i = v.get<int64_t>();
    return i >= std::numeric_limits<T>::min() && i <= std::numeric_limits<T>::max();
  }
  return false;  // a negative integer for an unsigned field
}

template <typename T>
void get(const Json& j, const char* key, T& out) {
  DG_CHECK(j.contains(key), "op-log sampler: \"{}\" is missing", key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    DG_CHECK(fits<T>(j[key]), "op-log sampler: \"{}\" must be an integer of its type's range (got {})", key,
             j[key].dump());
  try {
    out = j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("op-log sampler: \"{}\" has the wrong type", key);
  }
}

}  // namespace

SamplerOptions sampler_from_json(const Json& j, std::shared_ptr<const JsonVocab> json,
                                 std::shared_ptr<const JsonVocab> calls) {
  DG_CHECK(j.is_object(), "op-log: \"sampler\" must be an object");
  SamplerOptions o;
  std::string profile;
  get(j, "profile", profile);
  o.profile = sampler_profile_from_name(profile);
  for (const SamplerSetting& s : kSamplerSettings) std::visit([&](auto m) { get(j, s.name, o.*m); }, s.member);
  get(j, "stop_ids", o.stop_ids);
  get(j, "pad_id", o.pad_id);
  get(j, "bos_id", o.bos_id);
  if (j.value("json_object", false)) {
    DG_CHECK(json != nullptr, "op-log sampler: JSON mode needs the model's tokenizer");
    o.json = std::move(json);
    if (j.contains("json_schema")) o.json_schema = JsonSchema::compile(j["json_schema"], "op-log json_schema");
  }
  if (j.contains("tool_calls")) {
    DG_CHECK(calls != nullptr, "op-log sampler: strict tool calls need the model's tokenizer");
    const Json& tc = j["tool_calls"];
    DG_CHECK(tc.is_object() && tc.contains("tools") && tc["tools"].is_array(),
             "op-log sampler: \"tool_calls\" must be an object with a \"tools\" array");
    auto c = std::make_shared<ToolCallConstraint>();
    c->vocab = std::move(calls);
    get(tc, "open_id", c->open_id);
    for (const Json& t : tc["tools"]) {
      CallTool ct;
      get(t, "name", ct.name);
      if (t.contains("parameters") && !t["parameters"].is_null())
        ct.schema = JsonSchema::compile(t["parameters"], "op-log tool_calls." + ct.name, false);
      c->tools.push_back(std::move(ct));
    }
    o.tool_calls = std::move(c);
  }
  o.validate();
  return o;
}

}  // namespace dg
