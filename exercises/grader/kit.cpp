// Reading a grader kit (kit.hpp): grader.json, its paths relative to the kit's folder.
#include "exercises/grader/kit.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reference/error.hpp"

namespace ringlab::grader {

namespace fs = std::filesystem;

Setup load_kit(const std::string& directory) {
  const fs::path root = fs::absolute(directory);
  std::ifstream in(root / "grader.json");
  if (!in) throw UsageError(directory + " is not a grader kit (no grader.json); give the kit's grader folder");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError((root / "grader.json").string() + " cannot be read: " + e.what() + "; make the kit again");
  }
  if (j.value("format", std::string()) != "ringlab-grader-kit 1")
    throw UsageError((root / "grader.json").string() + " is not a kit this grader reads; make the kit again");
  auto at = [&](const std::string& relative) { return (root / relative).lexically_normal().string(); };
  Setup setup;
  setup.kit = true;
  setup.command = j.value("command", std::string("ringlab-grade"));
  setup.toolchain.compiler = j.at("compiler");
  setup.toolchain.compiler_version = j.at("compiler_version");
  setup.toolchain.compile_flags = j.at("compile_flags").get<std::vector<std::string>>();
  setup.toolchain.link_flags = j.at("link_flags").get<std::vector<std::string>>();
  for (const nlohmann::json& library : j.at("libraries")) setup.toolchain.libraries.push_back(at(library));
  for (const nlohmann::json& l : j.at("labs")) {
    LabInfo lab;
    lab.id = l.at("id");
    lab.title = l.at("title");
    lab.harness = at(l.at("harness"));
    lab.headers = at(l.at("headers"));
    lab.criteria = l.at("criteria");
    lab.judge = at(l.at("judge"));
    setup.labs.push_back(lab);
  }
  setup.headers = [](const LabInfo& lab) { return lab.headers; };
  return setup;
}

}  // namespace ringlab::grader
