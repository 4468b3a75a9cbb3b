// What `deltafin --version` prints: the release number (CMakeLists.txt's
// project version), the git commit the binary was built from (with "-dirty"
// when tracked files differed), the build type, and the SIMD target the
// kernels dispatch to on this machine. The first three are written at build
// time by cmake/version.cmake.
#pragma once
#include <string>

namespace deltafin::cli {

const char* version_number();
const char* version_commit();
const char* version_build();

// The lines of `deltafin --version`.
std::string version_text();

}  // namespace deltafin::cli
