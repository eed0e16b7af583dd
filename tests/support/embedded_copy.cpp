#include "support/embedded_copy.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/paths.h"

namespace dg::test {

std::string embedded_model_with_positions(int positions) {
  namespace fs = std::filesystem;
  const fs::path src = source_path("models/dg-tiny"), dir = scratch_dir("embedded-positions");
  for (const fs::directory_entry& e : fs::directory_iterator(src))
    if (e.path().filename() != "config.json") fs::create_symlink(e.path(), dir / e.path().filename());
  std::ifstream in(src / "config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg["text_config"]["max_position_embeddings"] = positions;
  std::ofstream(dir / "config.json") << cfg.dump(2) << "\n";
  return dir.string();
}

}  // namespace dg::test
