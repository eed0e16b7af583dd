#include "support/process.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

namespace dg::test {

ProcessResult run_command(const std::string& command, bool merge_stderr) {
  const std::string cmd = command + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  ProcessResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace dg::test
