// `deltafin doctor [--store STORE] [--full]`: read-only audit; exit 1 if any check fails.
#include <cstdio>

#include "cli/command.h"
#include "store/doctor.h"

namespace deltafin::cli {

namespace {

struct DoctorArgs {
  std::string store;
  bool full = false;
};

void setup(CLI::App& root) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = root.add_subcommand("doctor", "Audit the host and a model store (read-only)");
  set_example(cmd, "deltafin doctor --store /mnt/nvme0/k3-store --full");
  cmd->add_option("--store", a->store, "Model store to audit");
  cmd->add_flag("--full", a->full, "Also verify every checksum (reads the whole store)");
  cmd->callback([a] {
    auto rows = run_doctor(a->store, a->full);
    std::fputs(format_doctor_table(rows).c_str(), stdout);
    bool failed = false;
    for (const auto& r : rows) failed = failed || r.verdict == Verdict::Fail;
    set_exit_code(failed ? 1 : 0);
  });
}

}  // namespace

DF_REGISTER_COMMAND(setup);

}  // namespace deltafin::cli
