// Traces and counters: what a run records, the Chrome trace JSON it writes, and reading it back.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

namespace {

// Two steps of a ring with one compute scope per step; returns the report of a traced run.
RunReport traced_ring(int P) {
  WorldOptions options = world_options(P);
  options.trace = true;
  return World(options).run([](Communicator& comm) {
    Buffer block = exact_payload(comm.rank(), 8);
    for (int step = 0; step < 2; ++step) {
      comm.set_step(step, "forward");
      const int kv_block = (comm.rank() + comm.size() - step) % comm.size();
      comm.compute("attention block", 1000.0 * (step + 1), {comm.rank(), kv_block, step == 0 ? "causal" : "full"},
                   [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
      block = comm.sendrecv((comm.rank() + 1) % comm.size(), step, block, (comm.rank() + comm.size() - 1) % comm.size(),
                            step);
    }
    comm.barrier();
  });
}

std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ringlab-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

}  // namespace

TEST_CASE("a traced run records compute and comm events with ringlab's labels", "[sim][trace]") {
  const int P = GENERATE(1, 2, 3, 4);
  const RunReport report = traced_ring(P);
  INFO(report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) {
    std::vector<const TraceEvent*> compute, sendrecv, barrier;
    for (const TraceEvent& event : report.trace) {
      if (event.rank != rank) continue;
      CHECK(event.start_us >= 0);
      CHECK(event.duration_us >= 0);
      if (event.lane == TraceLane::compute) compute.push_back(&event);
      if (event.name == "sendrecv") sendrecv.push_back(&event);
      if (event.name == "barrier") barrier.push_back(&event);
    }
    REQUIRE(compute.size() == 2);
    REQUIRE(sendrecv.size() == 2);
    REQUIRE(barrier.size() == 1);
    for (int step = 0; step < 2; ++step) {
      const TraceEvent& block = *compute[static_cast<size_t>(step)];
      CHECK(block.name == "attention block");
      CHECK(block.step == step);
      CHECK(block.label == "forward");
      CHECK(block.q_block == rank);
      CHECK(block.kv_block == (rank + P - step) % P);
      CHECK(block.mask == (step == 0 ? "causal" : "full"));
      CHECK(block.flops == 1000.0 * (step + 1));
      CHECK(block.duration_us >= 2000);
      const TraceEvent& comm = *sendrecv[static_cast<size_t>(step)];
      CHECK(comm.lane == TraceLane::comm);
      CHECK(comm.peer == (rank + 1) % P);
      CHECK(comm.tag == step);
      CHECK(comm.bytes == 8 * static_cast<int64_t>(sizeof(float)));
      CHECK(comm.step == step);
      CHECK(comm.start_us >= block.start_us + block.duration_us);  // in program order
    }
    CHECK(report.counters[static_cast<size_t>(rank)].compute_seconds >= 0.004);
    CHECK(report.counters[static_cast<size_t>(rank)].flops == 3000.0);
  }
}

TEST_CASE("an untraced run records no events", "[sim][trace]") {
  const RunReport report = World(world_options(3)).run([](Communicator& comm) { comm.barrier(); });
  REQUIRE(report.ok());
  CHECK(report.trace.empty());
}

TEST_CASE("the Chrome trace JSON names ranks and lanes and carries the args", "[sim][trace]") {
  const RunReport report = traced_ring(3);
  REQUIRE(report.ok());
  const nlohmann::json document = nlohmann::json::parse(chrome_trace_json(report.trace, 3));
  REQUIRE(document.contains("traceEvents"));
  int process_names = 0, thread_names = 0, complete = 0;
  for (const auto& event : document["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "process_name") {
      CHECK(event["args"]["name"] == "rank " + std::to_string(event["pid"].get<int>()));
      ++process_names;
    }
    if (event["ph"] == "M" && event["name"] == "thread_name") {
      CHECK(event["args"]["name"] == (event["tid"] == 0 ? "compute" : "comm"));
      ++thread_names;
    }
    if (event["ph"] != "X") continue;
    ++complete;
    CHECK(event["ts"].is_number());
    CHECK(event["dur"].is_number());
    CHECK(event["tid"] == (event["cat"] == "compute" ? 0 : 1));
    if (event["name"] == "attention block") {
      CHECK(event["args"].contains("q_block"));
      CHECK(event["args"].contains("kv_block"));
      CHECK(event["args"].contains("mask"));
      CHECK(event["args"].contains("flops"));
      CHECK(event["args"]["step"].is_number_integer());
    }
    if (event["name"] == "sendrecv") {
      CHECK(event["args"]["peer"].is_number_integer());
      CHECK(event["args"]["bytes"] == 32);
    }
  }
  CHECK(process_names == 3);
  CHECK(thread_names == 6);
  CHECK(complete == static_cast<int>(report.trace.size()));
}

TEST_CASE("a trace written to a file reads back equal", "[sim][trace]") {
  const RunReport report = traced_ring(4);
  REQUIRE(report.ok());
  const std::string path = temporary_path("trace.json");
  write_chrome_trace(path, report.trace, 4);
  const std::vector<TraceEvent> loaded = read_chrome_trace(path);
  std::filesystem::remove(path);
  CHECK(loaded == report.trace);
  CHECK(parse_chrome_trace(chrome_trace_json(report.trace, 4), "memory") == report.trace);
}

TEST_CASE("malformed trace files are one-line usage errors naming the problem", "[sim][trace]") {
  const auto [text, problem] = GENERATE(table<std::string, std::string>({
      {"{\"traceEvents\": [", "not valid JSON"},
      {"{\"events\": []}", "no \"traceEvents\" array"},
      {"42", "neither"},
      {"[{\"ph\": \"X\", \"name\": \"send\", \"pid\": 0, \"tid\": 1, \"dur\": 3}]", "event 0 (\"send\"): no \"ts\""},
      {"[{\"ph\": \"X\", \"pid\": 0, \"tid\": 5, \"ts\": 1, \"dur\": 3}]",
       "\"tid\" 5 is neither 0 (compute) nor 1 (comm)"},
      {"[{\"ph\": \"X\", \"pid\": 0, \"tid\": 1, \"ts\": 1, \"dur\": -3}]", "\"dur\" is negative"},
      {"[{\"ph\": \"X\", \"pid\": 0, \"tid\": 1, \"ts\": \"1\", \"dur\": 3}]", "\"ts\" is not a number"},
      {"[{\"ph\": \"X\", \"pid\": 0, \"tid\": 1, \"ts\": 1, \"dur\": 3, \"args\": {\"step\": \"two\"}}]",
       "\"step\" is not a whole number"},
      {"[{\"ph\": \"X\", \"pid\": 0, \"tid\": 1, \"ts\": 1, \"dur\": 3, \"args\": []}]", "\"args\" is not an object"},
      {"[{\"name\": \"x\"}]", "event 0: no \"ph\""},
      {"[7]", "event 0 is not an object"},
      {"66e666", "not readable JSON"},  // found by fuzz_trace: a number too large for a double
  }));
  try {
    parse_chrome_trace(text, "t.json");
    FAIL("no error for " << text);
  } catch (const UsageError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::StartsWith("t.json") && Catch::Contains(problem) &&
                            Catch::Contains("pass a trace written by ringlab run --trace"));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("reading a missing trace file is a usage error", "[sim][trace]") {
  CHECK_THROWS_AS(read_chrome_trace(temporary_path("does-not-exist.json")), UsageError);
}

TEST_CASE("counters: time blocked is counted where a rank waits", "[sim][counters]") {
  // Rank 0 sends 100 ms after rank 1 is about to receive (told by a flag outside the communicator,
  // so rank 0 itself never waits in it): rank 1 blocks for about 100 ms, rank 0 for none. Half of
  // it is left for rank 1 being descheduled between raising the flag and receiving.
  std::atomic<bool> receiving{false};
  const RunReport report = World(world_options(2)).run([&](Communicator& comm) {
    if (comm.rank() == 0) {
      while (!receiving.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm.send(1, 0, exact_payload(0, 3));
    } else {
      receiving.store(true);
      comm.recv(0, 0);
    }
  });
  REQUIRE(report.ok());
  CHECK(report.counters[1].blocked_seconds >= 0.05);  // a lower bound the sleep implies
  CHECK(report.counters[0].blocked_seconds == 0);     // an eager send never waits
  CHECK(report.counters[0].messages_sent == 1);
  CHECK(report.counters[0].bytes_sent == 12);
  CHECK(report.counters[1].messages_received == 1);
  CHECK(report.counters[1].bytes_received == 12);
  std::ostringstream table;
  print_counters(table, report.counters);
  CHECK_THAT(
      table.str(),
      Catch::StartsWith(" rank  msgs sent    MB sent  msgs recv    MB recv  colls  blocked s  compute s      GFLOP\n"));
}
