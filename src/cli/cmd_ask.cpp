// `diffgemma ask`: one prompt in, one answer out (streamed block by block to stdout).
#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/progress.h"
#include "cli/sampler_options.h"
#include "core/error.h"
#include "chat/stream.h"
#include "chat/template.h"
#include "diffusion/json_schema.h"
#include "engine/chat.h"
#include "engine/oplog.h"
#include "io/utf8_lead.h"

namespace dg::cli {
namespace {

struct AskOptions {
  ModelOptions model;
  SamplerFlags sampler;
  std::string prompt, prompt_file, prompt_ids, json_schema, oplog;
  bool raw = false, show_ids = false, json = false, quiet = false, think = false, json_object = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string tok;
  std::istringstream in(text);
  while (in >> tok) {
    std::stringstream parts(tok);
    std::string p;
    while (std::getline(parts, p, ',')) {
      if (p.empty()) continue;
      try {
        size_t used = 0;
        const long v = std::stol(p, &used);
        DG_CHECK(used == p.size() && v >= 0 && v <= INT32_MAX, "bad token id '{}'", p);
        ids.push_back(static_cast<int32_t>(v));
      } catch (const std::logic_error&) {
        fail("bad token id '{}' in --prompt-ids (expected integers separated by commas or spaces)", p);
      }
    }
  }
  return ids;
}

// How a message names a prompt file: `-` is standard input.
std::string prompt_file_name(const std::string& path) {
  return path == "-" ? std::string("--prompt-file - (standard input)") : "--prompt-file '" + path + "'";
}

std::string read_file(const std::string& path, const char* what = "--prompt-file") {
  if (path == "-" && what == std::string_view("--prompt-file")) {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    DG_CHECK(!std::cin.bad(), "cannot read {}", prompt_file_name(path));
    return ss.str();
  }
  std::error_code ec;
  DG_CHECK(!std::filesystem::is_directory(path, ec), "{} '{}' is a directory, not a file", what, path);
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read {} '{}'", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run_ask(const AskOptions& o) {
  // The prompt is read and checked before the weights load (one source, given and not empty: register_ask).
  const std::string text = !o.prompt_ids.empty() ? std::string()
                           : o.prompt.empty()      ? read_file(o.prompt_file)
                                                   : o.prompt;
  DG_CHECK(!o.prompt.empty() || !o.prompt_ids.empty() || !text.empty(), "{} is empty", prompt_file_name(o.prompt_file));
  if (const std::optional<size_t> bad = utf8_invalid_offset(text))
    fail("{} is not valid UTF-8 at byte {} of {}", o.prompt.empty() ? prompt_file_name(o.prompt_file) : "--prompt",
         *bad, text.size());
  auto engine = EngineCore::open(engine_options(o.model));
  std::vector<int32_t> prompt;
  std::optional<ChatTokens> chat;  // set when the prompt is a chat turn: the answer is parsed as a reply
  bool in_thought = false;
  if (!o.prompt_ids.empty()) {
    prompt = parse_ids(o.prompt_ids);
  } else {
    const Tokenizer& tok = engine->tokenizer();
    if (o.raw) {
      prompt = tok.encode(text, SpecialTokens::kMatch);
    } else {
      chat = ChatTokens::from(tok);
      Conversation conv;
      conv.messages.push_back(Message{Role::kUser, text});
      RenderOptions ro;
      ro.thinking = o.think;
      const RenderedPrompt r = render_chat(conv, ro, tok, *chat);
      prompt = r.ids;
      in_thought = r.end == PromptEnd::kThought;
    }
  }
  SamplerOptions opt = o.sampler.resolve(*engine);
  if (o.json_object || !o.json_schema.empty()) {
    DG_CHECK(chat.has_value() && !o.think, "{} needs a chat prompt (not --raw or --prompt-ids) without --think: the "
             "constraint starts at the first answer token", o.json_schema.empty() ? "--json-object" : "--json-schema");
    opt.json = chat_json_vocab(engine->tokenizer(), *chat, opt.stop_ids);
  }
  if (!o.json_schema.empty()) {
    const Json schema = Json::parse(read_file(o.json_schema, "--json-schema"), nullptr, false);
    DG_CHECK(!schema.is_discarded(), "--json-schema '{}' is not valid JSON", o.json_schema);
    opt.json_schema = JsonSchema::compile(schema, o.json_schema);
  }
  GenerationProgress progress(o.quiet || o.json, opt.steps);
  const bool streaming = engine->has_tokenizer() && !o.json && !o.show_ids;
  std::optional<StreamDecoder> stream;  // --raw: the text as it comes
  std::optional<ReplyStream> reply;     // a chat turn: the answer on stdout, the reasoning on stderr
  if (streaming && chat) {
    reply.emplace(engine->tokenizer(), *chat, opt.stop_ids, in_thought);
  } else if (streaming) {
    stream.emplace(engine->tokenizer(), true);
  }
  bool reasoning_shown = false;  // the reasoning line on stderr still needs its newline
  auto end_reasoning = [&] {
    if (reasoning_shown) fmt::print(stderr, "\n");
    reasoning_shown = false;
  };
  auto show = [&](const std::vector<ReplyEvent>& events) {
    for (const ReplyEvent& e : events) {
      if (e.kind == ReplyEvent::Kind::kContent) {
        end_reasoning();
        std::cout << e.text;
      }
      if (e.kind == ReplyEvent::Kind::kReasoning && !o.quiet) {
        fmt::print(stderr, "{}", e.text);
        reasoning_shown = true;
      }
      if (e.kind == ReplyEvent::Kind::kToolCall) std::cout << "\n[tool call] " << e.call.name << " " << e.call.arguments.dump();
    }
  };
  size_t emitted = 0;
  bool stopped = false;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  double first_block = -1;  // seconds from the request (prefill included) to the first committed block
  std::vector<double> first_block_steps;  // seconds from the request to the end of each step of the first block
  GenerateEvents ev;
  ev.on_step = [&](const StepInfo& s, const StepView&) {
    if (first_block < 0) first_block_steps.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    progress.step(s);
  };
  ev.step_rows = false;
  bool prompt_timed = false;
  ev.on_encoded = [&](size_t n) {
    if (prompt_timed) return;  // later calls: committed blocks
    prompt_timed = true;
    engine->backend().synchronize();  // the prompt's time ends when the device is done with it
    progress.prompt_encoded(n);
  };
  if (progress.live()) ev.on_prefill = [&](int64_t done, int64_t total) { progress.prefill(done, total); };
  ev.on_block = [&](const BlockInfo& b, std::span<const int32_t> block) {
    if (first_block < 0) first_block = std::chrono::duration<double>(Clock::now() - t0).count();
    progress.block(b);
    if (reply) {
      const size_t room = static_cast<size_t>(opt.max_new_tokens) - std::min(emitted, static_cast<size_t>(opt.max_new_tokens));
      const size_t n = std::min(block.size(), room);
      emitted += n;
      show(reply->push(block.first(n)));
      std::cout.flush();
      return;
    }
    if (!stream || stopped) return;
    for (int32_t t : block) {
      if (std::find(opt.stop_ids.begin(), opt.stop_ids.end(), t) != opt.stop_ids.end() ||
          emitted >= static_cast<size_t>(opt.max_new_tokens)) {
        stopped = true;
        break;
      }
      std::cout << stream->push(t);
      ++emitted;
    }
    std::cout.flush();
  };
  GenerateResult res;
  if (o.oplog.empty()) {
    res = engine->generate(prompt, opt, &ev);
  } else {  // the same generation through a recorded session: `diffgemma replay` re-runs it
    OpLog log(o.oplog);
    Session session = engine->open_session();
    log.write(oplog_open_record(*engine, 1, SessionOptions{}.ring_slack));
    SessionRecorder rec(log);
    session.set_observer(&rec);
    session.sync(prompt);
    res = session.generate(opt, &ev);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (stream) std::cout << stream->flush() << "\n";
  if (reply) {
    show(reply->finish());
    end_reasoning();
    std::cout << "\n";
  }
  progress.done(res);
  if (o.show_ids && !o.json) std::cout << fmt::format("{}\n", fmt::join(res.tokens, " "));  // --json has "tokens"
  if (o.json) {
    const GenerationProgress::Timing t = progress.timing();
    nlohmann::json j;
    j["prompt_tokens"] = prompt.size();
    j["timing"] = {{"prompt_seconds", t.prompt_s}, {"generation_seconds", t.generation_s},
                   {"prompt_tokens_per_s", t.prompt_s > 0 ? static_cast<double>(prompt.size()) / t.prompt_s : 0.0},
                   {"generation_tokens_per_s",
                    t.generation_s > 0 ? static_cast<double>(res.tokens.size()) / t.generation_s : 0.0}};
    j["tokens"] = res.tokens;
    if (engine->has_tokenizer()) j["text"] = engine->tokenizer().decode(res.tokens, true);
    if (chat) {
      const Reply r = parse_reply(res.tokens, engine->tokenizer(), *chat, opt.stop_ids, in_thought);
      j["content"] = r.content;
      j["reasoning"] = r.reasoning;
      j["tool_calls"] = nlohmann::json::array();
      for (const ToolCall& c : r.tool_calls)
        j["tool_calls"].push_back({{"name", c.name}, {"arguments", nlohmann::json::parse(c.arguments.dump())}});
    }
    j["finish_reason"] = res.finish == FinishReason::kStop ? "stop" : "length";
    j["stop_token"] = res.stop_token;
    j["forwards"] = res.forwards;
    j["fused_commits"] = res.fused_commits;
    j["seconds"] = seconds;  // prefill and generation
    j["first_block_seconds"] = first_block;
    // Where a one-shot request's first block goes (docs/PERFORMANCE.md, "First-use costs"): its steps' ends, and
    // what the backend's graphs cost on the host over the whole generation.
    j["first_block_step_ends_seconds"] = first_block_steps;
    const GraphStats g = engine->backend().graph_stats();
    j["graphs"] = {{"captures", g.captures}, {"instantiations", g.instantiations}, {"updates", g.updates},
                   {"capture_seconds", g.capture_s}, {"instantiate_seconds", g.instantiate_s},
                   {"update_seconds", g.update_s}};
    j["sampler"] = sampler_profile_name(opt.profile);
    j["seed"] = opt.seed;
    for (const BlockInfo& b : res.blocks)
      j["blocks"].push_back({{"steps", b.steps}, {"forwards", b.forwards}, {"stop", stop_rule_name(b.stop)},
                             {"kept", b.kept}, {"canvas", b.canvas}, {"rerolls", b.rerolls}, {"trimmed", b.trimmed},
                             {"pad_gated", b.pad_gated}, {"constrained", b.constrained}});
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

}  // namespace

void register_ask(CLI::App& app) {
  auto o = std::make_shared<AskOptions>();
  CLI::App* cmd = app.add_subcommand("ask", "generate an answer to one prompt");
  add_model_options(cmd, o->model);
  // Exactly one prompt source, and not an empty one: anything else is a usage error (exit status 2).
  const CLI::Validator not_empty([](const std::string& v) { return v.empty() ? std::string("the value is empty") : ""; }, "");
  CLI::Option* prompt = cmd->add_option("-p,--prompt", o->prompt, "prompt text (rendered as one user turn unless "
                                        "--raw)")->check(not_empty);
  CLI::Option* file = cmd->add_option("--prompt-file", o->prompt_file, "read the prompt text from a file (-: standard input)")
                          ->check(not_empty);
  CLI::Option* ids = cmd->add_option("--prompt-ids", o->prompt_ids, "prompt as token ids (comma or space separated), "
                                     "no tokenizer needed")->check(not_empty);
  prompt->excludes(file)->excludes(ids);
  file->excludes(ids);
  cmd->add_flag("--raw", o->raw, "encode the prompt as is: no chat turn, special-token literals are recognised");
  cmd->add_flag("--think,!--no-think", o->think, "thinking mode: the reasoning streams to stderr, the answer to stdout");
  cmd->add_flag("--show-ids", o->show_ids, "print the answer's token ids instead of text (with --json: its \"tokens\")");
  cmd->add_flag("--json", o->json, "print one JSON object (tokens, text, finish reason, per-block statistics)");
  cmd->add_flag("--json-object", o->json_object,
                "JSON mode: the answer is one JSON object (the server's response_format json_object)");
  cmd->add_option("--json-schema", o->json_schema,
                  "structured output: the answer is one JSON object that validates against the JSON Schema in FILE "
                  "(the server's response_format json_schema; supported keywords: docs/TOOLS.md)")
      ->type_name("FILE");
  cmd->add_option("--oplog", o->oplog, "append the generation's engine ops to this file (`diffgemma replay FILE`)");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
  o->sampler.add_to(cmd);
  cmd->callback([o, prompt, file, ids] {
    if (prompt->count() + file->count() + ids->count() == 0)
      throw CLI::RequiredError("one of --prompt, --prompt-file or --prompt-ids");
    run_ask(*o);
  });
}

}  // namespace dg::cli
