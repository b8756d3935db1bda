// ringlab — the command line. Subcommands are added by the parts that own them:
//   cli/ringlab        run, plan, compare, figure
//   exercises/cli  exercises, check, grade
// Errors a user can cause print one line "ringlab: error: <problem>; <fix>" and exit 2
// (3 for a deadlock or communication fault); see reference/error.hpp.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "cli/ringlab/commands.hpp"
#include "exercises/cli/commands.hpp"
#include "reference/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ringlab: sequence-parallel attention simulator and reference (ring, Ulysses, zig-zag, striped)"};
  app.name("ringlab");
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  app.set_version_flag("--version", std::string("ringlab ") + RINGLAB_VERSION, "print the version and exit");
  ringlab::cli::Registry registry;
  ringlab::cli::add_sim_commands(app, registry);
  ringlab::cli::add_exercise_commands(app, registry);
  if (const std::optional<int> status = ringlab::cli::parse_command_line(
          app, argc, argv, std::cout, std::cerr,
          "ringlab: ", "run 'ringlab --help' or 'ringlab <command> --help' for the flags")) {
    return *status;
  }
  try {
    return registry.run();
  } catch (const ringlab::UsageError& error) {
    std::cerr << "ringlab: error: " << error.what() << "\n";
    return ringlab::kExitUsage;
  } catch (const ringlab::CommError& error) {
    std::cerr << "ringlab: communication fault: " << error.what() << "\n";
    return ringlab::kExitCommFault;
  } catch (const std::bad_alloc&) {
    std::cerr << "ringlab: error: out of memory; use smaller sizes (--seq, --batch, --heads) or --dry-run\n";
    return ringlab::kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "ringlab: internal error: " << error.what() << " (please report this)\n";
    return 70;
  }
}
