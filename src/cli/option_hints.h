// What a user probably meant by an option a subcommand does not have: another spelling of one of its own options (a
// typo of up to two edits, or its words with one left out or in another order: --max-tokens is --max-new-tokens
// here), or this engine's name for a well-known one from other tools (--temperature is the --t-max / --t-min
// schedule). Printed under CLI11's "not expected" message.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dg::cli {

// One line per unknown option among `args` (the subcommand's leftover arguments) for which `cmd` has a likely
// meaning, e.g. "--max-tokens: did you mean --max-new-tokens?"; none for values and for options without one.
std::vector<std::string> unknown_option_hints(const CLI::App& cmd, const std::vector<std::string>& args);

// For a value error: where the value came from when an environment variable gave it (DG_THREADS=abc makes
// "--threads: 'abc' is not ..."), e.g. "the value of --threads came from the environment: DG_THREADS=abc"; "" when
// the error names no such option or the option was given on the command line.
std::string environment_value_hint(const CLI::App& cmd, const std::string& error, int argc, const char* const* argv);

}  // namespace dg::cli
