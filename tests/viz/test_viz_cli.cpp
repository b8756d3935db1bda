// ringlab-viz's command line for what fails before any window opens: malformed or unreadable
// traces, bad flags, steps and machines (--hw) give one line on stderr, exit 2, and no output file.
// So do the flags of a screenshot without --screenshot.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;

// ctest runs test cases as parallel processes: every temporary name carries the process id.
fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("ringlab_viz_cli_" + std::to_string(getpid()) + "_" + name);
}

struct Result {
  int status = -1;
  std::string err;
};

Result run_viz(const std::string& arguments) {
  const fs::path err_file = temp_path("stderr.txt");
  // Without a display: a flag that is wrongly accepted opens no window (it fails instead of hanging).
  const std::string command = "env -u DISPLAY -u WAYLAND_DISPLAY " + std::string(RINGLAB_VIZ_BINARY) + " " + arguments +
                              " 2> " + err_file.string() + " > /dev/null";
  const int raw = std::system(command.c_str());
  Result result;
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(err_file);
  std::stringstream text;
  text << in.rdbuf();
  result.err = text.str();
  fs::remove(err_file);
  return result;
}

int lines_of(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("ringlab-viz: a malformed trace is one line on stderr and exit 2, with no PNG", "[viz][cli]") {
  const fs::path bad = temp_path("bad.json"), png = temp_path("never.png");
  std::ofstream(bad) << "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"send\", \"pid\": 0, \"tid\": 1, \"ts\": 0, "
                        "\"dur\": \"soon\"}]}";
  fs::remove(png);
  const Result result = run_viz("--trace " + bad.string() + " --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(lines_of(result.err) == 1);
  CHECK(result.err.rfind("ringlab-viz: error: " + bad.string(), 0) == 0);
  CHECK(result.err.find("\"dur\"") != std::string::npos);
  CHECK_FALSE(fs::exists(png));
  fs::remove(bad);
}

TEST_CASE("ringlab-viz: an unreadable trace, a bad flag, a bad step: one line, exit 2", "[viz][cli]") {
  const fs::path png = temp_path("never.png");
  Result result = run_viz("--trace /nonexistent/run.json --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(lines_of(result.err) == 1);
  CHECK(result.err.find("cannot open") != std::string::npos);

  result = run_viz("--layout zigzag --seq 100 --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(lines_of(result.err) == 1);

  result = run_viz("--ranks 4 --step 40 --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(result.err.find("--step 40 is past the last step (4)") != std::string::npos);

  result = run_viz("--panel gird --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(result.err.find("unknown panel") != std::string::npos);

  result = run_viz("--hw h100-nvlnk --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(lines_of(result.err) == 1);
  CHECK(result.err.find("unknown hardware preset 'h100-nvlnk'") != std::string::npos);

  result = run_viz("--hw /nonexistent/machine.json --screenshot " + png.string());
  CHECK(result.status == 2);
  CHECK(lines_of(result.err) == 1);

  result = run_viz("--no-such-flag");
  CHECK(result.status == 2);
  CHECK(lines_of(result.err) == 1);
  CHECK_FALSE(fs::exists(png));
}

TEST_CASE("ringlab-viz: --step nan or inf, and --geometry or --frames without --screenshot: one line, exit 2",
          "[viz][cli]") {
  const fs::path png = temp_path("never.png");
  for (const char* step : {"nan", "NaN", "inf", "-inf", "1e400", "2x"}) {
    INFO("--step " << step);
    const Result result = run_viz(std::string("--ranks 4 --step ") + step + " --screenshot " + png.string());
    CHECK(result.status == 2);
    CHECK(lines_of(result.err) == 1);
    CHECK(result.err.find("a step is a number 0 or more") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(png));
  for (const char* flag : {"--geometry", "--frames"}) {
    INFO(flag);
    const std::string value = std::string(flag) == "--frames" ? "2" : temp_path("g.json").string();
    const Result result = run_viz(std::string(flag) + " " + value);
    CHECK(result.status == 2);
    CHECK(lines_of(result.err) == 1);
    CHECK(result.err.rfind("ringlab-viz: error: " + std::string(flag) + " needs --screenshot", 0) == 0);
  }
  CHECK_FALSE(fs::exists(temp_path("g.json")));
}
