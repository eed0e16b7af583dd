// `diffgemma tokenize`: text to token ids (and back with --decode), using a model's tokenizer.json.
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "cli/app.h"
#include "cli/data_paths.h"
#include "core/error.h"
#include "io/tokenizer.h"

namespace dg::cli {
namespace {

struct TokenizeOptions {
  std::string model = embedded_model_dir();
  std::string text;
  bool ids_only = false, decode = false, plain = false;
};

void run_tokenize(const TokenizeOptions& o) {
  const std::string path = std::filesystem::is_directory(o.model)
                               ? (std::filesystem::path(o.model) / "tokenizer.json").string()
                               : o.model;
  const Tokenizer tok = Tokenizer::load(path);
  std::string input = o.text;
  if (input.empty()) input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (o.decode) {
    std::vector<int32_t> ids;
    std::string s = input;
    for (char& c : s)
      if (c == ',') c = ' ';
    std::istringstream in(s);
    std::string word;
    while (in >> word) {
      size_t used = 0;
      long v = -1;
      try {
        v = std::stol(word, &used);
      } catch (const std::logic_error&) {
        used = 0;
      }
      DG_CHECK(used == word.size() && v >= 0 && v < tok.vocab_size(), "'{}' is not a token id of this tokenizer", word);
      ids.push_back(static_cast<int32_t>(v));
    }
    std::cout << tok.decode(ids) << "\n";
    return;
  }
  const auto ids = tok.encode(input, o.plain ? SpecialTokens::kPlain : SpecialTokens::kMatch);
  if (o.ids_only) {
    std::cout << fmt::format("{}\n", fmt::join(ids, " "));
    return;
  }
  for (int32_t id : ids) std::cout << fmt::format("{:>8}  {}\n", id, tok.token(id));
  std::cout << fmt::format("{} tokens\n", ids.size());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "encode text to token ids, or decode ids with --decode");
  cmd->add_option("-m,--model", o->model, "model directory or tokenizer.json")->envname("DG_MODEL")->capture_default_str();
  cmd->add_option("text", o->text, "text (or ids with --decode); read from stdin when absent");
  auto* ids = cmd->add_flag("--ids", o->ids_only, "print only the ids, space separated");
  cmd->add_flag("--decode", o->decode, "decode token ids (comma or space separated) to text")->excludes(ids);
  cmd->add_flag("--plain", o->plain, "encode special-token literals as plain text");
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace dg::cli
