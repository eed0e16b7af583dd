// StopStrings: the text ends before the first stop string whatever the chunking; text that may start a stop
// string is held, then released when it cannot; UTF-8 characters are never split.
#include <gtest/gtest.h>

#include "chat/stop_strings.h"

namespace dg {
namespace stop_strings_test {

// Feeds `text` in pieces of `n` bytes; returns what came out and whether it stopped.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::string& text, size_t n) {
  StopStrings s(stops);
  std::string out;
  for (size_t i = 0; i < text.size(); i += n) out += s.push(text.substr(i, n));
  const bool stopped = s.stopped();
  out += s.finish();
  return {out, stopped};
}

TEST(StopStrings, CutsBeforeTheFirstStopForEveryChunking) {
  for (size_t n = 1; n <= 12; ++n) {
    EXPECT_EQ(run({"STOP"}, "one two STOP three", n), std::make_pair(std::string("one two "), true)) << n;
    EXPECT_EQ(run({"xyz", "two"}, "one two xyz", n), std::make_pair(std::string("one "), true)) << n;
    EXPECT_EQ(run({"STOP"}, "no stop here, ST", n), std::make_pair(std::string("no stop here, ST"), false)) << n;
    EXPECT_EQ(run({"aab"}, "aaab", n), std::make_pair(std::string("a"), true)) << n;
  }
}

TEST(StopStrings, HoldsOnlyWhatMayStartAStop) {
  StopStrings s({"END"});
  EXPECT_EQ(s.push("abc E"), "abc ");
  EXPECT_EQ(s.push("N"), "");
  EXPECT_EQ(s.push("x"), "ENx");
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.push("END and more"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.push("after"), "");
  EXPECT_EQ(s.finish(), "");
}

TEST(StopStrings, NoStopsPassEverythingAndUtf8StaysWhole) {
  EXPECT_EQ(run({}, "anything", 3), std::make_pair(std::string("anything"), false));
  EXPECT_EQ(run({""}, "empty stops are ignored", 2).first, "empty stops are ignored");
  const std::string text = "caf\xc3\xa9 \xc3\xa9t\xc3\xa9";  // "café été"
  for (size_t n = 1; n < 5; ++n) {
    StopStrings s({"\xc3\xa9t"});
    std::string out;
    for (size_t i = 0; i < text.size(); i += n) {
      const std::string piece = s.push(text.substr(i, n));
      out += piece;
    }
    EXPECT_EQ(out, "caf\xc3\xa9 ") << n;
    EXPECT_TRUE(s.stopped());
  }
}

}  // namespace stop_strings_test
}  // namespace dg
