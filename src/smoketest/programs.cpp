#include "smoketest/programs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace dg::smoke {
namespace {

namespace fs = std::filesystem;
constexpr size_t kMaxCapture = 64 * 1024;

struct Proc {
  int exit_code = -1;
  bool timed_out = false;
  std::string out, err;
};

// A fresh directory under the system's temporary directory, removed when this goes out of scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dg-program-XXXXXX").string();
    DG_CHECK(::mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary directory for a program run");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_program_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  DG_CHECK(out.good(), "cannot write '{}'", p.string());
}

// Runs argv in `dir` (its own process group) with `input` on stdin; kills the group after `timeout_s`, whether or
// not the program has closed its pipes. Nothing allocates between fork and exec (the caller may have threads).
Proc run_in(const fs::path& dir, const std::vector<std::string>& argv, const std::string& input, double timeout_s) {
  TempDir in_dir;
  const fs::path in_path = in_dir.path / "stdin";
  write_program_file(in_path, input);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string in_file = in_path.string(), cwd = dir.string();
  int out[2], err[2];
  DG_CHECK(::pipe(out) == 0 && ::pipe(err) == 0, "cannot create pipes for a program run");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(in_file.c_str(), O_RDONLY);
    if (fd < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::dup2(fd, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(fd);
    ::close(out[0]);
    ::close(out[1]);
    ::close(err[0]);
    ::close(err[1]);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    fail("cannot start '{}'", argv[0]);
  }
  ::setpgid(pid, pid);
  Proc p;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto left_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  };
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&p.out, &p.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0 && !p.timed_out) {
    const auto left = left_ms();
    if (left <= 0) {
      p.timed_out = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else if (sinks[i]->size() < kMaxCapture) {
        sinks[i]->append(buf, std::min(static_cast<size_t>(n), kMaxCapture - sinks[i]->size()));
      }
    }
  }
  for (const pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  // The pipes are closed (or the time is up): the program may still run (it closed them itself).
  int status = 0;
  bool exited = false;
  while (!p.timed_out) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    if (left_ms() <= 0) p.timed_out = true;
    else ::usleep(1000);
  }
  ::kill(-pid, SIGKILL);  // the whole group: a program's children too (no-op when they are gone)
  if (!exited) ::waitpid(pid, &status, 0);
  if (!p.timed_out && WIFEXITED(status)) p.exit_code = WEXITSTATUS(status);
  return p;
}

std::string file_name(const std::string& language) {
  if (language == "sh") return "prog.sh";
  if (language == "python") return "prog.py";
  return "prog.c";
}

std::string json_string(const Json& j, const char* key, const std::string& where) {
  DG_CHECK(j.contains(key) && j[key].is_string(), "{}: \"{}\" must be a string", where, key);
  return j[key].get<std::string>();
}

}  // namespace

const char* verdict_name(ProgramVerdict v) {
  switch (v) {
    case ProgramVerdict::kPass: return "pass";
    case ProgramVerdict::kCompileFail: return "compile_fail";
    case ProgramVerdict::kWrongOutput: return "wrong_output";
  }
  return "?";
}

std::vector<ProgramPrompt> load_programs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read the programmatic battery '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const Json j = Json::parse(ss.str(), nullptr, false);
  DG_CHECK(!j.is_discarded() && j.is_object() && j.contains("prompts") && j["prompts"].is_array(),
           "'{}' is not a programmatic battery (an object with a \"prompts\" array)", path);
  std::vector<ProgramPrompt> out;
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    const Json& p = j["prompts"][i];
    const std::string where = fmt::format("{}: prompts[{}]", path, i);
    DG_CHECK(p.is_object(), "{} must be an object", where);
    ProgramPrompt q;
    q.name = json_string(p, "name", where);
    q.language = json_string(p, "language", where);
    DG_CHECK(q.language == "sh" || q.language == "python" || q.language == "c",
             "{} ({}): language must be sh, python or c, not '{}'", where, q.name, q.language);
    q.prompt = json_string(p, "prompt", where);
    DG_CHECK(p.contains("cases") && p["cases"].is_array() && !p["cases"].empty(), "{} ({}): \"cases\" must be a "
             "non-empty array", where, q.name);
    for (const Json& c : p["cases"]) {
      ProgramCase pc;
      pc.input = c.value("input", "");
      pc.args = c.value("args", std::vector<std::string>{});
      pc.output = json_string(c, "output", where + " (" + q.name + ") case");
      pc.exit_code = c.value("exit_code", 0);
      q.cases.push_back(std::move(pc));
    }
    out.push_back(std::move(q));
  }
  return out;
}

std::string strip_fence(const std::string& reply, bool* fenced) {
  *fenced = false;
  const size_t open = reply.find("```");
  if (open == std::string::npos) return reply;
  const size_t body = reply.find('\n', open);
  if (body == std::string::npos) return reply;
  const size_t close = reply.find("```", body + 1);
  *fenced = true;
  return reply.substr(body + 1, close == std::string::npos ? std::string::npos : close - body - 1);
}

ProgramResult judge_program(const ProgramPrompt& p, const std::string& reply, double timeout_s) {
  ProgramResult r;
  r.program = strip_fence(reply, &r.fenced);
  if (!r.program.empty() && r.program.back() != '\n') r.program += '\n';
  const std::string file = file_name(p.language);
  TempDir build;
  write_program_file(build.path / file, r.program);
  std::vector<std::string> check;
  if (p.language == "sh") check = {"sh", "-n", file};
  if (p.language == "python") check = {"python3", "-m", "py_compile", file};
  if (p.language == "c") check = {"cc", "-O1", "-o", "prog", file};
  const Proc c = run_in(build.path, check, "", timeout_s);
  if (c.timed_out || c.exit_code != 0) {
    r.verdict = ProgramVerdict::kCompileFail;
    r.diagnostics = c.timed_out ? "the check timed out" : c.err + c.out;
    return r;
  }
  r.verdict = ProgramVerdict::kPass;
  for (const ProgramCase& pc : p.cases) {
    TempDir run;  // each case in a fresh directory with only the program
    const std::string what = p.language == "c" ? "prog" : file;
    fs::copy_file(build.path / what, run.path / what);
    std::vector<std::string> argv;
    if (p.language == "sh") argv = {"sh", file};
    if (p.language == "python") argv = {"python3", file};
    if (p.language == "c") argv = {"./prog"};
    argv.insert(argv.end(), pc.args.begin(), pc.args.end());
    const Proc out = run_in(run.path, argv, pc.input, timeout_s);
    CaseRun cr;
    cr.timed_out = out.timed_out;
    cr.exit_code = out.exit_code;
    cr.output = out.out;
    cr.pass = !out.timed_out && out.exit_code == pc.exit_code && out.out == pc.output;
    if (!cr.pass) r.verdict = ProgramVerdict::kWrongOutput;
    r.cases.push_back(std::move(cr));
  }
  return r;
}

}  // namespace dg::smoke
