#include "chat/id_writer.h"

namespace dg {

void IdWriter::flush() {
  if (pending_.empty()) return;
  const std::vector<int32_t> ids = tok_.encode(pending_, SpecialTokens::kPlain);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  pending_.clear();
}

void IdWriter::marker(int32_t id) {
  flush();
  ids_.push_back(id);
}

void IdWriter::quoted(std::string_view s) {
  marker(t_.quote);
  text(s);
  marker(t_.quote);
}

std::vector<int32_t> IdWriter::take() {
  flush();
  std::vector<int32_t> out;
  out.swap(ids_);
  return out;
}

}  // namespace dg
