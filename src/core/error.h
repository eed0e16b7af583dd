// dg::Error: the one exception type for bad input (files, configs, options) and broken invariants.
// Messages name the offending file, tensor or option; the CLI prints them and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dg {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A buffer could not be allocated (a device's memory is full): the same work may succeed under less load.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dg

#define DG_CHECK(cond, ...)                  \
  do {                                       \
    if (!(cond)) ::dg::fail(__VA_ARGS__);    \
  } while (0)
