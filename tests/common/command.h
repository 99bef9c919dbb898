// Runs a shell command the way a user would and captures what it printed and its exit status, for the tests of
// morgana's binaries (the CLI, the embedding example). The command line carries its own redirections.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace morgana::testing {

struct CommandResult {
  int code = -1;    // the exit status; -1 when the command did not run or did not exit normally
  std::string out;  // its standard output (and whatever the command line redirected there)
};

inline CommandResult run_command(const std::string& command_line) {
  CommandResult r;
  FILE* p = popen(command_line.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace morgana::testing
