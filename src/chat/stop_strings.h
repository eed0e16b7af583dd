// StopStrings: the OpenAI `stop` parameter on a text stream. The text ends before the first occurrence of any
// stop string; text that may still be the start of one is held until it cannot be. The concatenation of push()
// and finish() results is the text up to the first stop (or all of it). Never splits a UTF-8 character: a held
// tail starts where a stop string starts, which is a character boundary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dg {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);  // empty strings are ignored

  std::string push(std::string_view delta);  // the text now safe to emit ("" once stopped)
  std::string finish();                       // the stream ended without a stop: emits what is held
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace dg
