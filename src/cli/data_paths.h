// Where the data shipped with diffgemma is found: the embedded model (models/dg-tiny), the smoketest and the
// programmatic batteries. A default path is looked up, in order, under the working directory (a checkout), relative to
// the executable through the install layout (`cmake --install`: <prefix>/bin/diffgemma reads
// <prefix>/share/diffgemma/), and in the source tree the binary was built from; the first that exists wins, so
// `diffgemma ask -p hi` works from any directory.
#pragma once

#include <string>

namespace dg::cli {

std::string embedded_model_dir();  // "models/dg-tiny" when none exists (the load error then names it)
std::string smoketest_battery();   // "tests/fixtures/smoketest/battery.json" likewise
std::string programmatic_battery();  // "tests/fixtures/programmatic/battery.json" likewise (campaign)

}  // namespace dg::cli
