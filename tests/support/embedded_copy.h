// The embedded model (models/dg-tiny) under another config: its files linked into a scratch directory beside a
// config.json with max_position_embeddings changed, so that tests reach the model's context limit in a few
// hundred tokens.
#pragma once

#include <string>

namespace dg::test {

std::string embedded_model_with_positions(int positions);  // returns the directory

}  // namespace dg::test
