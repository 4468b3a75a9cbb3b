// `deltafin doctor`: a read-only, offline audit of the host and (optionally)
// a store. Every check yields one row: PASS, WARN (works, but slower or less
// safe) or FAIL.
#pragma once
#include <string>
#include <vector>

namespace deltafin {

enum class Verdict { Pass, Warn, Fail };

struct DoctorRow {
  std::string check;
  Verdict verdict = Verdict::Pass;
  std::string detail;
};

// full: also verify every expert copy's xxh3-128 and every spine file's.
std::vector<DoctorRow> run_doctor(const std::string& store, bool full);
std::string format_doctor_table(const std::vector<DoctorRow>& rows);

}  // namespace deltafin
