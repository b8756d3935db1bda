// A stand-in for the NCCL library (the calls gpu-nccl makes), for running the gpu-nccl executor's
// rank threads on the CPU (test_executor_emulated.cpp). Point-to-point messages go through
// per-(source, destination) FIFO mailboxes, copied at send time — the mock device is synchronous,
// so the data is ready when the call is made. Inside ncclGroupStart/End every send is posted
// before any receive waits, so a ring step's grouped send and receive cannot deadlock, as with
// NCCL. Collectives are built from the same mailboxes (every rank issues them in the same order,
// so FIFO order matches them up); ncclCommSplit exchanges (color, key) the same way.
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct ncclComm;

namespace {

struct World {
  int size = 0;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mailboxes;  // (from, to) -> messages
};

std::mutex g_registry_mutex;
std::map<std::string, std::shared_ptr<World>> g_worlds;  // by unique id (and split path)
int g_next_id = 0;

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
  std::shared_ptr<World> world;
  int rank = 0;
  int splits = 0;  // how many splits this comm has made (names the next one)
  std::string name;
};

namespace {

void post(ncclComm* comm, int to, const void* data, size_t bytes) {
  World& w = *comm->world;
  std::lock_guard lock(w.mutex);
  const char* p = static_cast<const char*>(data);
  w.mailboxes[{comm->rank, to}].emplace_back(p, p + bytes);
  w.changed.notify_all();
}

void take(ncclComm* comm, int from, void* data, size_t bytes) {
  World& w = *comm->world;
  std::unique_lock lock(w.mutex);
  auto& box = w.mailboxes[{from, comm->rank}];
  w.changed.wait(lock, [&] { return !box.empty(); });
  std::vector<char> message = std::move(box.front());
  box.pop_front();
  if (message.size() != bytes) std::abort();  // a size mismatch is a bug in the executor under test
  std::memcpy(data, message.data(), bytes);
}

void run_ops(std::vector<PendingOp>& ops) {
  for (const PendingOp& op : ops)
    if (op.send) post(op.comm, op.peer, op.send_buffer, op.bytes);
  for (const PendingOp& op : ops)
    if (!op.send) take(op.comm, op.peer, op.recv_buffer, op.bytes);
  ops.clear();
}

void enqueue(PendingOp op) {
  std::vector<PendingOp> single;
  std::vector<PendingOp>& into = t_group_depth > 0 ? t_group : single;
  into.push_back(op);
  if (t_group_depth == 0) run_ops(single);
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t) { return "error in the mock NCCL"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::lock_guard lock(g_registry_mutex);
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "mock-%d", g_next_id++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  std::lock_guard lock(g_registry_mutex);
  std::shared_ptr<World>& world = g_worlds[id.internal];
  if (!world) {
    world = std::make_shared<World>();
    world->size = nranks;
  }
  *comm = new ncclComm{world, rank, 0, id.internal};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* error) {
  *error = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  const int size = comm->world->size;
  const int mine[2] = {color, key};
  for (int r = 0; r < size; ++r) post(comm, r, mine, sizeof mine);
  std::vector<std::pair<int, int>> members;  // (key, rank) of my color
  for (int r = 0; r < size; ++r) {
    int theirs[2];
    take(comm, r, theirs, sizeof theirs);
    if (theirs[0] == color) members.push_back({theirs[1], r});
  }
  std::sort(members.begin(), members.end());
  int index = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].second == comm->rank) index = static_cast<int>(i);
  const std::string name = comm->name + "/split" + std::to_string(comm->splits++) + "/color" + std::to_string(color);
  std::lock_guard lock(g_registry_mutex);
  std::shared_ptr<World>& world = g_worlds[name];
  if (!world) {
    world = std::make_shared<World>();
    world->size = static_cast<int>(members.size());
  }
  *newcomm = new ncclComm{world, index, 0, name};
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (--t_group_depth == 0) run_ops(t_group);
  return ncclSuccess;
}

ncclResult_t ncclSend(const void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  enqueue({true, buffer, nullptr, count * element_bytes(type), peer, comm});
  return ncclSuccess;
}

ncclResult_t ncclRecv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t) {
  enqueue({false, nullptr, buffer, count * element_bytes(type), peer, comm});
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
  const size_t bytes = count * element_bytes(type);
  for (int r = 0; r < comm->world->size; ++r) post(comm, r, send, bytes);
  for (int r = 0; r < comm->world->size; ++r) take(comm, r, static_cast<char*>(recv) + r * bytes, bytes);
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                               ncclComm_t comm, cudaStream_t) {
  if (type != ncclFloat32) std::abort();  // the executor reduces fp32 only
  const int size = comm->world->size;
  for (int r = 0; r < size; ++r) post(comm, r, static_cast<const float*>(send) + r * count, count * 4);
  std::vector<float> part(count);
  float* out = static_cast<float*>(recv);
  for (int r = 0; r < size; ++r) {  // summed in rank order
    take(comm, r, part.data(), count * 4);
    for (size_t i = 0; i < count; ++i) out[i] = r == 0 ? part[i] : out[i] + part[i];
  }
  return ncclSuccess;
}

}  // extern "C"
