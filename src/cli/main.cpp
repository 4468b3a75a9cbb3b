// `deltafin`: one binary, one subcommand per file in this folder.
#include <cstdio>
#include <vector>

#include "cli/command.h"

namespace deltafin::cli {

namespace {
std::vector<CommandSetup>& registry() {
  static std::vector<CommandSetup> r;
  return r;
}
int g_exit_code = 0;
}  // namespace

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
  app.require_subcommand(1);
  for (auto setup : deltafin::cli::registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return deltafin::cli::exit_code();
}
