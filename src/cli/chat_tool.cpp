// Shell tools for `diffgemma chat --tool`: declaration and execution (fork + exec of /bin/sh, output captured).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "cli/chat_cli.h"
#include "core/error.h"

namespace dg::cli {
namespace {

constexpr size_t kMaxOutput = 64 * 1024;  // what the model sees of a tool's output

bool valid_name(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

ShellTool parse_tool_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  DG_CHECK(eq != std::string::npos && eq + 1 < spec.size(),
           "--tool '{}': expected NAME=COMMAND or NAME:DESCRIPTION=COMMAND", spec);
  ShellTool t;
  const std::string head = spec.substr(0, eq);
  const size_t colon = head.find(':');
  t.name = head.substr(0, colon);
  t.description = colon == std::string::npos ? "" : head.substr(colon + 1);
  t.command = spec.substr(eq + 1);
  DG_CHECK(valid_name(t.name), "--tool '{}': the name must be letters, digits, '_', '-' or '.'", spec);
  if (t.description.empty())
    t.description = fmt::format("Runs the shell command `{}` on the input and returns its output.", t.command);
  return t;
}

Json tool_declaration(const ShellTool& t) {
  Json j = {{"type", "function"},
            {"function",
             {{"name", t.name},
              {"description", t.description},
              {"parameters",
               {{"type", "object"},
                {"properties", {{"input", {{"type", "string"}, {"description", "The input for the command"}}}}},
                {"required", Json::array({"input"})}}}}}};
  return j;
}

const ShellTool* find_tool(const std::vector<ShellTool>& tools, const std::string& name) {
  for (const ShellTool& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

std::string run_shell_tool(const ShellTool& t, const ToolCall& call) {
  const Json* in = call.arguments.is_object() && call.arguments.contains("input") ? &call.arguments["input"] : nullptr;
  const std::string input = in != nullptr && in->is_string() ? in->get<std::string>() : call.arguments.dump();
  char path[] = "/tmp/diffgemma-tool-XXXXXX";
  const int fd = ::mkstemp(path);
  DG_CHECK(fd >= 0, "tool '{}': cannot create a temporary file for its input", t.name);
  ::unlink(path);
  for (size_t off = 0; off < input.size();) {
    const ssize_t n = ::write(fd, input.data() + off, input.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::lseek(fd, 0, SEEK_SET);
  int out[2];
  if (::pipe(out) != 0) {
    ::close(fd);
    fail("tool '{}': cannot create a pipe", t.name);
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(fd);
    ::close(out[0]);
    ::close(out[1]);
    ::execl("/bin/sh", "sh", "-c", t.command.c_str(), "sh", input.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fd);
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    fail("tool '{}': cannot start /bin/sh", t.name);
  }
  std::string output;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    if (output.size() < kMaxOutput) output.append(buf, std::min(static_cast<size_t>(n), kMaxOutput - output.size()));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) output += fmt::format("\n[exit status {}]", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) output += fmt::format("\n[killed by signal {}]", WTERMSIG(status));
  return output;
}

}  // namespace dg::cli
