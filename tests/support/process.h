// Runs a shell command for end-to-end tests and returns its exit code and output.
#pragma once

#include <string>

namespace dg::test {

struct ProcessResult {
  int code = -1;    // exit status (-1 when the command could not run or was killed)
  std::string out;  // stdout (and stderr when merged)
};

// `command` runs under /bin/sh; stderr joins stdout when merge_stderr, else it is discarded.
ProcessResult run_command(const std::string& command, bool merge_stderr = true);

}  // namespace dg::test
