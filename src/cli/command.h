// Subcommands register themselves: each src/cli/<name>.cpp defines a setup
// function that adds its CLI11 subcommand, and registers it with
// DF_REGISTER_COMMAND. A subcommand's callback stores its exit code with
// set_exit_code(); errors print one line "error: ..." to stderr.
#pragma once
#include <CLI/CLI.hpp>

namespace deltafin::cli {

using CommandSetup = void (*)(CLI::App& root);

struct CommandRegistration {
  explicit CommandRegistration(CommandSetup setup);
};

void set_exit_code(int code);
int exit_code();

// Prints "error: <message>" to stderr and returns 1 (for `return fail(...)`).
int fail(const std::string& message);

// Ends the subcommand's --help with a worked example (one command per line).
inline void set_example(CLI::App* cmd, const std::string& example) { cmd->footer("\nExample:\n  " + example); }

}  // namespace deltafin::cli

#define DF_REGISTER_COMMAND(fn) \
  static const ::deltafin::cli::CommandRegistration df_command_registration_##fn(fn)
