// Tokenizer::load: reads a Hugging Face tokenizer.json (BPE model, added tokens, normalizer, pre-tokenizer,
// post-processor, decoder) into the pieces of tokenizer_impl.h. Anything the pipeline cannot reproduce
// exactly is refused with a dg::Error naming the file and the component, never skipped.
// Reference: HF tokenizers' serde layout (tokenizer/serialization.rs, models/bpe/serialization.rs) and
// AddedVocabulary::add_tokens for the ids of added tokens.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/tokenizer_impl.h"

namespace dg {

using nlohmann::json;

namespace {

std::string type_of(const json& j) { return j.contains("type") ? j.at("type").get<std::string>() : std::string("?"); }

// {"String": "..."} -> the literal; {"Regex": ...} is refused.
std::string literal_pattern(const json& pattern, const std::string& where) {
  if (pattern.contains("String")) {
    auto s = pattern.at("String").get<std::string>();
    if (s.empty()) fail("{}: an empty String pattern is not supported", where);
    return s;
  }
  if (pattern.contains("Regex")) fail("{}: Regex patterns are not supported (only String)", where);
  fail("{}: pattern has neither String nor Regex", where);
}

void parse_normalizer(const json& n, const std::string& path, std::vector<tok::NormalizerStep>& out) {
  if (n.is_null()) return;
  const std::string type = type_of(n);
  const std::string where = fmt::format("{}: normalizer {}", path, type);
  if (type == "Sequence") {
    for (const auto& child : n.at("normalizers")) parse_normalizer(child, path, out);
  } else if (type == "Replace") {
    out.push_back({tok::NormalizerStep::Kind::kReplace, literal_pattern(n.at("pattern"), where),
                   n.at("content").get<std::string>()});
  } else if (type == "Prepend") {
    out.push_back({tok::NormalizerStep::Kind::kPrepend, {}, n.at("prepend").get<std::string>()});
  } else {
    fail("{}: normalizer type '{}' is not supported (Replace, Prepend, Sequence)", path, type);
  }
}

void parse_pre_tokenizer(const json& n, const std::string& path, std::vector<tok::SplitStep>& out) {
  if (n.is_null()) return;
  const std::string type = type_of(n);
  if (type == "Sequence") {
    for (const auto& child : n.at("pretokenizers")) parse_pre_tokenizer(child, path, out);
  } else if (type == "Split") {
    tok::SplitStep step;
    step.pattern = literal_pattern(n.at("pattern"), path + ": pre_tokenizer Split");
    const auto behavior = n.at("behavior").get<std::string>();
    if (behavior == "Removed") {
      step.behavior = tok::SplitBehavior::kRemoved;
    } else if (behavior == "Isolated") {
      step.behavior = tok::SplitBehavior::kIsolated;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = tok::SplitBehavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = tok::SplitBehavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = tok::SplitBehavior::kContiguous;
    } else {
      fail("{}: pre_tokenizer Split behavior '{}' is unknown", path, behavior);
    }
    step.invert = n.value("invert", false);
    out.push_back(std::move(step));
  } else {
    fail("{}: pre_tokenizer type '{}' is not supported (Split, Sequence)", path, type);
  }
}

void parse_decoder(const json& n, const std::string& path, std::vector<tok::DecodeStep>& out) {
  using Kind = tok::DecodeStep::Kind;
  const std::string type = type_of(n);
  tok::DecodeStep step;
  if (type == "Sequence") {
    for (const auto& child : n.at("decoders")) parse_decoder(child, path, out);
    return;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    step.pattern = literal_pattern(n.at("pattern"), path + ": decoder Replace");
    step.content = n.at("content").get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.content = n.at("content").get<std::string>();
    if (step.content.empty() || tok::utf8_char_len(static_cast<uint8_t>(step.content[0])) != step.content.size()) {
      fail("{}: decoder Strip content '{}' is not one character", path, step.content);
    }
    step.start = n.at("start").get<size_t>();
    step.stop = n.at("stop").get<size_t>();
  } else {
    fail("{}: decoder type '{}' is not supported (Replace, ByteFallback, Fuse, Strip, Sequence)", path, type);
  }
  out.push_back(std::move(step));
}

// The first special token of the single-sequence template, e.g. "<bos>" in "<bos> $A".
std::optional<int32_t> parse_bos(const json& p) {
  if (p.is_null()) return std::nullopt;
  const std::string type = type_of(p);
  if (type == "Sequence") {
    for (const auto& child : p.at("processors")) {
      if (auto id = parse_bos(child)) return id;
    }
    return std::nullopt;
  }
  if (type != "TemplateProcessing" || !p.contains("single") || p.at("single").empty()) return std::nullopt;
  const auto& first = p.at("single").at(0);
  if (!first.contains("SpecialToken")) return std::nullopt;
  const auto name = first.at("SpecialToken").at("id").get<std::string>();
  const auto& ids = p.at("special_tokens").at(name).at("ids");
  if (ids.empty()) return std::nullopt;
  return ids.at(0).get<int32_t>();
}

// The model's vocab and merges are ~800k entries: they go straight into tables while the JSON is read
// (a SAX handler) instead of becoming a document, which is several times faster; the rest becomes a json,
// except top-level members the tokenizer does not use (skipped unread, whatever their size).
struct ModelTables {
  tok::Vocab vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::string error;  // first malformed vocab or merges entry
};

class TokenizerSax : public nlohmann::json_sax<json> {
 public:
  explicit TokenizerSax(ModelTables& t) : t_(t) {}
  json root;

  bool null() override { return mode_ == Mode::kSkip || scalar(json()); }
  bool boolean(bool v) override { return mode_ == Mode::kSkip || scalar(json(v)); }
  bool number_integer(number_integer_t v) override { return mode_ == Mode::kSkip || scalar(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return mode_ == Mode::kSkip || scalar(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return mode_ == Mode::kSkip || scalar(json(v)); }
  bool binary(binary_t& v) override { return mode_ == Mode::kSkip || scalar(json(v)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kSkip) return true;
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 1) {
        parts_.push_back(std::move(v));
        return true;
      }
      return merge_line(v);
    }
    return scalar(json(std::move(v)));
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::kSkip) return true;
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
    } else {
      keys_.back() = std::move(k);
    }
    return true;
  }
  bool start_object(std::size_t) override {
    if (skip_container()) return true;
    if (mode_ != Mode::kDom) return bad("a vocab or merges entry is an object");
    json* p = put(json::object());
    if (at_model_key("vocab")) {
      mode_ = Mode::kVocab;
      return true;
    }
    open(p);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kSkip) return end_skip();
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (skip_container()) return true;
    if (mode_ == Mode::kMerges) {
      if (++merge_depth_ > 1) return bad("a merge holds an array");
      parts_.clear();
      return true;
    }
    if (mode_ == Mode::kVocab) return bad("a vocab entry is an array");
    json* p = put(json::array());
    if (at_model_key("merges")) {
      mode_ = Mode::kMerges;
      return true;
    }
    open(p);
    return true;
  }
  bool end_array() override {
    if (mode_ == Mode::kSkip) return end_skip();
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 0) {
        mode_ = Mode::kDom;
        return true;
      }
      --merge_depth_;
      if (parts_.size() != 2) return bad(fmt::format("merge {} is not a pair", t_.merges.size()));
      t_.merges.emplace_back(std::move(parts_[0]), std::move(parts_[1]));
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw e;  // re-thrown as json::parse_error and reported with the path
  }

 private:
  enum class Mode : uint8_t { kDom, kVocab, kMerges, kSkip };

  // A container that is skipped: inside a skipped member, or a top-level member the tokenizer ignores.
  bool skip_container() {
    if (mode_ == Mode::kSkip) {
      ++skip_depth_;
      return true;
    }
    static constexpr std::string_view kUsed[] = {"added_tokens", "normalizer", "pre_tokenizer",
                                                 "post_processor", "decoder", "model"};
    if (mode_ != Mode::kDom || stack_.size() != 1 ||
        std::find(std::begin(kUsed), std::end(kUsed), keys_[0]) != std::end(kUsed)) {
      return false;
    }
    mode_ = Mode::kSkip;
    skip_depth_ = 1;
    return true;
  }
  bool end_skip() {
    if (--skip_depth_ == 0) mode_ = Mode::kDom;
    return true;
  }

  bool bad(std::string what) {
    if (t_.error.empty()) t_.error = std::move(what);
    return false;
  }
  bool at_model_key(const char* key) const {
    return stack_.size() == 2 && keys_[0] == "model" && keys_[1] == key;
  }
  json* put(json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[keys_.back()];
    slot = std::move(v);
    return &slot;
  }
  void open(json* p) {
    stack_.push_back(p);
    keys_.emplace_back();
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool scalar(json v) {
    if (mode_ == Mode::kVocab) {
      if (!v.is_number_integer()) return bad("vocab entry '" + vocab_key_ + "' is not an integer id");
      t_.vocab.emplace(std::move(vocab_key_), v.get<int32_t>());
      return true;
    }
    if (mode_ == Mode::kMerges) return bad(fmt::format("merge {} is not a pair of strings", t_.merges.size()));
    put(std::move(v));
    return true;
  }
  bool merge_line(const std::string& line) {  // the older "a b" spelling
    if (line.starts_with("#version")) return true;
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return bad(fmt::format("merge {} '{}' is not \"a b\"", t_.merges.size(), line));
    }
    t_.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    return true;
  }

  ModelTables& t_;
  Mode mode_ = Mode::kDom;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;
  std::string vocab_key_;
  std::vector<std::string> parts_;
  int merge_depth_ = 0;
  int skip_depth_ = 0;
};

void parse_model(const json& m, ModelTables& tables, const std::string& path, tok::Bpe& model) {
  if (!m.is_object()) fail("{}: no model", path);
  const std::string type = m.contains("type") ? m.at("type").get<std::string>() : (m.contains("merges") ? "BPE" : "?");
  if (type != "BPE") fail("{}: model type '{}' is not supported (only BPE)", path, type);
  if (!m.contains("vocab") || !m.at("vocab").is_object()) fail("{}: BPE model has no vocab", path);
  if (!m.contains("merges") || !m.at("merges").is_array()) fail("{}: BPE model has no merges", path);
  if (m.contains("dropout") && !m.at("dropout").is_null() && m.at("dropout").get<double>() != 0.0) {
    fail("{}: BPE dropout is not supported", path);
  }
  const auto opt_string = [&](const char* key) -> std::optional<std::string> {
    if (!m.contains(key) || m.at(key).is_null()) return std::nullopt;
    return m.at(key).get<std::string>();
  };
  tok::BpeOptions opt;
  opt.unk_token = opt_string("unk_token");
  opt.continuing_subword_prefix = opt_string("continuing_subword_prefix").value_or("");
  opt.end_of_word_suffix = opt_string("end_of_word_suffix").value_or("");
  opt.fuse_unk = m.value("fuse_unk", false);
  opt.byte_fallback = m.value("byte_fallback", false);
  opt.ignore_merges = m.value("ignore_merges", false);
  model.build(std::move(tables.vocab), tables.merges, std::move(opt), path);
}

// HF AddedVocabulary::add_tokens: a token already in the vocab keeps that id, a new one goes after the
// largest id; a token identical to one already added is ignored.
struct AddedTables {
  const tok::Bpe& model;
  std::vector<tok::AddedToken>& added;
  std::unordered_map<int32_t, size_t>& by_id;
  tok::Vocab& by_content;
};

void add_tokens(const json& list, const std::string& path, AddedTables impl) {
  const auto model_size = static_cast<int32_t>(impl.model.size());
  int32_t max_added = -1;
  for (const auto& j : list) {
    tok::AddedToken t;
    t.content = j.at("content").get<std::string>();
    t.special = j.value("special", false);
    t.normalized = j.value("normalized", !t.special);
    t.lstrip = j.value("lstrip", false);
    t.rstrip = j.value("rstrip", false);
    t.single_word = j.value("single_word", false);
    if (t.content.empty()) continue;
    if (tok::utf8_invalid_offset(t.content)) fail("{}: added token {} is not valid UTF-8", path, j.dump());
    int32_t id = -1;
    if (const auto it = impl.by_content.find(t.content); it != impl.by_content.end()) {
      id = it->second;
    } else if (const auto mid = impl.model.id_of(t.content)) {
      id = *mid;
    } else {
      id = max_added >= 0 && (max_added >= model_size || model_size == 0) ? max_added + 1 : model_size;
    }
    t.id = id;
    max_added = std::max(max_added, id);
    impl.by_content[t.content] = id;
    if (const auto it = impl.by_id.find(id); it != impl.by_id.end()) {
      t.special = t.special || impl.added[it->second].special;
      impl.added[it->second] = t;
    } else {
      impl.by_id.emplace(id, impl.added.size());
      impl.added.push_back(t);
    }
  }
}

}  // namespace

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("cannot open tokenizer file '{}'", path);
  std::stringstream buffer;
  buffer << file.rdbuf();
  ModelTables tables;
  TokenizerSax sax(tables);
  try {
    if (!json::sax_parse(buffer.str(), &sax)) fail("{}: malformed tokenizer.json: {}", path, tables.error);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  const json& j = sax.root;
  if (!j.is_object()) fail("{}: malformed tokenizer.json (not an object)", path);

  Tokenizer out;
  Impl& impl = *out.impl_;
  impl.path = path;
  try {
    if (!j.contains("model")) fail("{}: no model", path);
    parse_model(j.at("model"), tables, path, impl.model);
    parse_normalizer(j.value("normalizer", json()), path, impl.normalizer);
    parse_pre_tokenizer(j.value("pre_tokenizer", json()), path, impl.pre_tokenizer);
    const json decoder = j.value("decoder", json());
    impl.has_decoder = !decoder.is_null();
    if (impl.has_decoder) parse_decoder(decoder, path, impl.decoder);
    impl.bos = parse_bos(j.value("post_processor", json()));
    if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
      add_tokens(j.at("added_tokens"), path, {impl.model, impl.added, impl.added_by_id, impl.added_by_content});
    }
  } catch (const json::exception& e) {
    fail("{}: malformed tokenizer.json: {}", path, e.what());
  }
  for (const auto& t : impl.added) {
    if (t.normalized) {
      impl.norm_trie.add(tok::normalize(impl.normalizer, t.content), t.id);
    } else {
      impl.raw_trie.add(t.content, t.id);
    }
  }
  impl.n_ids = impl.model.max_id() + 1;
  for (const auto& t : impl.added) impl.n_ids = std::max(impl.n_ids, t.id + 1);
  return out;
}

}  // namespace dg
