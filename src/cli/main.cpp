// `deltafin`: one binary, one subcommand per file in this folder.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/version.h"
#include "kernels/matmul_detail.h"

namespace deltafin::cli {

namespace {
std::vector<CommandSetup>& registry() {
  static std::vector<CommandSetup> r;
  return r;
}
int g_exit_code = 0;

// How `deltafin` alone groups its commands: by what a user comes to do.
// A command missing here is still listed, under "Other".
struct CommandGroup {
  const char* title;
  std::vector<std::string> names;
};
const std::vector<CommandGroup>& command_groups() {
  static const std::vector<CommandGroup> groups = {
      {"Use a model", {"run", "chat", "serve"}},
      {"Install a model", {"setup", "prepare", "inspect", "doctor"}},
      {"Measure", {"bench", "bench-kernels", "bench-verify", "simulate-drives", "trace-stats", "make-trace"}},
      {"Tools", {"tokenize", "render-chat", "make-model"}},
  };
  return groups;
}

// The text `deltafin` alone prints: every command, one line each.
std::string command_list(CLI::App& app) {
  std::vector<CLI::App*> subs = app.get_subcommands([](CLI::App*) { return true; });
  size_t width = 0;
  for (auto* s : subs) width = std::max(width, s->get_name().size());
  std::string out = fmt::format("{}\n\nUsage: deltafin <command> [options]   (deltafin <command> --help for its options)\n",
                                app.get_description());
  std::vector<bool> listed(subs.size(), false);
  auto line = [&](size_t i) {
    listed[i] = true;
    return fmt::format("  {:<{}}  {}\n", subs[i]->get_name(), width, subs[i]->get_description());
  };
  for (const auto& g : command_groups()) {
    std::string block;
    for (const auto& name : g.names)
      for (size_t i = 0; i < subs.size(); ++i)
        if (!listed[i] && subs[i]->get_name() == name) block += line(i);
    if (!block.empty()) out += fmt::format("\n{}:\n{}", g.title, block);
  }
  std::string rest;
  for (size_t i = 0; i < subs.size(); ++i)
    if (!listed[i]) rest += line(i);
  if (!rest.empty()) out += "\nOther:\n" + rest;
  out += "\nStart with: deltafin run --model models/demo --prompt 'def fibonacci(n):' --max-new 40\n";
  out += "Version: deltafin --version\n";
  return out;
}
}  // namespace

std::string version_text() {
  // Highway's target names; AVX3 is its name for AVX-512 (F, VL, DQ, BW).
  const std::string simd = kernels::kernel_target_name();
  const std::string gloss = simd.rfind("AVX3", 0) == 0 ? " (AVX-512)" : "";
  return fmt::format("deltafin {}\ncommit: {}\nbuild: {}\nsimd target: {}{}", version_number(), version_commit(),
                     version_build(), simd, gloss);
}

CommandRegistration::CommandRegistration(CommandSetup setup) { registry().push_back(setup); }
void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }
int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

}  // namespace deltafin::cli

int main(int argc, char** argv) {
  CLI::App app{"deltafin: exact inference for giant mixture-of-experts models, experts streamed from SSDs"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", [] { return deltafin::cli::version_text(); });
  for (auto setup : deltafin::cli::registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (app.get_subcommands().empty()) {  // `deltafin` alone introduces itself
    std::fputs(deltafin::cli::command_list(app).c_str(), stdout);
    return 0;
  }
  return deltafin::cli::exit_code();
}
