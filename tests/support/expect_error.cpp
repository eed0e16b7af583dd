#include "support/expect_error.h"

#include <exception>

#include "core/error.h"

namespace dg::test {

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const dg::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected dg::Error, got another exception: " << e.what();
    return {};
  } catch (...) {
    ADD_FAILURE() << "expected dg::Error, got a non-std exception";
    return {};
  }
  ADD_FAILURE() << "expected dg::Error, but the call succeeded";
  return {};
}

}  // namespace dg::test
