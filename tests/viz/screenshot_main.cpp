// The screenshot test's main: Catch2's runner, unless xvfb-run is missing — then it says so and
// exits 77, which ctest reports as skipped (SKIP_RETURN_CODE). Compiled, like tests/catch_main.cpp,
// without ringlab's -Werror: Catch's implementation trips GCC 12's -Wmaybe-uninitialized in
// <regex> under the sanitizer builds (a false positive in the standard library).
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace {

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && access((std::filesystem::path(dir) / program).c_str(), X_OK) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!on_path("xvfb-run")) {
    std::printf("SKIPPED: xvfb-run is not installed (Debian package xvfb; scripts/setup installs it)\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
