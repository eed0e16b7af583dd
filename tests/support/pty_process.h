// A command run under a pseudo-terminal (its stdin, stdout and stderr), for end-to-end tests of interactive modes:
// what the test writes arrives as typed keys, so Ctrl-C ("\x03") reaches the command as SIGINT through the
// terminal's line discipline and Ctrl-D ("\x04") as the end of input, as they do for a user.
#pragma once

#include <string>
#include <sys/types.h>

namespace dg::test {

class PtyProcess {
 public:
  explicit PtyProcess(const std::string& command);  // runs under /bin/sh -c, in an 80x24 terminal
  ~PtyProcess();                                    // kills the command if it still runs
  PtyProcess(const PtyProcess&) = delete;
  PtyProcess& operator=(const PtyProcess&) = delete;

  void send(const std::string& keys);
  // Sends keys meant for the line editor: first waits (up to `timeout_s`) until the command has its terminal out of
  // canonical mode. The editor prints its prompt before it leaves canonical mode, and a Ctrl-D the terminal takes in
  // canonical mode reaches the editor as a NUL, so keys sent on seeing the prompt could be lost; a person is never
  // that quick. Returns false when the terminal never left canonical mode.
  bool type(const std::string& keys, double timeout_s = 10);
  // Reads until the output from position `from` on holds `needle`; returns the position just after it, or
  // std::string::npos after `timeout_s` seconds or at the end of the output.
  size_t expect(const std::string& needle, size_t from, double timeout_s);
  const std::string& output() const { return out_; }
  // Waits for the command to end: its exit status, or -1 after a signal or `timeout_s` seconds.
  int wait(double timeout_s);

 private:
  bool read_some(int timeout_ms);  // false at the end of the output

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

}  // namespace dg::test
