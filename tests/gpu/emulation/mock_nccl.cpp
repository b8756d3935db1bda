// A stand-in for the NCCL library (the calls gpu-nccl makes), for running the gpu-nccl executor's
// rank threads on the CPU (test_executor_emulated.cpp, test_nccl_faults_emulated.cpp).
// Point-to-point messages go through per-(source, destination) FIFO mailboxes, copied at send
// time — the mock device is synchronous, so the data is ready when the call is made. Inside
// ncclGroupStart/End every send is posted before any receive waits, so a ring step's grouped send
// and receive cannot deadlock, as with NCCL. Collectives are built from the same mailboxes (every
// rank issues them in the same order, so FIFO order matches them up); ncclCommSplit exchanges
// (color, key) the same way.
//
// Nonblocking communicators (ncclConfig_t blocking = 0), as the executor makes them: a call whose
// receives cannot complete yet returns ncclInProgress and leaves them pending on the communicator;
// ncclCommGetAsyncError moves them on and says ncclInProgress until they are done — so a missing
// peer is a wait the executor's watchdog sees, never a blocked thread. A blocking communicator
// (ncclCommInitRank) waits inside the call.
//
// Faults for the error-path tests (ringlab_mock_nccl_set_fault):
//   "silent:R"     world rank R never posts a message (a peer that never sends)
//   "init-hang"    every communicator's initialisation stays in progress
//   "async-world"  the world communicators report ncclRemoteError once they have completed an op
//   "async-split"  the communicators made by ncclCommSplit report it once they have said they are
//                  ready (the next poll after the split completes)
//   "slow:MS"      every operation takes MS milliseconds to complete (slow, steady progress)
//   "unique-id"    ncclGetUniqueId fails (rank 0 fails before the id's broadcast)
// Communicators are never freed (kept until ringlab_mock_nccl_reset): a second abort, any use after
// an abort or destroy, or a destroy after an abort is counted as a violation and printed.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct ncclComm;

namespace {

struct World {
  int size = 0;
  std::mutex mutex;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mailboxes;  // (from, to) -> messages
};

// One operation's receives, completed in the order they were issued, then `finish`.
struct Job {
  struct Receive {
    int from;
    void* data;
    size_t bytes;
  };
  std::vector<Receive> receives;
  size_t next = 0;
  std::function<void()> finish;
  std::chrono::steady_clock::time_point ready_at;  // "slow": not before
};

enum class State { live, aborted, destroyed };

struct Fault {
  std::string mode;  // "" | "silent" | "init-hang" | "async-world" | "async-split" | "slow" | "unique-id"
  int value = 0;     // the silent rank, or the slow milliseconds
};

std::mutex g_registry_mutex;
std::map<std::string, std::shared_ptr<World>> g_worlds;  // by unique id (and split path)
std::vector<std::unique_ptr<ncclComm>> g_comms;          // every communicator ever made
std::vector<std::string> g_violations;
int g_aborts = 0;
int g_next_id = 0;
Fault g_fault;

thread_local int t_world_rank = -1;  // set by the world's init: one thread per rank

size_t element_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

struct PendingOp {
  bool send;
  const void* send_buffer;
  void* recv_buffer;
  size_t bytes;
  int peer;
  ncclComm* comm;
};

thread_local int t_group_depth = 0;
thread_local std::vector<PendingOp> t_group;

}  // namespace

struct ncclComm {
  std::shared_ptr<World> world;  // null until a split completes
  int rank = 0;
  int splits = 0;  // how many splits this comm has made (names the next one)
  std::string name;
  bool blocking = true;
  bool split = false;  // made by ncclCommSplit
  State state = State::live;
  int completed = 0;            // operations completed
  bool reported_ready = false;  // ncclCommGetAsyncError has said ncclSuccess
  std::deque<Job> pending;      // operations whose receives have not all arrived
  ncclComm* parent = nullptr;   // a split still in progress: its exchange is pending there
};

namespace {

void violation(const std::string& what) {
  std::lock_guard lock(g_registry_mutex);
  std::fprintf(stderr, "mock NCCL: %s\n", what.c_str());
  g_violations.push_back(what);
}

// False (and a violation) for a communicator that was aborted or destroyed.
bool usable(ncclComm* comm, const char* call) {
  if (comm == nullptr) {
    violation(std::string(call) + " on a null communicator");
    return false;
  }
  if (comm->state == State::live) return true;
  violation(std::string(call) + " on " + comm->name + " after it was " +
            (comm->state == State::aborted ? "aborted" : "destroyed"));
  return false;
}

ncclComm* make_comm(std::shared_ptr<World> world, int rank, std::string name, bool blocking) {
  std::lock_guard lock(g_registry_mutex);
  g_comms.push_back(std::make_unique<ncclComm>());
  ncclComm* comm = g_comms.back().get();
  comm->world = std::move(world);
  comm->rank = rank;
  comm->name = std::move(name);
  comm->blocking = blocking;
  return comm;
}

bool is_blocking(const ncclConfig_t* config) { return config == nullptr || config->blocking != 0; }

void post(ncclComm* comm, int to, const void* data, size_t bytes) {
  if (g_fault.mode == "silent" && t_world_rank == g_fault.value) return;
  World& w = *comm->world;
  std::lock_guard lock(w.mutex);
  const char* p = static_cast<const char*>(data);
  w.mailboxes[{comm->rank, to}].emplace_back(p, p + bytes);
}

// Takes the next message from `from` if it has arrived.
bool try_take(ncclComm* comm, const Job::Receive& r) {
  World& w = *comm->world;
  std::lock_guard lock(w.mutex);
  auto& box = w.mailboxes[{r.from, comm->rank}];
  if (box.empty()) return false;
  std::vector<char> message = std::move(box.front());
  box.pop_front();
  if (message.size() != r.bytes) std::abort();  // a size mismatch is a bug in the executor under test
  std::memcpy(r.data, message.data(), r.bytes);
  return true;
}

// Moves `comm`'s pending operations on; true when none is left.
bool advance(ncclComm* comm) {
  while (!comm->pending.empty()) {
    Job& job = comm->pending.front();
    if (std::chrono::steady_clock::now() < job.ready_at) return false;
    while (job.next < job.receives.size()) {
      if (!try_take(comm, job.receives[job.next])) return false;
      ++job.next;
    }
    if (job.finish) job.finish();
    comm->pending.pop_front();
    ++comm->completed;
  }
  return true;
}

// Queues a job on `comm`; a blocking communicator waits for it here, a nonblocking one says
// ncclInProgress while it is pending.
ncclResult_t submit(ncclComm* comm, Job job) {
  job.ready_at = std::chrono::steady_clock::now();
  if (g_fault.mode == "slow") job.ready_at += std::chrono::milliseconds(g_fault.value);
  comm->pending.push_back(std::move(job));
  if (comm->blocking) {
    while (!advance(comm)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return ncclSuccess;
  }
  return advance(comm) ? ncclSuccess : ncclInProgress;
}

ncclResult_t run_group(std::vector<PendingOp>& ops) {
  for (const PendingOp& op : ops)
    if (op.send) post(op.comm, op.peer, op.send_buffer, op.bytes);
  std::map<ncclComm*, Job> jobs;  // one per communicator, receives in issue order
  for (const PendingOp& op : ops) {
    Job& job = jobs[op.comm];
    if (!op.send) job.receives.push_back({op.peer, op.recv_buffer, op.bytes});
  }
  ops.clear();
  ncclResult_t result = ncclSuccess;
  for (auto& [comm, job] : jobs)
    if (submit(comm, std::move(job)) == ncclInProgress) result = ncclInProgress;
  return result;
}

ncclResult_t enqueue(PendingOp op) {
  if (!usable(op.comm, op.send ? "ncclSend" : "ncclRecv")) return ncclInvalidUsage;
  std::vector<PendingOp> single;
  std::vector<PendingOp>& into = t_group_depth > 0 ? t_group : single;
  into.push_back(op);
  return t_group_depth == 0 ? run_group(single) : ncclSuccess;
}

}  // namespace

// ---- test hooks ---------------------------------------------------------------------------------

// Selects a fault (see the top of this file); "" for none.
void ringlab_mock_nccl_set_fault(const std::string& fault) {
  std::lock_guard lock(g_registry_mutex);
  g_fault = {};
  const size_t colon = fault.find(':');
  g_fault.mode = fault.substr(0, colon);
  if (colon != std::string::npos) g_fault.value = std::atoi(fault.c_str() + colon + 1);
}

// Forgets every communicator, count and violation (and the fault).
void ringlab_mock_nccl_reset() {
  std::lock_guard lock(g_registry_mutex);
  g_comms.clear();
  g_worlds.clear();
  g_violations.clear();
  g_aborts = 0;
  g_fault = {};
}

int ringlab_mock_nccl_aborts() {
  std::lock_guard lock(g_registry_mutex);
  return g_aborts;
}

int ringlab_mock_nccl_live_comms() {  // neither aborted nor destroyed
  std::lock_guard lock(g_registry_mutex);
  return static_cast<int>(
      std::count_if(g_comms.begin(), g_comms.end(), [](const auto& c) { return c->state == State::live; }));
}

std::vector<std::string> ringlab_mock_nccl_violations() {
  std::lock_guard lock(g_registry_mutex);
  return g_violations;
}

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  return result == ncclRemoteError ? "remote process exited or there was a network error (mock NCCL)"
                                   : "error in the mock NCCL";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::lock_guard lock(g_registry_mutex);
  if (g_fault.mode == "unique-id") return ncclSystemError;
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "mock-%d", g_next_id++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  std::shared_ptr<World> world;
  {
    std::lock_guard lock(g_registry_mutex);
    std::shared_ptr<World>& named = g_worlds[id.internal];
    if (!named) {
      named = std::make_shared<World>();
      named->size = nranks;
    }
    world = named;
  }
  t_world_rank = rank;
  *comm = make_comm(world, rank, id.internal, is_blocking(config));
  if (g_fault.mode == "init-hang") return is_blocking(config) ? ncclSystemError : ncclInProgress;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!usable(comm, "ncclCommFinalize")) return ncclInvalidUsage;
  return advance(comm) ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!usable(comm, "ncclCommDestroy")) return ncclInvalidUsage;
  comm->state = State::destroyed;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm != nullptr && comm->state == State::aborted) {
    violation("a second ncclCommAbort on " + comm->name);
    return ncclInvalidUsage;
  }
  if (!usable(comm, "ncclCommAbort")) return ncclInvalidUsage;
  comm->state = State::aborted;
  std::lock_guard lock(g_registry_mutex);
  ++g_aborts;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (!usable(comm, "ncclCommGetAsyncError")) return ncclInvalidUsage;
  if (g_fault.mode == "init-hang") {
    *error = ncclInProgress;
    return ncclSuccess;
  }
  if (comm->parent && !advance(comm->parent)) {  // a split still exchanging (color, key)
    *error = ncclInProgress;
    return ncclSuccess;
  }
  // The world fails once it has completed an op (mid-run); a split once it has said it is ready
  // (the ring family's exchanges may all go through the world).
  const bool faulty = (g_fault.mode == "async-world" && !comm->split && comm->completed > 0) ||
                      (g_fault.mode == "async-split" && comm->split && comm->reported_ready);
  if (faulty) {
    *error = ncclRemoteError;
    return ncclSuccess;
  }
  *error = advance(comm) ? ncclSuccess : ncclInProgress;
  comm->reported_ready = *error == ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (!usable(comm, "ncclCommSplit")) return ncclInvalidUsage;
  const int size = comm->world->size;
  const int mine[2] = {color, key};
  for (int r = 0; r < size; ++r) post(comm, r, mine, sizeof mine);
  const std::string name = comm->name + "/split" + std::to_string(comm->splits++) + "/color" + std::to_string(color);
  ncclComm* child = make_comm(nullptr, 0, name, is_blocking(config));
  child->split = true;
  child->parent = comm;
  *newcomm = child;
  auto theirs = std::make_shared<std::vector<int>>(2 * size);
  Job job;
  for (int r = 0; r < size; ++r) job.receives.push_back({r, theirs->data() + 2 * r, 2 * sizeof(int)});
  job.finish = [theirs, child, color, size, me = comm->rank] {
    std::vector<std::pair<int, int>> members;  // (key, rank) of my color
    for (int r = 0; r < size; ++r)
      if ((*theirs)[2 * r] == color) members.push_back({(*theirs)[2 * r + 1], r});
    std::sort(members.begin(), members.end());
    for (size_t i = 0; i < members.size(); ++i)
      if (members[i].second == me) child->rank = static_cast<int>(i);
    std::lock_guard lock(g_registry_mutex);
    std::shared_ptr<World>& world = g_worlds[child->name];
    if (!world) {
      world = std::make_shared<World>();
      world->size = static_cast<int>(members.size());
    }
    child->world = world;
    child->parent = nullptr;
  };
  return submit(comm, std::move(job));
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (--t_group_depth == 0) return run_group(t_group);
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  return enqueue({true, buffer, nullptr, count * element_bytes(type), peer, comm});
}

ncclResult_t ncclRecv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  return enqueue({false, nullptr, buffer, count * element_bytes(type), peer, comm});
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
  if (!usable(comm, "ncclAllGather")) return ncclInvalidUsage;
  const size_t bytes = count * element_bytes(type);
  for (int r = 0; r < comm->world->size; ++r) post(comm, r, send, bytes);
  Job job;
  for (int r = 0; r < comm->world->size; ++r) job.receives.push_back({r, static_cast<char*>(recv) + r * bytes, bytes});
  return submit(comm, std::move(job));
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                               ncclComm_t comm, cudaStream_t) {
  if (!usable(comm, "ncclReduceScatter")) return ncclInvalidUsage;
  if (type != ncclFloat32) std::abort();  // the executor reduces fp32 only
  const int size = comm->world->size;
  for (int r = 0; r < size; ++r) post(comm, r, static_cast<const float*>(send) + r * count, count * 4);
  auto parts = std::make_shared<std::vector<float>>(count * static_cast<size_t>(size));
  Job job;
  for (int r = 0; r < size; ++r) job.receives.push_back({r, parts->data() + r * count, count * 4});
  job.finish = [parts, out = static_cast<float*>(recv), count, size] {
    for (int r = 0; r < size; ++r)  // summed in rank order
      for (size_t i = 0; i < count; ++i) out[i] = r == 0 ? (*parts)[i] : out[i] + (*parts)[r * count + i];
  };
  return submit(comm, std::move(job));
}

}  // extern "C"
