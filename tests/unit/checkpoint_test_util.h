// Helpers shared by the checkpoint tests: scratch directories that clean up
// after themselves, and running the built `deltafin` binary.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace deltafin::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("deltafin-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

struct CommandResult {
  bool exited = false;  // false: killed by a signal (a crash)
  int code = -1;
  std::string out, err;
};

// Runs `deltafin <args>` (args are shell words; paths here have no spaces).
inline CommandResult run_deltafin(const std::string& args, const std::filesystem::path& scratch) {
  const auto out = scratch / "cmd.stdout", err = scratch / "cmd.stderr";
  const std::string cmd = std::string(DELTAFIN_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int st = std::system(cmd.c_str());
  CommandResult r;
  // std::system runs through sh: a signal kills the child, sh reports 128+N.
  r.exited = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) < 128;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace deltafin::testing
