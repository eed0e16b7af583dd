#include "support/pty_process.h"

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace dg::test {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PtyProcess::PtyProcess(const std::string& command) {
  struct winsize ws {};
  ws.ws_row = 24;
  ws.ws_col = 80;
  pid_ = ::forkpty(&fd_, nullptr, nullptr, &ws);
  if (pid_ < 0) throw std::runtime_error("forkpty failed");
  if (pid_ == 0) {
    const std::string line = "exec " + command;
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
}

PtyProcess::~PtyProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) ::close(fd_);
}

void PtyProcess::send(const std::string& keys) {
  size_t at = 0;
  while (at < keys.size()) {
    const ssize_t n = ::write(fd_, keys.data() + at, keys.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

bool PtyProcess::type(const std::string& keys, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    struct termios t {};
    // A pseudo-terminal's master reports the settings its command put on the terminal.
    if (::tcgetattr(fd_, &t) == 0 && (t.c_lflag & ICANON) == 0) break;
    if (seconds_since(t0) > timeout_s) return false;
    read_some(5);
  }
  send(keys);
  return true;
}

bool PtyProcess::read_some(int timeout_ms) {
  struct pollfd p {fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, timeout_ms);
  if (r <= 0) return r == 0 || errno == EINTR;
  char buf[4096];
  const ssize_t n = ::read(fd_, buf, sizeof buf);
  if (n <= 0) return false;  // EIO: every process holding the terminal has ended
  out_.append(buf, static_cast<size_t>(n));
  return true;
}

size_t PtyProcess::expect(const std::string& needle, size_t from, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const size_t at = out_.find(needle, std::min(from, out_.size()));
    if (at != std::string::npos) return at + needle.size();
    if (seconds_since(t0) > timeout_s || !read_some(50)) return std::string::npos;
  }
}

int PtyProcess::wait(double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) <= timeout_s) {
    read_some(20);  // keeps the terminal's buffer drained so the command never blocks on a write
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
  }
  return -1;
}

}  // namespace dg::test
