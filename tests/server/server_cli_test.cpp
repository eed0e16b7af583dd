// `diffgemma serve`'s options for several API keys, end to end: keys given with --api-key (repeated, or separated
// by commas) and in an --api-key-file (one a line; blank lines and '#' comments skipped) are all accepted, nothing
// else is; a key file that cannot be read is an error that names it. (That each key is a tenant of its own:
// server_tenant_test.cpp.)
#include <gtest/gtest.h>

#include <fstream>

#include "server_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace server_cli_test {

TEST(ServerCli, ApiKeysComeFromTheOptionAndFromAFile) {
  const std::string file = scratch_dir("serve-keys") + "/keys";
  std::ofstream(file) << "# the team's keys\n\n  sk-file-1  \nsk-file-2\n";
  ServerProcess s("-m " + source_path("models/dg-tiny") +
                  " --ctx 256 -q --api-key sk-a,sk-b --api-key sk-c --api-key-file " + file);
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  httplib::Client c = s.client();
  for (const char* key : {"sk-a", "sk-b", "sk-c", "sk-file-1", "sk-file-2"}) {
    auto r = c.Get("/v1/models", {{"Authorization", std::string("Bearer ") + key}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << key;
  }
  for (const char* bad : {"Bearer # the team's keys", "Bearer sk-a,sk-b", "Bearer ", ""}) {
    auto r = bad[0] == '\0' ? c.Get("/v1/models") : c.Get("/v1/models", {{"Authorization", bad}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << bad;
  }
  std::ifstream log(s.log_path);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("5 API key(s) required"), std::string::npos) << text;

  const ProcessResult missing = run_command(cli_path() + " serve --port 0 --api-key-file /nonexistent/keys", true);
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("cannot read --api-key-file '/nonexistent/keys'"), std::string::npos) << missing.out;
}

}  // namespace server_cli_test
}  // namespace dg::test
