// `--tokenizer FILE`: a tokenizer.json used instead of the model directory's (the synthetic full shapes have none).
// The embedded model with its own tokenizer given this way answers as without the option; a file that is missing, or
// a tokenizer with more ids than the model's vocabulary, is an error naming it.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace cli_tokenizer_option_test {

std::string ask(const std::string& extra) {
  return cli_path() + " ask -m " + source_path("models/dg-tiny") + " -p 'What is two plus two?' --seed 3 -q " + extra;
}

TEST(CliTokenizerOption, TheModelsOwnTokenizerGivenAsAFileAnswersTheSame) {
  const ProcessResult plain = run_command(ask(""), false);
  ASSERT_EQ(plain.code, 0) << plain.out;
  const ProcessResult given = run_command(ask("--tokenizer " + source_path("models/dg-tiny/tokenizer.json")), false);
  ASSERT_EQ(given.code, 0) << given.out;
  EXPECT_FALSE(plain.out.empty());
  EXPECT_EQ(given.out, plain.out);
}

TEST(CliTokenizerOption, AMissingFileOrTooManyIdsIsAnErrorNamingIt) {
  const ProcessResult missing = run_command(ask("--tokenizer /nonexistent/tokenizer.json"));
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("--tokenizer '/nonexistent/tokenizer.json' is not a file"), std::string::npos)
      << missing.out;

  // The embedded tokenizer with one added token past the model's 4,096 ids.
  nlohmann::json tok;
  std::ifstream(source_path("models/dg-tiny/tokenizer.json")) >> tok;
  tok["added_tokens"].push_back({{"id", 4096}, {"content", "<one_too_many>"}, {"single_word", false},
                                 {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  const std::string big = scratch_dir("tokenizer-option") + "/tokenizer.json";
  std::ofstream(big) << tok.dump();
  const ProcessResult over = run_command(ask("--tokenizer " + big));
  EXPECT_NE(over.code, 0);
  EXPECT_NE(over.out.find("has 4097 ids, more than the model's vocabulary of 4096"), std::string::npos) << over.out;
}

}  // namespace cli_tokenizer_option_test
}  // namespace dg::test
