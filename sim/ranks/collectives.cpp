// Collectives and sub-communicators, built on internal messages so that they go through the same
// queues, counters, fault injection and watchdog as point-to-point traffic. Each collective call
// takes the next index on its communicator; its messages travel on channels of their own (never
// matching a user receive) and carry the collective's kind, so two ranks in different collectives
// are a clear "collective mismatch" rather than a silent mix-up. Results combine in rank order.
#include <algorithm>
#include <numeric>

#include "reference/error.hpp"
#include "sim/ranks/communicator.hpp"
#include "sim/ranks/rank_ops.hpp"

namespace ringlab {

using detail::Clock;
using detail::CollectiveKind;

namespace {

// split's (color, key) as four floats holding 16-bit halves: exact whatever the values.
void encode_int(int value, float* out) {
  const auto bits = static_cast<uint32_t>(value);
  out[0] = static_cast<float>(bits >> 16);
  out[1] = static_cast<float>(bits & 0xFFFFu);
}

int decode_int(const float* in) {
  const uint32_t bits = (static_cast<uint32_t>(in[0]) << 16) | static_cast<uint32_t>(in[1]);
  return static_cast<int>(bits);
}

}  // namespace

int Communicator::enter_collective() {
  world_->check_alive();
  ++world_->local(world_rank_).counters.collectives;
  return world_->enter_collective(context_, rank_);
}

void Communicator::send_chunk(int member, int index, CollectiveKind kind, std::span<const float> chunk) {
  const detail::MessageRoute route{context_, members_[static_cast<size_t>(member)], -1, kind, index, false};
  detail::send_message(*world_, world_rank_, route, chunk);
}

Buffer Communicator::receive_chunk(int member, int index, CollectiveKind kind, size_t expected_floats) {
  const int peer = members_[static_cast<size_t>(member)];
  detail::Message message = world_->receive(world_rank_, detail::Wait{detail::WaitKind::message,
                                                                      detail::collective_name(kind),
                                                                      {context_, peer, index, true},
                                                                      0,
                                                                      0,
                                                                      peer,
                                                                      -1,
                                                                      index});
  detail::accept_message(*world_, world_rank_, message);
  const std::string where = " #" + std::to_string(index) + " of " + name_;
  if (message.collective != kind) {
    throw CommFaultError({"collective mismatch", world_rank_, peer, -1, message.step, message.sequence,
                          "rank " + std::to_string(world_rank_) + " called " + detail::collective_name(kind) +
                              " as collective" + where + " but rank " + std::to_string(peer) + " called " +
                              detail::collective_name(message.collective) +
                              "; every member must call the same collectives in the same order"});
  }
  if (message.payload.size() != expected_floats) {
    throw CommFaultError({"size mismatch", world_rank_, peer, -1, message.step, message.sequence,
                          std::string(detail::collective_name(kind)) + where + ": rank " + std::to_string(world_rank_) +
                              " expects " + std::to_string(expected_floats) + " floats from each rank but rank " +
                              std::to_string(peer) + " sent " + std::to_string(message.payload.size()) +
                              "; every rank must pass the same size"});
  }
  return std::move(message.payload);
}

namespace {

// The size of one of P equal chunks of `input`; UsageError when it does not split.
size_t chunk_floats(std::span<const float> input, int ranks, int world_rank, const char* call) {
  const auto parts = static_cast<size_t>(ranks);
  if (input.size() % parts != 0) {
    throw UsageError("rank " + std::to_string(world_rank) + ": " + call + " input of " + std::to_string(input.size()) +
                     " floats does not split into " + std::to_string(ranks) + " equal chunks; pass a multiple of " +
                     std::to_string(ranks));
  }
  return input.size() / parts;
}

Buffer output_buffer(BufferPool& pool, size_t floats) {
  Buffer output;
  if (!pool.take(floats, output)) output.resize(floats);
  return output;
}

}  // namespace

void Communicator::barrier() {
  const Clock::time_point start = Clock::now();
  const int index = enter_collective();
  for (int offset = 1; offset < size(); ++offset)
    send_chunk((rank_ + offset) % size(), index, CollectiveKind::barrier, {});
  for (int member = 0; member < size(); ++member) {
    if (member != rank_) receive_chunk(member, index, CollectiveKind::barrier, 0);
  }
  detail::trace_comm(*world_, world_rank_, "barrier", start, -1, -1, 0, trace_group_);
}

Buffer Communicator::all_gather(std::span<const float> input) {
  return replicate(CollectiveKind::all_gather, "all_gather", input, false);
}

Buffer Communicator::replicate(CollectiveKind kind, const char* name, std::span<const float> input, bool sum) {
  const Clock::time_point start = Clock::now();
  const int index = enter_collective();
  for (int offset = 1; offset < size(); ++offset) send_chunk((rank_ + offset) % size(), index, kind, input);
  Buffer output = sum ? sum_in_rank_order(index, kind, input) : gather_in_rank_order(index, kind, input);
  detail::trace_comm(*world_, world_rank_, name, start, -1, -1, static_cast<int64_t>(input.size_bytes()) * (size() - 1),
                     trace_group_);
  return output;
}

Buffer Communicator::all_to_all(std::span<const float> input) {
  const Clock::time_point start = Clock::now();
  const size_t c = chunk_floats(input, size(), world_rank_, "all_to_all");
  const int index = enter_collective();
  auto chunk_of = [&](std::span<const float> data, int member) {
    return data.subspan(c * static_cast<size_t>(member), c);
  };
  for (int offset = 1; offset < size(); ++offset) {
    const int member = (rank_ + offset) % size();
    send_chunk(member, index, CollectiveKind::all_to_all, chunk_of(input, member));
  }
  Buffer output = gather_in_rank_order(index, CollectiveKind::all_to_all, chunk_of(input, rank_));
  detail::trace_comm(*world_, world_rank_, "all_to_all", start, -1, -1,
                     static_cast<int64_t>(c * sizeof(float)) * (size() - 1), trace_group_);
  return output;
}

Buffer Communicator::gather_in_rank_order(int index, CollectiveKind kind, std::span<const float> own) {
  const size_t n = own.size();
  Buffer output = output_buffer(world_->pool(), n * members_.size());
  std::copy(own.begin(), own.end(), output.begin() + static_cast<ptrdiff_t>(n * static_cast<size_t>(rank_)));
  for (int member = 0; member < size(); ++member) {
    if (member == rank_) continue;
    Buffer chunk = receive_chunk(member, index, kind, n);
    std::copy(chunk.begin(), chunk.end(), output.begin() + static_cast<ptrdiff_t>(n * static_cast<size_t>(member)));
    world_->pool().give_back(std::move(chunk));
  }
  return output;
}

Buffer Communicator::sum_in_rank_order(int index, CollectiveKind kind, std::span<const float> own) {
  const size_t n = own.size();
  Buffer output(n);
  for (int member = 0; member < size(); ++member) {
    Buffer received;
    std::span<const float> contribution = own;
    if (member != rank_) {
      received = receive_chunk(member, index, kind, n);
      contribution = received;
    }
    if (member == 0) {
      std::copy(contribution.begin(), contribution.end(), output.begin());
    } else {
      for (size_t i = 0; i < n; ++i) output[i] += contribution[i];
    }
    world_->pool().give_back(std::move(received));
  }
  return output;
}

Buffer Communicator::reduce_scatter(std::span<const float> input) {
  const Clock::time_point start = Clock::now();
  const size_t c = chunk_floats(input, size(), world_rank_, "reduce_scatter");
  const int index = enter_collective();
  for (int offset = 1; offset < size(); ++offset) {
    const int member = (rank_ + offset) % size();
    send_chunk(member, index, CollectiveKind::reduce_scatter, input.subspan(c * static_cast<size_t>(member), c));
  }
  Buffer output =
      sum_in_rank_order(index, CollectiveKind::reduce_scatter, input.subspan(c * static_cast<size_t>(rank_), c));
  detail::trace_comm(*world_, world_rank_, "reduce_scatter", start, -1, -1,
                     static_cast<int64_t>(c * sizeof(float)) * (size() - 1), trace_group_);
  return output;
}

Buffer Communicator::all_reduce(std::span<const float> input) {
  return replicate(CollectiveKind::all_reduce, "all_reduce", input, true);
}

Communicator Communicator::split(int color, int key) {
  const Clock::time_point start = Clock::now();
  if (color < 0) {
    throw UsageError("rank " + std::to_string(world_rank_) + ": split with color " + std::to_string(color) +
                     "; colors must be >= 0");
  }
  const int index = enter_collective();
  float mine[4];
  encode_int(color, mine);
  encode_int(key, mine + 2);
  for (int offset = 1; offset < size(); ++offset)
    send_chunk((rank_ + offset) % size(), index, CollectiveKind::split, mine);
  std::vector<int> colors(members_.size()), keys(members_.size());
  for (int member = 0; member < size(); ++member) {
    const Buffer theirs =
        member == rank_ ? Buffer(mine, mine + 4) : receive_chunk(member, index, CollectiveKind::split, 4);
    colors[static_cast<size_t>(member)] = decode_int(theirs.data());
    keys[static_cast<size_t>(member)] = decode_int(theirs.data() + 2);
  }
  std::vector<int> order;  // ranks here with my color, by (key, rank)
  for (int member = 0; member < size(); ++member) {
    if (colors[static_cast<size_t>(member)] == color) order.push_back(member);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)]; });
  std::vector<int> group_members;
  group_members.reserve(order.size());
  for (int member : order) group_members.push_back(members_[static_cast<size_t>(member)]);
  const uint64_t context = world_->context_for(
      "split of " + std::to_string(context_) + " #" + std::to_string(index) + " color " + std::to_string(color),
      group_members);
  detail::trace_comm(*world_, world_rank_, "split", start, -1, -1, 4 * sizeof(float) * static_cast<size_t>(size() - 1),
                     trace_group_);
  return Communicator(*world_, world_rank_, context, std::move(group_members));
}

Communicator Communicator::group(const std::vector<int>& world_ranks) {
  const std::string who = "rank " + std::to_string(world_rank_) + ": group";
  if (world_ranks.empty()) throw UsageError(who + " of no ranks; list the world ranks of the group");
  std::string list;
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    const int member = world_ranks[i];
    if (std::find(members_.begin(), members_.end(), member) == members_.end()) {
      throw UsageError(who + " lists world rank " + std::to_string(member) + ", which is not in " + name_ +
                       "; list only members of the communicator it is made from");
    }
    if (std::find(world_ranks.begin(), world_ranks.begin() + static_cast<ptrdiff_t>(i), member) !=
        world_ranks.begin() + static_cast<ptrdiff_t>(i)) {
      throw UsageError(who + " lists world rank " + std::to_string(member) + " twice; list each rank once");
    }
    list += (i ? "," : "") + std::to_string(member);
  }
  if (std::find(world_ranks.begin(), world_ranks.end(), world_rank_) == world_ranks.end()) {
    throw UsageError(who + " {" + list + "} does not include the calling rank; only the listed ranks call group()");
  }
  // The n-th group() with this list from this communicator pairs with the other members' n-th.
  const std::string key = "group of " + std::to_string(context_) + " {" + list + "}";
  const int occurrence = world_->local(world_rank_).groups_made[key]++;
  const uint64_t context = world_->context_for(key + " #" + std::to_string(occurrence), world_ranks);
  return Communicator(*world_, world_rank_, context, world_ranks);
}

}  // namespace ringlab
