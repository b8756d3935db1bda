// bench_queues — the simulator's message queues against their ceiling, in one run.
//
//   message rate    4-byte messages between pairs of ranks (0->1, 2->3, ...), each sender keeping
//                   a window of 64 messages in flight, at P = 2, 8, 64: messages per second
//   copy bandwidth  rank 0 -> rank 1 (P = 2), 1 / 4 / 16 / 64 MiB payloads, two messages in
//                   flight; the receiver hands each buffer back with Communicator::recycle (the
//                   "fresh" column does not: every send then pays for new pages)
//   ceiling         memcpy of the same size between two warm buffers, measured in this run
// A send copies the payload once (with its checksum in the same pass); the receive moves it out
// and verifies the checksum. Target (issue 3): queue >= 50% of memcpy at 16 MiB.
// Usage: bench_queues [--quick]   (--quick: tiny counts, for the smoke test of the table format)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/report_row.hpp"
#include "sim/ranks/world.hpp"

using namespace ringlab;
using Clock = std::chrono::steady_clock;

namespace {

WorldOptions ranks_only(int ranks) {
  WorldOptions options;
  options.ranks = ranks;
  return options;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Best GB/s of `repeat` rounds of `copies` memcpy calls of `bytes` between warm buffers.
double memcpy_gbps(size_t bytes, int copies, int repeat) {
  std::vector<char> from(bytes, 1), to(bytes, 2);
  double best = 0;
  for (int round = 0; round < repeat; ++round) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < copies; ++i) {
      from[static_cast<size_t>(i) % bytes] = static_cast<char>(i);  // keep each copy observable
      std::memcpy(to.data(), from.data(), bytes);
    }
    best = std::max(best, static_cast<double>(bytes) * copies / seconds_since(start) / 1e9);
  }
  if (to[bytes / 2] == 42) std::puts("");  // the copies are used
  return best;
}

// Streams `messages` payloads of `floats` from rank 0 to rank 1 with two in flight; returns the
// receiver's GB/s from its first timed receive to its last.
double queue_gbps(size_t floats, int messages, bool recycle) {
  constexpr int kWindow = 2;
  constexpr int kWarmup = 4;
  double seconds = 0;
  const RunReport report = World(ranks_only(2)).run([&](Communicator& comm) {
    const int total = kWarmup + messages;
    if (comm.rank() == 0) {
      const Buffer source(floats, 1.5f);
      for (int i = 0; i < total; ++i) {
        if (i >= kWindow) comm.recv(1, 1);  // credit for message i - kWindow
        comm.send(1, 0, source);
      }
      for (int i = 0; i < kWindow; ++i) comm.recv(1, 1);
      return;
    }
    const float credit = 0;
    Clock::time_point start;
    for (int i = 0; i < total; ++i) {
      if (i == kWarmup) start = Clock::now();
      Buffer payload = comm.recv(0, 0);
      comm.send(0, 1, {&credit, 1});
      if (recycle) comm.recycle(std::move(payload));
    }
    seconds = seconds_since(start);
  });
  report.throw_if_failed();
  return static_cast<double>(floats * sizeof(float)) * messages / seconds / 1e9;
}

// Pairs (2i, 2i+1) stream `per_pair` 4-byte messages; returns messages per second over all pairs.
double message_rate(int ranks, int per_pair) {
  constexpr int kWindow = 64;
  std::vector<double> seconds(static_cast<size_t>(ranks), 0);
  const RunReport report = World(ranks_only(ranks)).run([&](Communicator& comm) {
    const bool sender = comm.rank() % 2 == 0;
    const int peer = sender ? comm.rank() + 1 : comm.rank() - 1;
    const float value = static_cast<float>(comm.rank());
    comm.barrier();
    const Clock::time_point start = Clock::now();
    for (int sent = 0; sent < per_pair; sent += kWindow) {
      const int batch = std::min(kWindow, per_pair - sent);
      if (sender) {
        for (int i = 0; i < batch; ++i) comm.send(peer, 0, {&value, 1});
        comm.recv(peer, 1);
      } else {
        for (int i = 0; i < batch; ++i) comm.recv(peer, 0);
        comm.send(peer, 1, {&value, 1});
      }
    }
    seconds[static_cast<size_t>(comm.rank())] = seconds_since(start);
  });
  report.throw_if_failed();
  const double slowest = *std::max_element(seconds.begin(), seconds.end());
  return static_cast<double>(ranks / 2) * per_pair / slowest;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::quick_flag(argc, argv, "bench_queues");
  const int repeat = quick ? 1 : 5;

  std::printf("bench_queues: the simulator's message queues (sim/ranks/world.hpp); best of %d\n\n", repeat);
  std::printf("message rate: 4-byte messages, pairs of ranks, window 64\n");
  std::printf("%6s %8s %12s %12s\n", "P", "pairs", "messages", "msgs/s");
  std::vector<double> rates;
  for (const int ranks : {2, 8, 64}) {
    const int per_pair = quick ? 256 : std::max(2048, 200000 / (ranks / 2));
    double best = 0;
    for (int round = 0; round < repeat; ++round) best = std::max(best, message_rate(ranks, per_pair));
    std::printf("%6d %8d %12d %12.0f\n", ranks, ranks / 2, per_pair * (ranks / 2), best);
    rates.push_back(best);
  }

  std::printf("\ncopy bandwidth: rank 0 -> rank 1 (P = 2), window 2; ceiling = memcpy, same size, this run\n");
  std::printf("%9s %9s %12s %12s %8s %12s\n", "size MiB", "messages", "memcpy GB/s", "queue GB/s", "ratio",
              "fresh GB/s");
  double ratio_16 = 0, ceiling_16 = 0, queue_16 = 0;
  for (const size_t mebibytes : {size_t{1}, size_t{4}, size_t{16}, size_t{64}}) {
    const size_t bytes = mebibytes << 20;
    const int messages = quick ? 2 : static_cast<int>(std::max<size_t>(8, (size_t{768} << 20) / bytes));
    double ceiling = 0, queue = 0, fresh = 0;
    for (int round = 0; round < repeat; ++round) {  // interleaved, so drifts hit all three alike
      ceiling = std::max(ceiling, memcpy_gbps(bytes, messages, 1));
      queue = std::max(queue, queue_gbps(bytes / sizeof(float), messages, true));
      fresh = std::max(fresh, queue_gbps(bytes / sizeof(float), std::max(2, messages / 4), false));
    }
    const double ratio = queue / ceiling;
    if (mebibytes == 16) ratio_16 = ratio, ceiling_16 = ceiling, queue_16 = queue;
    std::printf("%9zu %9d %12.2f %12.2f %8.2f %12.2f\n", mebibytes, messages, ceiling, queue, ratio, fresh);
  }
  std::printf("\ntarget: queue >= 50%% of memcpy at 16 MiB: %s (%.0f%%)\n", ratio_16 >= 0.5 ? "PASS" : "MISS",
              100 * ratio_16);
  bench::report_row("simulator", "message queue bandwidth / memcpy bandwidth, 16 MiB payloads",
                    bench::format("%.2f (%.1f / %.1f GB/s)", ratio_16, queue_16, ceiling_16), ">= 0.50",
                    bench::verdict(ratio_16 >= 0.5));
  bench::report_row("simulator", "4-byte messages per second at P = 2 / 8 / 64",
                    bench::format("%.2fM / %.2fM / %.2fM", rates[0] / 1e6, rates[1] / 1e6, rates[2] / 1e6), "-", "-");
  return 0;
}
