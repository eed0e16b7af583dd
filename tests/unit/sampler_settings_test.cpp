// The sampler settings table (src/diffusion/sampler_settings.h) and what is derived from it, row by row, so that a
// new row is covered with no edit here: the command line takes the row's flag with in-range values and refuses
// values outside the range as a usage error naming the flag; a request's field likewise, with HTTP 400 naming the
// field; the op-log writes and reads the value, and refuses an out-of-range or missing one naming the key. Also:
// an op-log written before the table (tests/fixtures/oplog/) reads back and writes out byte for byte, and replays.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/sampler_options.h"
#include "core/error.h"
#include "diffusion/json_commit.h"
#include "diffusion/sampler_settings.h"
#include "engine/oplog.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/process.h"
#if defined(DG_WITH_SERVER)
#include "server/server_test_util.h"
#include "server/wire_request.h"
#endif

namespace dg::test {
namespace sampler_settings_test {

bool is_integer(const SamplerSetting& s) { return !std::holds_alternative<double SamplerOptions::*>(s.member); }

double value_of(const SamplerSetting& s, const SamplerOptions& o) {
  return std::visit([&](auto m) { return static_cast<double>(o.*m); }, s.member);
}

// A value as the command line writes it (the shortest text that reads back as the same double).
std::string text_of(double v) { return fmt::format("{}", v); }

// In-range values other than `dflt` that keep the default options valid (t_min stays below t_max): the closed ends,
// a step inside an open end, a middle; each row's words.
std::vector<double> good_values(const SamplerSetting& s, double dflt) {
  std::vector<double> candidates;
  for (const SettingWord& w : s.words) candidates.push_back(w.value);
  if (s.words.empty()) {
    const SettingRange& r = s.range;
    const double step = is_integer(s) ? 1 : 0.25;
    candidates = {r.lo + (r.lo_open ? step : 0), r.lo + 2 * step, r.hi - (r.hi_open ? step : 0)};
    if (std::isfinite(r.hi)) candidates.push_back((r.lo + r.hi) / 2);
  }
  std::vector<double> out;
  for (const double v : candidates) {
    if (!std::isfinite(v) || v == dflt || !setting_in_range(s, v) || (is_integer(s) && std::floor(v) != v)) continue;
    SamplerOptions o;
    setting_assign(s, o, v);
    try {
      o.validate();
      out.push_back(v);
    } catch (const Error&) {
    }
  }
  return out;
}

// Whether the member's type holds v (a uint64 holds no -1: that is a wrong type, not a value out of range).
bool type_holds(const SamplerSetting& s, double v) {
  return std::visit(
      [&](auto m) {
        using T = SettingType<decltype(m)>;
        if constexpr (std::is_integral_v<T>)
          return v >= static_cast<double>(std::numeric_limits<T>::min()) &&
                 v <= static_cast<double>(std::numeric_limits<T>::max());
        return true;
      },
      s.member);
}

// Values of the member's type just outside the range (none for the seed: the range is the whole type).
std::vector<double> bad_values(const SamplerSetting& s) {
  if (!s.words.empty()) return {};
  const SettingRange& r = s.range;
  const double step = is_integer(s) ? 1 : 0.5;
  std::vector<double> out;
  if (std::isfinite(r.lo)) out.push_back(r.lo_open ? r.lo : r.lo - step);
  if (std::isfinite(r.hi)) out.push_back(r.hi_open ? r.hi : r.hi + step);
  std::erase_if(out, [&](double v) { return !type_holds(s, v); });
  return out;
}

// The command line: the table's flags on a bare app; the options on top of the defaults, or the usage error.
struct CliResult {
  bool ok = false;
  std::string error;
  SamplerOptions options;
};
CliResult parse_cli(const std::string& line) {
  CLI::App app;
  cli::SamplerFlags flags;
  flags.add_to(&app);
  CliResult r;
  try {
    app.parse(line);
    r.options = flags.apply(SamplerOptions{});
    r.ok = true;
  } catch (const CLI::ParseError& e) {
    r.error = e.what();
  }
  return r;
}

TEST(SamplerSettings, TheTableIsConsistent) {
  std::set<std::string> names, flags, wires;
  const SamplerOptions defaults;
  std::ifstream doc_file(source_path("docs/SAMPLER.md"));
  const std::string doc((std::istreambuf_iterator<char>(doc_file)), std::istreambuf_iterator<char>());
  EXPECT_NO_THROW(defaults.validate());
  for (const SamplerSetting& s : kSamplerSettings) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(names.insert(s.name).second) << "a name twice";
    EXPECT_TRUE(flags.insert(s.flag).second) << "a flag twice";
    EXPECT_TRUE(s.wire == nullptr || wires.insert(s.wire).second) << "a request field twice";
    EXPECT_TRUE(setting_in_range(s, value_of(s, defaults))) << "the contract default is outside the range";
    EXPECT_TRUE(!s.reference || setting_in_range(s, *s.reference)) << "the reference value is outside the range";
    for (const SettingWord& w : s.words) EXPECT_TRUE(setting_in_range(s, w.value)) << w.word;
    EXPECT_TRUE(!std::holds_alternative<bool SamplerOptions::*>(s.member) || !s.words.empty()) << "a switch's words";
    EXPECT_FALSE(good_values(s, value_of(s, defaults)).empty()) << "no in-range value to test with";
    EXPECT_NE(doc.find(fmt::format("| `{}` | `{}", s.name, s.flag)), std::string::npos)
        << "docs/SAMPLER.md's table of settings lacks the row";
  }
  EXPECT_EQ(kSparseScCutoff, std::exp(-10.0)) << "sparse self-conditioning is e^-10";
}

TEST(SamplerSettings, TheCommandLineTakesEveryRowAndRefusesItsOutOfRangeValues) {
  const SamplerOptions defaults;
  for (const SamplerSetting& s : kSamplerSettings) {
    SCOPED_TRACE(s.flag);
    for (const double v : good_values(s, value_of(s, defaults))) {
      std::string text = text_of(v);
      for (const SettingWord& w : s.words)
        if (w.value == v) text = w.word;
      const CliResult r = parse_cli(fmt::format("{} {}", s.flag, text));
      ASSERT_TRUE(r.ok) << text << ": " << r.error;
      EXPECT_EQ(value_of(s, r.options), v) << text;
    }
    std::vector<std::string> bad = {"x"};
    for (const double v : bad_values(s)) bad.push_back(text_of(v));
    if (std::holds_alternative<uint64_t SamplerOptions::*>(s.member)) bad.push_back("-1");
    for (const std::string& text : bad) {
      const CliResult r = parse_cli(fmt::format("{} {}", s.flag, text));
      EXPECT_FALSE(r.ok) << text;
      EXPECT_NE(r.error.find(fmt::format("{}: ", s.flag)), std::string::npos) << text << ": " << r.error;
    }
  }
  EXPECT_EQ(parse_cli("").options.seed, defaults.seed) << "a flag not given keeps the base's value";
}

TEST(SamplerSettings, TheOpLogWritesAndReadsEveryRow) {
  const SamplerOptions defaults;
  for (const SamplerSetting& s : kSamplerSettings) {
    SCOPED_TRACE(s.name);
    for (const double v : good_values(s, value_of(s, defaults))) {
      SamplerOptions o;
      setting_assign(s, o, v);
      const Json j = sampler_to_json(o);
      ASSERT_TRUE(j.contains(s.name));
      EXPECT_EQ(j[s.name].is_boolean() ? static_cast<double>(j[s.name].get<bool>()) : j[s.name].get<double>(), v);
      EXPECT_EQ(value_of(s, sampler_from_json(j)), v);
      EXPECT_EQ(sampler_to_json(sampler_from_json(j)).dump(), j.dump());
    }
    for (const double v : bad_values(s)) {
      Json j = sampler_to_json(defaults);
      j[s.name] = is_integer(s) ? Json(static_cast<int64_t>(v)) : Json(v);
      DG_EXPECT_ERROR(sampler_from_json(j), s.name);
    }
    Json missing = sampler_to_json(defaults);
    missing.erase(s.name);
    DG_EXPECT_ERROR(sampler_from_json(missing), fmt::format("\"{}\" is missing", s.name));
  }
}

TEST(SamplerSettings, TheReferenceProfileTakesEveryRowsReferenceValue) {
  const SamplerOptions contract = make_sampler_options(SamplerProfile::kContract, GenerationConfig{}, 0, 2);
  const SamplerOptions reference = make_sampler_options(SamplerProfile::kReference, GenerationConfig{}, 0, 2);
  for (const SamplerSetting& s : kSamplerSettings) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(value_of(s, reference), s.reference ? *s.reference : value_of(s, contract));
  }
}

#if defined(DG_WITH_SERVER)
// A completion request with one field set; the parsed sampler, or the refusal.
struct WireResult {
  int status = 200;
  std::string param, message;
  SamplerOptions options;
};
const server::WireContext& wire_context() {
  const EngineCore& e = tiny_server_engine();
  static const ChatTokens t = ChatTokens::from(e.tokenizer());
  static const server::WireContext ctx{e.tokenizer(), t, e.default_sampler(SamplerProfile::kContract),
                                       e.default_sampler(SamplerProfile::kReference)};
  return ctx;
}

WireResult parse_wire(const char* key, const Json& value) {
  const server::WireContext& ctx = wire_context();
  WireResult r;
  try {
    r.options = server::parse_completion_request(Json{{"prompt", {2, 5}}, {"max_tokens", 4}, {key, value}}, ctx)
                    .spec.sampler;
  } catch (const server::ApiError& err) {
    r.status = err.status;
    r.param = err.param;
    r.message = err.what();
  }
  return r;
}

TEST(SamplerSettings, ARequestTakesEveryWireRowAndRefusesItsOutOfRangeValuesWith400) {
  const SamplerOptions& defaults = wire_context().contract;
  for (const SamplerSetting& s : kSamplerSettings) {
    if (s.wire == nullptr) continue;
    SCOPED_TRACE(s.wire);
    for (const double v : good_values(s, value_of(s, defaults))) {
      if (s.member == SettingMember(&SamplerOptions::steps) && v > wire_context().max_steps) continue;  // --max-steps
      const WireResult r = is_integer(s) ? parse_wire(s.wire, static_cast<int64_t>(v)) : parse_wire(s.wire, v);
      ASSERT_EQ(r.status, 200) << v << ": " << r.message;
      EXPECT_EQ(value_of(s, r.options), v);
    }
    std::vector<Json> bad = {"x", Json::array()};
    for (const double v : bad_values(s)) bad.push_back(v);
    if (is_integer(s)) bad.push_back(2.5);
    for (const Json& v : bad) {
      const WireResult r = parse_wire(s.wire, v);
      EXPECT_EQ(r.status, 400) << v.dump();
      EXPECT_EQ(r.param, s.wire) << v.dump();
      EXPECT_NE(r.message.find(fmt::format("'{}'", s.wire)), std::string::npos) << r.message;
    }
  }
  EXPECT_EQ(parse_wire("seed", -1).options.seed, ~uint64_t{0}) << "a signed seed is taken modulo 2^64";
  EXPECT_EQ(parse_wire("seed", ~uint64_t{0}).options.seed, ~uint64_t{0});
}
#endif

// Written by `diffgemma serve` before the table existed (four generations: both profiles, a negative seed, a seed of
// 2^63 - 1, JSON mode); only the open record's model path was made relative.
TEST(SamplerSettings, AnOpLogWrittenBeforeTheTableReadsBackByteForByteAndReplays) {
  const std::string path = source_path("tests/fixtures/oplog/before_settings_table.jsonl");
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  const auto vocab = std::make_shared<const JsonVocab>();
  int records = 0;
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    if (!j.contains("sampler")) continue;
    ++records;
    const Json& s = j["sampler"];
    EXPECT_EQ(sampler_to_json(sampler_from_json(s, vocab)).dump(), s.dump());
  }
  EXPECT_EQ(records, 4);
  const ProcessResult r = run_command(cli_path() + " replay " + path + " -m " + source_path("models/dg-tiny"), true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("identical"), std::string::npos) << r.out;
}

}  // namespace sampler_settings_test
}  // namespace dg::test
