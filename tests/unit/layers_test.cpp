// The layers of src/ (docs/ARCHITECTURE.md, "Layers"): a file may include headers of its own layer and of the
// layers below it in kLayers, never one above. Read from the sources themselves, so an include that runs back up
// (core -> quant, backend -> model, model -> diffusion, ...) fails here naming the file and the line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "support/paths.h"

namespace dg {
namespace layers_test {

// Bottom up, one layer per entry. "dg" is include/dg, the public API, in the engine's layer (src/engine implements
// it); its headers include only the standard library and each other (PublicHeadersIncludeOnlyTheStandardLibrary).
const std::vector<std::vector<std::string>> kLayers = {
    {"core"},      {"io"},           {"quant", "chat"}, {"ops"},      {"backend"}, {"model"},
    {"diffusion"}, {"engine", "dg"}, {"serving"},       {"server", "smoketest"},   {"cli"}};

int rank(const std::string& folder) {
  for (size_t i = 0; i < kLayers.size(); ++i)
    if (std::find(kLayers[i].begin(), kLayers[i].end(), folder) != kLayers[i].end()) return static_cast<int>(i);
  return -1;
}

struct Include {
  std::string file;
  int line;
  std::string folder, target;  // the including file's folder; the included header ("model/weights.h")
};

std::vector<Include> includes_under(const std::filesystem::path& root, const std::string& fixed_folder = "") {
  static const std::regex include_re(R"re(^\s*#\s*include\s+"([a-z_]+)/[^"]+")re");
  std::vector<Include> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
    const std::string rel = std::filesystem::relative(e.path(), root).generic_string();
    const std::string folder = fixed_folder.empty() ? rel.substr(0, rel.find('/')) : fixed_folder;
    std::ifstream in(e.path());
    std::string text;
    int n = 0;
    while (std::getline(in, text)) {
      ++n;
      std::smatch m;
      if (std::regex_search(text, m, include_re)) {
        const std::string target = text.substr(static_cast<size_t>(m.position(1)));
        out.push_back({e.path().generic_string(), n, folder, target.substr(0, target.find('"'))});
      }
    }
  }
  return out;
}

TEST(Layers, NoIncludeRunsBackUpTheLayers) {
  std::vector<Include> all = includes_under(test::source_path("src"));
  const std::vector<Include> pub = includes_under(test::source_path("include/dg"), "dg");
  all.insert(all.end(), pub.begin(), pub.end());
  ASSERT_GT(all.size(), 300u);  // the scan found the sources
  for (const Include& i : all) {
    if (rank(i.folder) < 0) continue;  // files at the top of src/ (main.cpp)
    const std::string to = i.target.substr(0, i.target.find('/'));
    EXPECT_GE(rank(to), 0) << i.file << ":" << i.line << " includes " << i.target
                           << ": a folder missing from kLayers (tests/unit/layers_test.cpp, docs/ARCHITECTURE.md)";
    EXPECT_LE(rank(to), rank(i.folder)) << i.file << ":" << i.line << " (" << i.folder << ") includes " << i.target
                                        << ", a layer above it";
  }
}

// The rules the layers exist for, spelled out: these pairs must stay apart whatever the order above says.
TEST(Layers, TheNamedBoundariesHold) {
  const std::vector<std::pair<std::string, std::string>> apart = {
      {"core", "quant"}, {"backend", "model"}, {"backend", "diffusion"}, {"model", "diffusion"}, {"quant", "model"},
      {"ops", "backend"}, {"engine", "serving"}};
  for (const Include& i : includes_under(test::source_path("src")))
    for (const auto& [from, to] : apart)
      EXPECT_FALSE(i.folder == from && i.target.rfind(to + "/", 0) == 0)
          << i.file << ":" << i.line << " includes " << i.target << ": " << from << " must not include " << to;
}

// What is wrong with one line of a public header (include/dg): an include of anything but a standard library header
// (<vector>, <cstdint>: a bare name) or another public header ("dg/request.h"); "" when nothing is.
std::string public_include_problem(const std::string& line) {
  static const std::regex any_include(R"re(^\s*#\s*include\s*(.*)$)re");
  static const std::regex allowed(R"re(^(<[a-z_0-9]+>|"dg/[a-z_0-9]+\.h")(\s*//.*)?\s*$)re");
  std::smatch m;
  if (!std::regex_search(line, m, any_include) || std::regex_match(m[1].str(), allowed)) return "";
  return "includes " + m[1].str() + ": a public header includes only the standard library and include/dg";
}

TEST(Layers, PublicIncludeRuleRejectsWhatItShould) {
  for (const char* ok : {"#include <vector>", "#include <cstdint>", "#include \"dg/events.h\"", "int x;",
                         "#include <string_view>  // views"})
    EXPECT_EQ(public_include_problem(ok), "") << ok;
  for (const char* bad : {"#include \"core/error.h\"", "#include \"engine/engine_core.h\"", "#include <fmt/format.h>",
                          "#include <nlohmann/json.hpp>", "#include \"../src/core/error.h\"", "#include \"dg/x.hpp\"",
                          "  #  include \"model/forward.h\""})
    EXPECT_NE(public_include_problem(bad), "") << bad;
}

// include/dg is the public API: compiled by a user with include/ alone (tests/public_api builds so), it may not reach
// into src/ or a third-party library.
TEST(Layers, PublicHeadersIncludeOnlyTheStandardLibrary) {
  int headers = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::source_path("include/dg"))) {
    ++headers;
    EXPECT_EQ(e.path().extension(), ".h") << e.path() << ": include/dg holds headers only";
    std::ifstream in(e.path());
    std::string text;
    for (int n = 1; std::getline(in, text); ++n) {
      const std::string problem = public_include_problem(text);
      EXPECT_EQ(problem, "") << e.path().generic_string() << ":" << n << " " << problem;
    }
  }
  EXPECT_GE(headers, 3);  // engine.h, request.h, events.h
}

}  // namespace layers_test
}  // namespace dg
