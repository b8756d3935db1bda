// The lab harness library: main() and the protocol with the grader, problems with their exact
// oracle, running ranks, and comparisons (harness.hpp).
// Sections: [results] [problems] [running ranks] [comparing] [across processes] [main]
#include "exercises/labs/common/harness.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "exercises/labs/common/lab_support.hpp"
#include "reference/exact_attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/inputs.hpp"
#include "sim/ranks/world.hpp"

namespace ringlab::lab {

// ---- [results] ---------------------------------------------------------------------------------

void CriterionResult::fail(const std::string& why) {
  if (passed || message.empty()) message = why;
  passed = false;
}

void CriterionResult::diverge(Divergence where) {
  passed = false;
  if (!divergence || where.step < divergence->step ||
      (where.step == divergence->step && where.rank < divergence->rank)) {
    divergence = std::move(where);
  }
}

// ---- [problems] --------------------------------------------------------------------------------

Tensor<float> rows_of(const Tensor<float>& global, std::span<const int64_t> positions) {
  return gather_rows(global, positions, 1);
}
Tensor<double> rows_of(const Tensor<double>& global, std::span<const int64_t> positions) {
  return gather_rows(global, positions, 1);
}
Tensor<double> lse_rows_of(const Tensor<double>& global, std::span<const int64_t> positions) {
  return gather_rows(global, positions, 2);
}

Problem make_problem(const ProblemSpec& spec) {
  Problem p;
  p.dims.batch = spec.batch;
  p.dims.seq = spec.ranks * spec.tokens_per_rank;
  p.dims.heads = spec.heads;
  p.dims.kv_heads = spec.kv_heads;
  p.dims.dim = spec.dim;
  p.ranks = spec.ranks;
  p.causal = spec.causal;
  p.layout = spec.layout;
  p.inputs = make_inputs(p.dims, spec.seed, spec.backward);
  p.inputs64 = p.inputs.cast<double>();
  p.reference = exact_attention(p.inputs64.q, p.inputs64.k, p.inputs64.v, p.mask());
  if (spec.backward) {
    p.reference_grads = exact_attention_backward(p.inputs64.q, p.inputs64.k, p.inputs64.v, p.inputs64.dout, p.mask());
    p.forward32 = flash_attention(p.inputs.q, p.inputs.k, p.inputs.v, p.mask());
  }
  const Layout layout(spec.layout, p.dims.seq, spec.ranks);
  for (int64_t r = 0; r < spec.ranks; ++r) p.positions.push_back(layout.positions(r));
  return p;
}

// ---- [running ranks] ---------------------------------------------------------------------------

namespace {
FaultPlan g_faults;  // what uses_received_blocks injects into the runs of its check; none otherwise
}  // namespace

RunReport run_ranks(int64_t ranks, SendMode mode, const std::function<void(Communicator&)>& rank_function,
                    double watchdog_seconds) {
  WorldOptions options;
  options.ranks = static_cast<int>(ranks);
  options.send_mode = mode;
  options.timeout_seconds = watchdog_seconds;
  for (const Fault& f : g_faults.faults)
    if (f.rank < options.ranks) options.faults.faults.push_back(f);
  return World(options).run(rank_function);
}

CriterionResult uses_received_blocks(const std::function<CriterionResult()>& check, int64_t ranks, int64_t steps) {
  CriterionResult result;
  const CriterionResult clean = check();
  if (!clean.passed) {
    result.fail("not correct on this problem yet (P = " + std::to_string(ranks) + "): " + clean.message);
    result.hint = "this criterion alters messages in a run that is otherwise right: make the other criteria pass first";
    return result;
  }
  struct Restore {
    ~Restore() { g_faults = {}; }
  } restore;
  for (int rank = 0; rank < static_cast<int>(ranks); ++rank)
    for (int step = 0; step < static_cast<int>(steps); ++step)
      g_faults.faults.push_back({FaultKind::alter, rank, step});
  const CriterionResult altered = check();
  if (altered.passed) {
    result.fail("the results stayed right when the first message every rank sent at steps 0.." +
                std::to_string(steps - 1) +
                " was altered in transit (every value negated): the ranks computed with blocks they did not receive");
    result.hint =
        "compute with what recv / irecv returns: ranks are separate machines that share nothing but messages "
        "(no globals, statics or pointers to another rank's data), and a block sent only for show does not count";
  }
  return result;
}

bool record_run_failure(const RunReport& report, CriterionResult& result) {
  if (report.ok()) return false;
  switch (report.status) {
    case RunStatus::deadlock:
      result.fail("the ranks deadlocked: every live rank waits for a message or a match that never comes");
      result.deadlock = report.deadlock ? report.deadlock->describe() : report.describe();
      result.hint =
          "look at what each rank waits for below: a send with no matching receive (or the other way "
          "round), a wrong peer, or a blocking send before the receive under rendezvous sends";
      break;
    case RunStatus::comm_fault:
      result.fail("communication fault: " + (report.fault ? report.fault->describe() : report.describe()));
      result.hint = "both ends of a message must agree on its size and order";
      break;
    case RunStatus::error: {
      const std::string what = report.error ? report.error->message : report.describe();
      const int rank = report.error ? report.error->rank : -1;
      bool todo = false;
      if (report.error && report.error->exception) {
        try {
          std::rethrow_exception(report.error->exception);
        } catch (const NotImplemented&) {
          todo = true;
        } catch (...) {
        }
      }
      result.fail(todo ? "not implemented: " + what : "rank " + std::to_string(rank) + " threw: " + what);
      break;
    }
    case RunStatus::ok: break;
  }
  return true;
}

// ---- [comparing] -------------------------------------------------------------------------------

bool compare_into(CriterionResult& result, const std::string& name, std::span<const float> actual,
                  std::span<const double> expected, const Shape& shape, Tolerance tolerance, const std::string& where) {
  if (actual.size() != expected.size()) {
    result.fail(where + ": " + name + " has " + std::to_string(actual.size()) + " elements, expected " +
                std::to_string(expected.size()));
    return false;
  }
  // The element that uses most of its tolerance: its error and its allowance are what we report.
  double worst_ratio = -1, worst_error = 0, worst_allowed = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], r = expected[i];
    const double allowed = tolerance.abs + tolerance.rel * (std::isfinite(r) ? std::fabs(r) : 0);
    double error = 0;
    if (std::isnan(a) || std::isnan(r)) {
      error = INFINITY;
    } else if (std::isinf(a) || std::isinf(r)) {
      error = a == r ? 0 : INFINITY;
    } else {
      error = std::fabs(a - r);
    }
    const double ratio = allowed > 0 ? error / allowed : (error > 0 ? INFINITY : 0);
    if (ratio > worst_ratio) worst_ratio = ratio, worst_error = error, worst_allowed = allowed;
  }
  const CompareResult c = compare(actual, expected, shape, tolerance);
  if (result.observed_error < 0 || worst_ratio > result.observed_error / std::max(result.tolerance, 1e-300)) {
    result.observed_error = worst_error;
    result.tolerance = worst_allowed;
  }
  if (c.ok) return true;
  result.fail(where + ": " + name + " differs from exact attention: " + c.describe());
  return false;
}

// ---- [across processes] ------------------------------------------------------------------------

namespace {

Side g_side = Side::both;
int g_fd = -1;

void write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the judge's process is gone: cannot send what your code produced");
    p += n, size -= static_cast<size_t>(n);
  }
}

// false at the end of the stream before the first byte; throws on an end in the middle.
bool read_all(int fd, void* data, size_t size, const char* what) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = read(fd, p + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (got == 0) return false;
      throw StudentGone(std::string("the process running your code stopped in the middle of sending ") + what);
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

constexpr uint32_t kFrameMagic = 0x31464c52;  // "RLF1"

}  // namespace

void refuse_unless(bool fits, const char* what, const std::string& why) {
  if (!fits)
    throw StudentGone(std::string("what the process running your code sent for ") + what + " is malformed: " + why);
}

Side side() { return g_side; }
void set_side(Side s, int fd) { g_side = s, g_fd = fd; }

void send_frame(const char* what, FrameKind kind, const std::string& payload) {
  const uint32_t magic = kFrameMagic, tag_size = static_cast<uint32_t>(std::strlen(what));
  const uint64_t size = payload.size();
  const auto k = static_cast<uint8_t>(kind);
  write_all(g_fd, &magic, sizeof magic);
  write_all(g_fd, &k, 1);
  write_all(g_fd, &tag_size, sizeof tag_size);
  write_all(g_fd, what, tag_size);
  write_all(g_fd, &size, sizeof size);
  write_all(g_fd, payload.data(), payload.size());
}

std::string receive_frame(const char* what, FrameKind& kind) {
  uint32_t magic = 0, tag_size = 0;
  uint8_t k = 0;
  if (!read_all(g_fd, &magic, sizeof magic, what))
    throw StudentGone(std::string("the process running your code ended before it sent what it produced for ") + what +
                      " (it crashed, exited or was killed: see its exit below)");
  if (magic != kFrameMagic) throw StudentGone(std::string("the process running your code sent garbage for ") + what);
  read_all(g_fd, &k, 1, what);
  read_all(g_fd, &tag_size, sizeof tag_size, what);
  if (tag_size > 4096 || k > static_cast<uint8_t>(FrameKind::exception))
    throw StudentGone(std::string("the process running your code sent garbage for ") + what);
  std::string tag(tag_size, '\0');
  read_all(g_fd, tag.data(), tag_size, what);
  if (tag != what)
    throw StudentGone("the process running your code sent " + tag + " where the judge waited for " + what +
                      " (its run of the criterion took another path)");
  uint64_t size = 0;
  read_all(g_fd, &size, sizeof size, what);
  if (size > wire::kMaxFrame)
    throw StudentGone(std::string("the process running your code sent ") + std::to_string(size >> 20) + " MiB for " +
                      what + ", more than a frame may hold");
  std::string payload(size, '\0');
  read_all(g_fd, payload.data(), size, what);
  kind = static_cast<FrameKind>(k);
  return payload;
}

}  // namespace ringlab::lab

// ---- [main] ------------------------------------------------------------------------------------

namespace {

using ringlab::lab::CriterionResult;

nlohmann::json to_json(const CriterionResult& r) {
  nlohmann::json j = {{"passed", r.passed}, {"message", r.message}, {"hint", r.hint}, {"details", r.details}};
  if (r.observed_error >= 0) {
    j["observed_error"] = std::isfinite(r.observed_error) ? nlohmann::json(r.observed_error) : nlohmann::json("inf");
    j["tolerance"] = r.tolerance;
  }
  if (r.divergence) {
    j["divergence"] = {{"rank", r.divergence->rank},
                       {"step", r.divergence->step},
                       {"block", r.divergence->block},
                       {"what", r.divergence->what}};
  }
  if (!r.deadlock.empty()) j["deadlock"] = r.deadlock;
  return j;
}

int usage() {
  std::cerr << "usage: " << ringlab::lab::lab_name()
            << " --list | --run ID --result FILE | --run ID --student FD | --run ID --judge FD\n"
            << "(run it through 'ringlab grade', which compiles, times out and reports)\n";
  return 2;
}

CriterionResult run_one(const std::vector<ringlab::lab::Criterion>& criteria, const std::string& id) {
  CriterionResult result;
  bool found = false;
  for (const auto& c : criteria) {
    if (c.id != id) continue;
    found = true;
    try {
      result = c.run();
    } catch (const ringlab::lab::StudentGone& e) {
      result = CriterionResult{};
      result.fail(e.what());
    } catch (const ringlab::lab::NotImplemented& e) {
      result.fail(std::string("not implemented: ") + e.what());
    } catch (const std::exception& e) {
      result.fail(std::string("threw: ") + e.what());
    }
  }
  if (!found) result.fail("no criterion '" + id + "' in this lab");
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::vector<ringlab::lab::Criterion> criteria = ringlab::lab::lab_criteria();
  if (args.size() == 1 && args[0] == "--list") {
    for (const auto& c : criteria)
      std::cout << nlohmann::json{{"id", c.id},
                                  {"title", c.title},
                                  {"timeout", c.timeout_seconds},
                                  {"performance", c.performance},
                                  {"needs_gpu", c.needs_gpu},
                                  {"points", c.points}}
                       .dump()
                << "\n";
    return 0;
  }
  if (args.size() != 4 || args[0] != "--run") return usage();
  using ringlab::lab::Side;
  if (args[2] == "--student" || args[2] == "--judge") {
    const int fd = std::atoi(args[3].c_str());
    if (fd < 3) return usage();
    const bool judge = args[2] == "--judge";
    if (judge) {
#ifndef __SANITIZE_ADDRESS__      // LeakSanitizer traces the process at exit, which this would forbid
      prctl(PR_SET_DUMPABLE, 0);  // no process of the same user may trace it or read its memory
#endif
    }
    ringlab::lab::set_side(judge ? Side::judge : Side::student, fd);
    const CriterionResult result = run_one(criteria, args[1]);
    if (!judge) return 0;  // what the student's side concluded is nobody's business
    std::cout << to_json(result).dump() << "\n" << std::flush;
    return std::cout ? 0 : 3;
  }
  if (args[2] != "--result") return usage();
  const CriterionResult result = run_one(criteria, args[1]);
  std::ofstream out(args[3]);
  out << to_json(result).dump() << "\n";
  return out ? 0 : 3;
}
