#include "engine/golden.h"

#include <cctype>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "diffusion/batch.h"
#include "engine/chat.h"

namespace dg {
namespace {

constexpr int kTokens = 24;  // answer budget: short, so the matrix runs in seconds on the CPU (and under ASan)

struct Recorder {
  Json checkpoints = Json::array();
  void add(const std::string& what, const std::vector<int32_t>& ids, int64_t kv_len, uint64_t fp, Json extra = {}) {
    Json j{{"what", what}, {"ids", ids}, {"kv_len", kv_len}, {"kv_fingerprint", fmt::format("{:016x}", fp)}};
    if (extra.is_object())
      for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    checkpoints.push_back(std::move(j));
  }
  void turn(const std::string& what, const TurnResult& r, const ChatSession& c) {
    add(what, r.raw, c.kv_tokens(), c.fingerprint(),
        {{"finish", r.finish}, {"reused", r.prompt.reused}, {"rewound", r.prompt.rewound},
         {"reprefilled", r.prompt.reprefilled}});
  }
  void state(const std::string& what, const ChatSession& c) {
    const SyncStats& st = c.last_sync();
    add(what, {}, c.kv_tokens(), c.fingerprint(),
        {{"reused", st.reused}, {"rewound", st.rewound}, {"reprefilled", st.reprefilled}});
  }
};

ChatOptions options(const EngineCore& e, bool thinking) {
  ChatOptions o;
  o.thinking = thinking;
  o.sampler = e.default_sampler(SamplerProfile::kContract);
  o.sampler.seed = 7;
  o.sampler.max_new_tokens = kTokens;
  return o;
}

Json tools() {
  return Json::parse(R"([{"type":"function","function":{"name":"get_time","description":"The time in a zone",
      "parameters":{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}}])");
}

void plain(const EngineCore& e, Recorder& r) {
  ChatSession c(e, options(e, false));
  r.turn("turn", c.user("What is the capital of France?"), c);
}

void thinking(const EngineCore& e, Recorder& r) {
  ChatSession c(e, options(e, true));
  r.turn("turn", c.user("What is 45 plus 38?"), c);
}

void tool_round(const EngineCore& e, Recorder& r) {
  ChatSession c(e, options(e, false));
  c.set_tools(tools());
  c.add_message(message_from_json(Json::parse(R"({"role":"user","content":"What time is it in Oslo?"})"), "m"));
  c.add_message(message_from_json(Json::parse(R"({"role":"assistant","tool_calls":[{"id":"call_0",
      "type":"function","function":{"name":"get_time","arguments":{"zone":"Europe/Oslo"}}}]})"), "m"));
  c.settle();
  r.state("call pending", c);
  c.add_tool_result("call_0", "12:00");
  r.turn("after the response", c.generate(), c);
}

void rewind(const EngineCore& e, Recorder& r) {
  ChatSession c(e, options(e, false));
  r.turn("turn 1", c.user("Name a colour."), c);
  r.turn("turn 2", c.user("Name another one."), c);
  c.rewind();
  r.state("rewound", c);
  r.turn("turn 2 again", c.user("Name another one."), c);
}

void prefix_reuse(const EngineCore& e, Recorder& r) {
  ChatSession c(e, options(e, false));
  c.set_system("Answer briefly.");
  r.turn("turn 1", c.user("How many days are in a week?"), c);
  r.turn("turn 2", c.user("And in a year?"), c);
  r.turn("turn 3", c.user("Thanks."), c);
}

void ring_wrap(const EngineCore& e, Recorder& r) {
  ChatOptions o = options(e, false);
  o.session.ring_slack = 4;  // the sliding rings hold window - 1 + 4 tokens: three turns wrap them
  ChatSession c(e, o);
  r.turn("turn 1", c.user("Count from one to five."), c);
  r.turn("turn 2", c.user("Now count backwards."), c);
  r.turn("turn 3", c.user("Say hello."), c);
  c.rewind();
  r.state("rewound turn 3", c);
  c.rewind();
  r.state("rewound past the rings", c);
  r.turn("turn 2 again", c.user("Now count backwards."), c);
}

void batched(const EngineCore& e, Recorder& r) {
  const Tokenizer& tok = e.tokenizer();
  const ChatTokens t = ChatTokens::from(tok);
  const char* prompts[] = {"What is the capital of France?", "Name a colour.", "How many legs has a spider?"};
  std::vector<KvCache> caches;
  for (size_t i = 0; i < 3; ++i) caches.push_back(e.new_cache());
  std::vector<BatchJob> jobs;
  for (size_t i = 0; i < 3; ++i) {
    Conversation conv;
    conv.messages.push_back(Message{Role::kUser, prompts[i]});
    BatchJob j;
    j.kv = &caches[i];
    j.prompt = render_chat(conv, RenderOptions{}, tok, t).ids;
    j.opt = options(e, false).sampler;
    j.opt.seed = 7 + i;
    jobs.push_back(std::move(j));
  }
  ModelBatchDenoiser d(e.model());
  const std::vector<GenerateResult> res = generate_batch(d, jobs);
  for (size_t i = 0; i < res.size(); ++i)
    r.add(fmt::format("job {}", i), res[i].tokens, caches[i].len(), caches[i].fingerprint(),
          {{"finish", finish_name(res[i].finish)}});
}

const std::vector<std::pair<std::string, std::function<void(const EngineCore&, Recorder&)>>>& cases() {
  static const std::vector<std::pair<std::string, std::function<void(const EngineCore&, Recorder&)>>> all = {
      {"plain", plain},   {"thinking", thinking},         {"tool_round", tool_round}, {"rewind", rewind},
      {"prefix_reuse", prefix_reuse}, {"ring_wrap", ring_wrap}, {"batched", batched}};
  return all;
}

}  // namespace

std::vector<std::string> golden_case_names() {
  std::vector<std::string> names;
  for (const auto& c : cases()) names.push_back(c.first);
  return names;
}

Json run_golden(const EngineCore& engine, const std::vector<std::string>& only) {
  for (const std::string& n : only) {
    const std::vector<std::string> names = golden_case_names();
    DG_CHECK(std::find(names.begin(), names.end(), n) != names.end(), "no golden case '{}' (cases: {})", n,
             fmt::join(names, ", "));
  }
  Json out{{"version", 1}, {"backend", engine.options().backend}, {"cases", Json::array()}};
  for (const auto& [name, run] : cases()) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    Recorder r;
    run(engine, r);
    out["cases"].push_back({{"name", name}, {"checkpoints", r.checkpoints}});
  }
  return out;
}

std::string golden_text(const Json& results) {
  std::string s = fmt::format("{{\"version\": {}, \"backend\": {}, \"cases\": [\n", results["version"].dump(),
                              results["backend"].dump());
  const Json& cases = results["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    s += fmt::format(" {{\"name\": {}, \"checkpoints\": [\n", cases[i]["name"].dump());
    const Json& cps = cases[i]["checkpoints"];
    for (size_t k = 0; k < cps.size(); ++k) s += "  " + cps[k].dump() + (k + 1 < cps.size() ? ",\n" : "\n");
    s += i + 1 < cases.size() ? " ]},\n" : " ]}\n";
  }
  return s + "]}\n";
}

std::string golden_file(const std::string& backend, const std::string& device) {
  std::string name = backend;
  if (backend != "cpu") {
    name += '-';
    for (const char c : device) {
      const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0;
      if (keep) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else if (name.back() != '-') name += '-';
    }
    while (name.back() == '-') name.pop_back();
  }
  return "tests/fixtures/golden/" + name + ".json";
}

std::vector<std::string> compare_golden(const Json& got, const Json& want) {
  std::vector<std::string> diffs;
  DG_CHECK(want.contains("cases") && want["cases"].is_array(), "the golden file has no \"cases\" array");
  if (want.value("backend", "") != got.value("backend", ""))
    diffs.push_back(fmt::format("backend: the run is {}, the golden file {}", got.value("backend", "?"),
                                want.value("backend", "?")));
  for (const Json& g : got["cases"]) {
    const Json* w = nullptr;
    for (const Json& c : want["cases"])
      if (c["name"] == g["name"]) w = &c;
    const std::string name = g["name"].get<std::string>();
    if (w == nullptr) {
      diffs.push_back(fmt::format("{}: not in the golden file (bless it)", name));
      continue;
    }
    const Json& gc = g["checkpoints"];
    const Json& wc = (*w)["checkpoints"];
    if (gc.size() != wc.size())
      diffs.push_back(fmt::format("{}: {} checkpoints, the golden file has {}", name, gc.size(), wc.size()));
    for (size_t i = 0; i < std::min(gc.size(), wc.size()); ++i)
      for (auto it = wc[i].begin(); it != wc[i].end(); ++it) {
        const Json have = gc[i].contains(it.key()) ? gc[i][it.key()] : Json();
        if (have == it.value()) continue;
        std::string detail = fmt::format("{} != {}", have.dump(), it.value().dump());
        if (it.key() == "ids" && have.is_array()) {
          size_t k = 0;
          while (k < have.size() && k < it.value().size() && have[k] == it.value()[k]) ++k;
          detail = fmt::format("first difference at token {} of {}/{}", k, have.size(), it.value().size());
        }
        diffs.push_back(fmt::format("{} checkpoint {} ({}): {}: {}", name, i, wc[i].value("what", ""), it.key(),
                                    detail));
      }
  }
  return diffs;
}

}  // namespace dg
