// Asserting on dg::Error: the statement must throw dg::Error (no other type, no success) and its message must
// contain every given fragment — the offending file, tensor or field name.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

namespace dg::test {

// Runs f and returns the dg::Error message; records a test failure (and returns "") when f returns normally or
// throws anything else.
std::string error_message(const std::function<void()>& f);

}  // namespace dg::test

#define DG_EXPECT_ERROR(stmt, ...)                                                      \
  do {                                                                                  \
    SCOPED_TRACE(#stmt);                                                                \
    const std::string dg_msg_ = ::dg::test::error_message([&] { stmt; });               \
    for (const std::string& dg_part_ : std::initializer_list<std::string>{__VA_ARGS__}) \
      EXPECT_NE(dg_msg_.find(dg_part_), std::string::npos)                              \
          << "error message: " << dg_msg_ << "\n  should contain: " << dg_part_;        \
  } while (0)
