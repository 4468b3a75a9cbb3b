#include "test_models.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace deltafin::testing {

int run_command(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
const std::string& temp_root() {
  // Never destroyed: the Cleanup object below uses it at exit.
  static const std::string& root = *new std::string([] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "deltafin-test-XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    return std::string(d ? d : "/tmp");
  }());
  return root;
}
struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    if (!temp_root().empty() && temp_root() != "/tmp") std::filesystem::remove_all(temp_root(), ec);
  }
} cleanup;
}  // namespace

const std::string& tiny_model(int seed) {
  static std::mutex mu;
  static std::map<int, std::string> made;
  std::lock_guard<std::mutex> lock(mu);
  auto it = made.find(seed);
  if (it != made.end()) return it->second;
  std::string dir = temp_root() + "/tiny-" + std::to_string(seed);
  std::string cmd = std::string(DELTAFIN_BINARY) + " make-model --preset tiny --seed " + std::to_string(seed) +
                    " --out " + dir + " > /dev/null";
  EXPECT_EQ(run_command(cmd), 0) << cmd;
  return made.emplace(seed, dir).first->second;
}

const std::string& dspark_model(const std::string& target_dir, int seed) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, std::string> made;
  std::lock_guard<std::mutex> lock(mu);
  auto it = made.find({target_dir, seed});
  if (it != made.end()) return it->second;
  std::string dir = temp_dir("dspark-" + std::to_string(made.size()) + "-" + std::to_string(seed));
  std::string cmd = std::string(DELTAFIN_BINARY) + " make-model --preset dspark --target " + target_dir +
                    " --seed " + std::to_string(seed) + " --out " + dir + " > /dev/null";
  EXPECT_EQ(run_command(cmd), 0) << cmd;
  return made.emplace(std::make_pair(target_dir, seed), dir).first->second;
}

std::string temp_dir(const std::string& name) {
  static std::mutex mu;
  static int counter = 0;
  std::lock_guard<std::mutex> lock(mu);
  const std::string dir = temp_root() + "/" + name + "-" + std::to_string(counter++);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace deltafin::testing
