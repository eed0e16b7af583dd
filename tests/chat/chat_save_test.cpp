// `diffgemma chat` /save and the JSONL save op where the file cannot be written in full: an error, never "saved"
// (a full disk, /dev/full, refused the bytes when the stream was closed, after the check, and the conversation was
// reported saved and lost).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace chat_save_test {

ProcessResult chat(const std::string& args, const std::string& input) {
  const std::string in = scratch_dir("chat_save") + "/in.txt";
  std::ofstream(in) << input;
  return run_command(cli_path() + " chat -m " + source_path("models/dg-tiny") +
                         " --steps 2 --max-new-tokens 8 -q --history '' " + args + " < " + in,
                     true);
}

TEST(ChatSave, AConversationThatCannotBeWrittenInFullIsAnError) {
  ProcessResult r = chat("", "Hello\n/save /dev/full\n");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("error: cannot write the conversation to '/dev/full' in full"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(saved /dev/full"), std::string::npos) << r.out;

  r = chat("--jsonl", "{\"op\":\"user\",\"text\":\"Hello\"}\n{\"op\":\"save\",\"path\":\"/dev/full\"}\n");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cannot write the conversation to '/dev/full' in full"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"op\":\"save\""), std::string::npos) << "no ok event: " << r.out;

  const std::string file = scratch_dir("chat_save_ok") + "/conv.json";
  r = chat("", "Hello\n/save " + file + "\n");
  EXPECT_NE(r.out.find("(saved " + file + ": 2 messages)"), std::string::npos) << r.out;
  std::ifstream saved(file);
  EXPECT_EQ(nlohmann::json::parse(saved)["messages"].size(), 2u);
}

}  // namespace chat_save_test
}  // namespace dg::test
