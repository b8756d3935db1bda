// `ringlab figure`: files written with the viewer's colours, every kind, and bad input (exit 2, one
// line, no file left behind).
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/cli/run_binary.hpp"
#include "viz/figures/figure.hpp"

using ringlab::test::BinaryRun;
using ringlab::test::run_binary;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Runs ringlab with `words` and the output file appended as `--out FILE`.
BinaryRun figure(std::vector<std::string> words, const std::string& out) {
  words.insert(words.begin(), "figure");
  words.insert(words.end(), {"--out", out});
  return run_binary(RINGLAB_BINARY, words);
}

}  // namespace

TEST_CASE("ringlab figure writes an SVG (and a PNG) whose cells have the viewer's colours", "[viz][figures][cli]") {
  const std::string svg = "/tmp/ringlab_viz_figure_cli_grid.svg", png = "/tmp/ringlab_viz_figure_cli_grid.png";
  std::vector<std::string> words = {"grid-step", "--ranks", "4", "--seq", "64", "--causal"};
  if (ringlab::viz::png_supported()) words.insert(words.end(), {"--png", png});
  const BinaryRun run = figure(words, svg);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("wrote " + svg + " (grid-step, ") == 0);
  const std::string content = slurp(svg);
  CHECK(content.rfind("<?xml", 0) == 0);
  // Cell (3, 0) is computed at step 3 of 4.
  const std::string cell = "class=\"cell visible\" data-q=\"3\" data-k=\"0\" data-step=\"3\"";
  const size_t at = content.find(cell);
  REQUIRE(at != std::string::npos);
  const size_t start = content.rfind("<rect", at);
  CHECK(content.substr(start, at - start).find("fill=\"" + ringlab::viz::hex(ringlab::viz::step_colour(3, 4)) + "\"") !=
        std::string::npos);
  CHECK(content.find("class=\"cell skipped\" data-q=\"0\" data-k=\"3\"") != std::string::npos);
  if (ringlab::viz::png_supported()) CHECK(slurp(png).substr(1, 3) == "PNG");
  std::remove(svg.c_str());
  std::remove(png.c_str());
  for (const char* kind : {"load", "timeline", "grid-rank"}) {
    const BinaryRun other = figure({kind, "--ranks", "4", "--seq", "1024", "--causal", "--backward"}, svg);
    CHECK(other.status == 0);
    CHECK(slurp(svg).find("</svg>") != std::string::npos);
    std::remove(svg.c_str());
  }
}

TEST_CASE("ringlab figure: bad input exits 2 with one line and writes nothing", "[viz][figures][cli]") {
  const std::string svg = "/tmp/ringlab_viz_figure_cli_bad.svg";
  std::remove(svg.c_str());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"pie"}, "grid-step, grid-rank, load, timeline or precision"},
      {{"pie", "--pass", "backward"}, "unknown figure 'pie'"},  // the kind first, then its flags
      {{"grid-step", "--ranks", "128", "--seq", "1024"}, "at most 64"},
      {{"timeline", "--ranks", "128", "--seq", "1024"}, "at most 64 --ranks"},
      {{"grid-step", "--pass", "backward"}, "add --backward"},
      {{"grid-step", "--pass", "sideways"}, "--pass forward or --pass backward"},
      {{"load", "--hw", "no-such-machine"}, "no-such-machine"},
      // Flags the kind does not use, once silently ignored.
      {{"load", "--pass", "backward", "--backward"}, "--pass does not change figure load"},
      {{"grid-step", "--hw", "h100-ib"}, "--hw does not change figure grid-step"},
      {{"timeline", "--precision", "fp16"}, "--precision does not change figure timeline"},
      {{"load", "--merge", "logsigmoid"}, "--merge does not change figure load"},
      {{"precision", "--backward"}, "always runs the backward pass"},
      {{"precision", "--hw", "cpu"}, "--hw does not change figure precision"},
      {{"precision", "--precision", "fp32"}, "pick --precision bf16 or fp16"},
      {{"precision", "--ranks", "1"}, "use --ranks 2 or more"},
      // --out is the SVG: not under a .png name, not the PNG's file.
      {{"grid-step", "--png", svg}, "name the same file"},
  };
  for (const auto& [words, message] : cases) {
    const BinaryRun run = figure(words, svg);
    INFO(words.front() << ": " << run.err);
    CHECK(run.status == 2);
    REQUIRE(run.err_lines().size() == 1);
    CHECK(run.err_lines()[0].find(message) != std::string::npos);
    CHECK_FALSE(exists(svg));
  }
  const std::string png = "/tmp/ringlab_viz_figure_cli_bad.png";
  std::remove(png.c_str());
  const BinaryRun named_png = figure({"grid-step"}, png);
  CHECK(named_png.status == 2);
  REQUIRE(named_png.err_lines().size() == 1);
  CHECK(named_png.err_lines()[0].find("name it .svg and add --png") != std::string::npos);
  CHECK_FALSE(exists(png));
}
