// The programmatic battery (docs/TOOLS.md, "The gates"): prompts whose replies are programs (POSIX shell, Python,
// small C), judged by running them. Each reply is syntax-checked or compiled, then run once per case in a fresh
// temporary directory under a hard timeout with its pipes captured; a case passes when stdout and the exit code
// both match. Three outcomes stay apart: compile_fail (sh -n, py_compile or cc refused it), wrong_output (it ran,
// some case differs or timed out), pass. A markdown fence is stripped before running and reported (every prompt
// asks for none). Compare compile_fail within a language only: sh -n accepts much prose.
#pragma once

#include <string>
#include <vector>

#include "chat/conversation.h"

namespace dg::smoke {

struct ProgramCase {
  std::string input;                // stdin
  std::vector<std::string> args;    // argv[1..]
  std::string output;               // expected stdout, exactly
  int exit_code = 0;
};

struct ProgramPrompt {
  std::string name;
  std::string language;  // sh | python | c
  std::string prompt;
  std::vector<ProgramCase> cases;
};

// Throws dg::Error naming the file, the prompt and the field.
std::vector<ProgramPrompt> load_programs(const std::string& path);

enum class ProgramVerdict : uint8_t { kPass, kCompileFail, kWrongOutput };
const char* verdict_name(ProgramVerdict v);  // "pass" | "compile_fail" | "wrong_output"

struct CaseRun {
  bool pass = false, timed_out = false;
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout (at most 64 KiB)
};

struct ProgramResult {
  ProgramVerdict verdict = ProgramVerdict::kCompileFail;
  bool fenced = false;       // the reply was wrapped in a markdown fence (stripped before running)
  std::string program;       // what ran
  std::string diagnostics;   // the checker's or compiler's output on compile_fail
  std::vector<CaseRun> cases;
};

// The program inside a reply: the first fenced block's body when there is one (fenced = true), else the reply.
std::string strip_fence(const std::string& reply, bool* fenced);

// Checks and runs `reply` against the prompt's cases; `timeout_s` bounds each run (and the compile).
ProgramResult judge_program(const ProgramPrompt& p, const std::string& reply, double timeout_s = 10.0);

}  // namespace dg::smoke
