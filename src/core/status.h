// Status: what a kernel launcher returns. Launchers validate shapes, strides and alignment and report problems
// here instead of launching; kernels trust their launcher.
#pragma once

#include <string>
#include <utility>

namespace dg {

class Status {
 public:
  Status() = default;
  static Status ok() { return {}; }
  static Status error(std::string msg) {
    Status s;
    s.msg_ = std::move(msg);
    s.ok_ = false;
    return s;
  }
  bool is_ok() const { return ok_; }
  const std::string& message() const { return msg_; }

 private:
  bool ok_ = true;
  std::string msg_;
};

}  // namespace dg
