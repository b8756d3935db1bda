// Fault injection: KIND@RANK:STEP parsing, and each kind doing what it says — drop ends in the
// deadlock report, duplicate and corrupt are detected by the receiver, delay still gives the
// right result.
#include <catch2/catch.hpp>

#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

namespace {

// A P-rank ring of P - 1 sendrecv steps, step label = step; returns what each rank ends with.
std::function<void(Communicator&)> ring_program(std::vector<Buffer>& results, size_t n = 16) {
  return [&results, n](Communicator& comm) {
    Buffer block = exact_payload(comm.rank(), n);
    Buffer sum(n, 0.0f);
    for (int step = 0; step < comm.size(); ++step) {
      comm.set_step(step);
      for (size_t i = 0; i < n; ++i) sum[i] += block[i];
      if (step + 1 < comm.size()) {
        block = comm.sendrecv((comm.rank() + 1) % comm.size(), step, block,
                              (comm.rank() + comm.size() - 1) % comm.size(), step);
      }
    }
    results[static_cast<size_t>(comm.rank())] = sum;
  };
}

WorldOptions with_fault(int ranks, const std::string& fault, SendMode mode = SendMode::eager) {
  WorldOptions options = world_options(ranks, mode);
  options.faults = parse_fault_plan({fault});
  return options;
}

}  // namespace

TEST_CASE("fault strings parse into kind, rank and step", "[sim][faults]") {
  CHECK(parse_fault("drop@1:2") == Fault{FaultKind::drop, 1, 2});
  CHECK(parse_fault("duplicate@0:0") == Fault{FaultKind::duplicate, 0, 0});
  CHECK(parse_fault("corrupt@7:13") == Fault{FaultKind::corrupt, 7, 13});
  CHECK(parse_fault("delay@3:1") == Fault{FaultKind::delay, 3, 1});
  CHECK(parse_fault("alter@2:0") == Fault{FaultKind::alter, 2, 0});
  CHECK(parse_fault("delay@3:1").to_string() == "delay@3:1");
  const FaultPlan plan = parse_fault_plan({"drop@1:2", "delay@0:0"});
  CHECK(plan.to_string() == "drop@1:2, delay@0:0");
}

TEST_CASE("bad fault strings are one-line usage errors with the fix", "[sim][faults]") {
  const auto [text, problem] = GENERATE(table<std::string, std::string>({
      {"drop", "no '@'"},
      {"drop@1", "no ':'"},
      {"explode@1:2", "unknown KIND \"explode\""},
      {"drop@x:2", "RANK \"x\" is not a whole number"},
      {"drop@1:-2", "STEP \"-2\" is not a whole number"},
      {"drop@1:2x", "STEP \"2x\""},
      {"drop@:2", "RANK \"\""},
  }));
  try {
    parse_fault(text);
    FAIL("no error for " << text);
  } catch (const UsageError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains(problem));
    CHECK_THAT(message, Catch::Contains("KIND@RANK:STEP"));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("fault plans reject two faults at one place and ranks that do not exist", "[sim][faults]") {
  CHECK_THROWS_WITH(parse_fault_plan({"drop@1:2", "delay@1:2"}), Catch::Contains("at most one fault per (rank, step)"));
  CHECK_THROWS_WITH(make_world_options(4, 10, {"drop@4:0"}, false), Catch::Contains("pick a rank from 0 to 3"));
  CHECK_THROWS_AS(World(with_fault(2, "corrupt@2:0")), UsageError);
  CHECK_THROWS_WITH(make_world_options(4, 0, {}, false), Catch::Contains("--timeout must be positive"));
  CHECK_THROWS_WITH(make_world_options(0, 1, {}, false), Catch::Contains("--ranks must be at least 1"));
  const WorldOptions options = make_world_options(4, 2.5, {"delay@1:0"}, true);
  CHECK(options.ranks == 4);
  CHECK(options.timeout_seconds == 2.5);
  CHECK(options.trace);
  CHECK(options.faults.faults == std::vector<Fault>{{FaultKind::delay, 1, 0}});
}

TEST_CASE("drop: the receiver ends in the deadlock report, which names the fault", "[sim][faults]") {
  const int P = GENERATE(2, 3, 4, 8);
  const SendMode mode = GENERATE(SendMode::eager, SendMode::rendezvous);
  std::vector<Buffer> results(static_cast<size_t>(P));
  const TimedRun run = timed_run(with_fault(P, "drop@1:0", mode), ring_program(results));
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check, not the timeout
  const RankWaitReport& victim = run.report.deadlock->ranks.at(static_cast<size_t>(2 % P));
  CHECK(victim.state == RankState::blocked);
  CHECK(victim.peer == 1);
  CHECK(victim.step == 0);
  REQUIRE(run.report.faults.size() == 1);
  CHECK(run.report.faults[0].fired);
  CHECK_THAT(run.report.faults[0].effect,
             Catch::StartsWith("dropped message #1 from rank 1 to rank " + std::to_string(2 % P)));
  CHECK_THAT(run.report.describe(), Catch::Contains("injected fault drop@1:0: dropped message"));
}

TEST_CASE("duplicate: the receiver sees a repeated sequence number", "[sim][faults]") {
  const int P = GENERATE(2, 3, 4, 8);
  std::vector<Buffer> results(static_cast<size_t>(P));
  const RunReport report = World(with_fault(P, "duplicate@0:1")).run(ring_program(results));
  INFO(report.describe());
  if (P == 2) {
    // Step 1 is the last step at P = 2: rank 0 sends nothing there, so the fault never fires.
    REQUIRE(report.ok());
    CHECK_FALSE(report.faults[0].fired);
    CHECK_THAT(report.describe(), Catch::Contains("never fired"));
    return;
  }
  REQUIRE(report.status == RunStatus::comm_fault);
  CHECK(report.fault->kind == "duplicate");
  CHECK(report.fault->detected_by == 1);
  CHECK(report.fault->peer == 0);
  CHECK(report.fault->sequence == 2);
  CHECK(report.fault->step == 1);
  CHECK_THAT(report.fault->detail,
             Catch::Contains("rank 1 received message #2 from rank 0") && Catch::Contains("a second time"));
  CHECK(report.exit_status() == kExitCommFault);
}

TEST_CASE("corrupt: the receiver's checksum check fails", "[sim][faults]") {
  const int P = GENERATE(2, 3, 4, 8);
  std::vector<Buffer> results(static_cast<size_t>(P));
  const RunReport report = World(with_fault(P, "corrupt@1:0")).run(ring_program(results));
  INFO(report.describe());
  REQUIRE(report.status == RunStatus::comm_fault);
  CHECK(report.fault->kind == "corrupt");
  CHECK(report.fault->detected_by == 2 % P);
  CHECK(report.fault->peer == 1);
  CHECK_THAT(report.fault->detail, Catch::Contains("checksum does not match"));
}

TEST_CASE("corrupt and duplicate also hit a collective's messages", "[sim][faults]") {
  const std::string fault = GENERATE("corrupt@0:0", "duplicate@0:0");
  const RunReport report =
      World(with_fault(4, fault)).run([](Communicator& comm) { comm.all_to_all(exact_payload(comm.rank(), 8)); });
  INFO(report.describe());
  REQUIRE(report.status == RunStatus::comm_fault);
  CHECK(report.fault->kind == fault.substr(0, fault.find('@')));
  CHECK(report.fault->peer == 0);
  CHECK_THAT(report.faults[0].effect, Catch::Contains("all_to_all #0"));
}

TEST_CASE("alter: the message arrives negated and no receiver can tell", "[sim][faults]") {
  const int P = GENERATE(2, 3, 4);
  std::vector<Buffer> clean(static_cast<size_t>(P)), altered(static_cast<size_t>(P));
  REQUIRE(World(world_options(P)).run(ring_program(clean)).ok());
  const RunReport report = World(with_fault(P, "alter@1:0")).run(ring_program(altered));
  INFO(report.describe());
  REQUIRE(report.ok());  // silent: no checksum failure, no fault reported by a receiver
  CHECK(report.faults[0].fired);
  CHECK_THAT(report.faults[0].effect,
             Catch::StartsWith("negated every value of message #1 from rank 1 to rank " + std::to_string(2 % P)));
  // Rank 1's block travels on from rank 2 (it is what rank 2 forwards at step 1): every rank it
  // reaches sums -block where the clean run summed +block; rank 1 itself never sees its own block
  // come back, so it alone is untouched.
  const std::vector<float> own = exact_payload(1, 16);
  for (int rank = 0; rank < P; ++rank) {
    const Buffer& a = altered[static_cast<size_t>(rank)];
    const Buffer& c = clean[static_cast<size_t>(rank)];
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == (rank == 1 ? c[i] : c[i] - 2 * own[i]));
  }
}

TEST_CASE("delay: the message arrives late and the result is bitwise the same", "[sim][faults]") {
  const int P = GENERATE(2, 3, 4);
  std::vector<Buffer> clean(static_cast<size_t>(P)), delayed(static_cast<size_t>(P));
  REQUIRE(World(world_options(P)).run(ring_program(clean)).ok());
  WorldOptions options = with_fault(P, "delay@0:0");
  options.fault_delay_seconds = 0.5;
  const TimedRun run = timed_run(options, ring_program(delayed));
  INFO(run.report.describe());
  REQUIRE(run.report.ok());
  CHECK(run.seconds >= 0.5);  // a lower bound the delay implies: rank 1 cannot finish before it
  CHECK(run.report.faults[0].fired);
  CHECK_THAT(run.report.faults[0].effect, Catch::StartsWith("delayed message #1 from rank 0 to rank 1"));
  // Rank 1 waited for it: the delay runs from rank 0's send, and rank 1 posts its receive at about
  // the same time; half the delay is left for rank 1's thread starting late on a loaded machine.
  CHECK(run.report.counters[1].blocked_seconds >= 0.25);
  for (int rank = 0; rank < P; ++rank)
    CHECK(same_bits(delayed[static_cast<size_t>(rank)], clean[static_cast<size_t>(rank)]));
}

TEST_CASE("a fault fires on the first message at its step only", "[sim][faults]") {
  // Rank 0 sends three messages at step 0, then a marker at step 1; once rank 1 has the marker, all
  // three are in its queue, and only the first may still be invisible (delayed). Checked with
  // test(), which does not wait: an ordering of events, not a measurement of time. The delay is
  // long enough that the first message cannot have become visible in between.
  WorldOptions options = with_fault(2, "delay@0:0");
  options.fault_delay_seconds = 2.0;
  std::vector<int> visible_after_marker(3, -1);
  const RunReport report = World(options).run([&](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.set_step(0);
      for (int i = 0; i < 3; ++i) comm.send(1, i, exact_payload(0, 1));
      comm.set_step(1);
      comm.send(1, 99, exact_payload(0, 1));
      return;
    }
    comm.recv(0, 99);
    std::vector<Request> requests;
    for (int i = 0; i < 3; ++i) requests.push_back(comm.irecv(0, i));
    for (int i = 2; i >= 0; --i)
      visible_after_marker[static_cast<size_t>(i)] = requests[static_cast<size_t>(i)].test() ? 1 : 0;
    for (Request& request : requests) request.wait();
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  REQUIRE(report.faults.size() == 1);
  CHECK_THAT(report.faults[0].effect, Catch::StartsWith("delayed message #1 from rank 0 to rank 1"));
  CHECK(visible_after_marker[0] == 0);  // delayed
  CHECK(visible_after_marker[1] == 1);  // the later messages of step 0 are not
  CHECK(visible_after_marker[2] == 1);
}
