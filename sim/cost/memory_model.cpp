#include "sim/cost/memory_model.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "reference/names.hpp"
#include "sim/plan/queries.hpp"

namespace ringlab {

const char* memory_category_name(MemoryCategory category) {
  constexpr const char* kNames[] = {"inputs",       "working",   "kv slots", "gathered kv",
                                    "accumulators", "dkv slots", "staging",  "outputs"};
  return name_of(kNames, category);
}

int64_t PhaseMemory::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

namespace {

constexpr int64_t kFp32 = 4;
constexpr size_t kSlots = static_cast<size_t>(Slot::count);

// [first, last] phase of something's life; empty until touched.
struct Span {
  std::optional<int> first, last;
  void touch(int phase) {
    if (!first || phase < *first) first = phase;
    if (!last || phase > *last) last = phase;
  }
  bool covers(int phase) const { return first && *first <= phase && phase <= *last; }
};

// Bytes of one slot of a rank (the table at the top of memory_model.hpp).
int64_t slot_bytes(const Plan& plan, Slot slot) {
  const int64_t kv = payload_bytes(plan, Payload::kv), dkv = payload_bytes(plan, Payload::dkv);
  switch (slot) {
    case Slot::kv0:
    case Slot::kv1: return kv;
    case Slot::dkv0:
    case Slot::dkv1:
    case Slot::dkv_local:
    case Slot::dkv_home: return dkv;
    case Slot::gathered_kv: return plan.ring() * kv;
    case Slot::gathered_dkv: return plan.ring() * dkv;
    case Slot::count: break;
  }
  return 0;
}

// Bytes of a rank's shard of a Ulysses all-to-all (its t = S/P tokens, all heads).
int64_t shard_bytes(const Plan& plan, Collective collective) {
  const AttentionDims& d = plan.spec().dims;
  const int64_t e = plan.spec().element_bytes, t = d.seq / plan.ranks();
  const int64_t B = d.batch, D = d.dim, H = d.heads, HKV = d.kv_heads;
  switch (collective) {
    case Collective::all_to_all_qkv: return t * (H + 2 * HKV) * D * B * e;
    case Collective::all_to_all_out: return t * H * (D * e + kFp32) * B;
    case Collective::all_to_all_dout: return t * H * D * B * e;
    case Collective::all_to_all_grads: return t * (H + 2 * HKV) * D * B * kFp32;
    default: return 0;
  }
}

// When each buffer is live, read from the plan's templates (op kinds, no algorithm).
class Liveness {
  const Plan& plan_;

 public:
  std::array<std::array<Span, kSlots>, 2> slots{};  // [pass][slot]
  Span forward_acc, backward_acc, backward_any;
  // The first phase of each: out and lse exist from the finalize, the working q, k, v from the
  // all-to-all that brings them, ...
  std::optional<int> finalize, qkv_in, dout_in, out_back, grads_back, stored;
  std::vector<int64_t> staging;  // [phase]: all-to-all send and receive buffers

  explicit Liveness(const Plan& plan) : plan_(plan), staging(plan.phases().size(), 0) {
    const int phases = static_cast<int>(plan.phases().size());
    for (int p = 0; p < phases; ++p) {
      const Phase& phase = plan.phases()[static_cast<size_t>(p)];
      if (phase.pass == Pass::backward) backward_any.touch(p);
      for (const TemplateEntry& entry : phase.body) {
        // The steps the entry is present at: a slot pair names both slots only if it runs on
        // two consecutive steps (a ring of one uses just the first).
        const int64_t first = entry.when.first, last = phase.steps - 1 - entry.when.skip_last;
        if (last < first) continue;
        std::visit(
            [&](const auto& op) {
              read(op, {p, phase.pass == Pass::forward ? size_t{0} : size_t{1}, first, last});
            },
            entry.op);
      }
    }
    // The backward accumulators (dq, delta) live from their preparation to the end.
    if (backward_acc.first) backward_acc.last = phases - 1;
  }

 private:
  struct Where {
    int phase;
    size_t pass;
    int64_t first, last;  // the steps the template is present at
  };

  void use(const Where& at, const SlotPair& pair) {
    slots[at.pass][static_cast<size_t>(pair.at(at.first))].touch(at.phase);
    if (at.last > at.first) slots[at.pass][static_cast<size_t>(pair.at(at.first + 1))].touch(at.phase);
  }
  void touch(const Where& at, Slot slot) { slots[at.pass][static_cast<size_t>(slot)].touch(at.phase); }

  void read(const LoadKvT& op, const Where& at) { use(at, op.slot); }
  void read(const ExchangeT& op, const Where& at) {
    if (op.sends) use(at, op.send_slot);
    if (op.receives) use(at, op.recv_slot);
  }
  void read(const WaitT&, const Where&) {}
  void read(const ComputeT& op, const Where& at) {
    use(at, op.kv_slot);
    if (op.pass == Pass::backward) {
      use(at, op.grad_slot);
      backward_acc.touch(at.phase);
    } else {
      forward_acc.touch(at.phase);
    }
  }
  void read(const AccumulateT& op, const Where& at) { use(at, op.from), use(at, op.to); }
  void read(const StoreGradsT& op, const Where& at) {
    use(at, op.slot);
    if (!stored) stored = at.phase;
  }
  void read(const PrepareBackwardT&, const Where& at) {
    backward_acc.touch(at.phase);
    slots[1][static_cast<size_t>(Slot::dkv0)].touch(at.phase);
  }
  void read(const FinalizeT&, const Where& at) {
    forward_acc.touch(at.phase);
    if (!finalize) finalize = at.phase;
  }
  void read(const CollectiveT& op, const Where& at) {
    switch (op.collective) {
      case Collective::all_gather_kv: touch(at, Slot::gathered_kv); break;
      case Collective::reduce_scatter_dkv: touch(at, Slot::gathered_dkv), touch(at, Slot::dkv0); break;
      case Collective::all_to_all_qkv: qkv_in = qkv_in.value_or(at.phase); break;
      case Collective::all_to_all_out: out_back = out_back.value_or(at.phase); break;
      case Collective::all_to_all_dout: dout_in = dout_in.value_or(at.phase); break;
      case Collective::all_to_all_grads: grads_back = grads_back.value_or(at.phase); break;
    }
    if (is_ulysses_collective(op.collective) && plan_.ulysses() > 1) {
      staging[static_cast<size_t>(at.phase)] += 2 * shard_bytes(plan_, op.collective);
    }
  }

 public:
  // What is allocated while phase p runs.
  PhaseMemory memory_at(int p) const;
};

PhaseMemory Liveness::memory_at(int p) const {
  const PlanSpec& spec = plan_.spec();
  const AttentionDims& d = spec.dims;
  const int64_t e = spec.element_bytes, B = d.batch, D = d.dim, H = d.heads, HKV = d.kv_heads;
  const int64_t t = d.seq / spec.ranks, n = plan_.block_tokens();
  const int64_t h = plan_.heads_per_rank(), hk = plan_.kv_heads_per_rank();
  const bool separate_working = plan_.ulysses() > 1;
  PhaseMemory m;
  m.phase = plan_.phases()[static_cast<size_t>(p)].name;
  auto add = [&](MemoryCategory c, int64_t bytes) { m.bytes[static_cast<size_t>(c)] += bytes; };
  auto from = [&](const std::optional<int>& start) { return start && *start <= p; };
  add(MemoryCategory::inputs, t * (H + 2 * HKV) * D * B * e);
  if (from(backward_any.first)) add(MemoryCategory::inputs, t * H * D * B * e);  // dout
  if (separate_working && from(qkv_in)) add(MemoryCategory::working, n * (h + 2 * hk) * D * B * e);
  if (separate_working && from(dout_in)) add(MemoryCategory::working, n * h * D * B * e);
  for (size_t pass = 0; pass < 2; ++pass)
    for (size_t s = 0; s < kSlots; ++s) {
      if (!slots[pass][s].covers(p)) continue;
      const Slot slot = static_cast<Slot>(s);
      const MemoryCategory c = slot == Slot::kv0 || slot == Slot::kv1 ? MemoryCategory::kv_slots
                               : slot == Slot::gathered_kv            ? MemoryCategory::gathered_kv
                                                                      : MemoryCategory::dkv_slots;
      add(c, slot_bytes(plan_, slot));
    }
  if (forward_acc.covers(p)) add(MemoryCategory::accumulators, n * h * B * (D + 2) * kFp32);
  if (backward_acc.covers(p)) add(MemoryCategory::accumulators, n * h * B * (D + 1) * kFp32);
  add(MemoryCategory::staging, staging[static_cast<size_t>(p)]);
  if (from(finalize)) add(MemoryCategory::outputs, n * h * B * (D * e + kFp32));  // out, lse
  if (from(out_back)) add(MemoryCategory::outputs, t * H * B * (D * e + kFp32));  // sequence-sharded out, lse
  // dk, dv of the rank's block (fp32): in its dK/dV slot while the storing phase runs, then here.
  if (stored && p > *stored) add(MemoryCategory::outputs, payload_bytes(plan_, Payload::dkv));
  if (from(grads_back)) add(MemoryCategory::outputs, t * (H + 2 * HKV) * D * B * kFp32);  // dq, dk, dv
  return m;
}

}  // namespace

MemoryReport memory_per_rank(const Plan& plan) {
  const Liveness liveness(plan);
  MemoryReport report;
  for (int p = 0; p < static_cast<int>(plan.phases().size()); ++p) {
    report.phases.push_back(liveness.memory_at(p));
    const int64_t total = report.phases.back().total();
    if (total > report.peak_bytes) report.peak_bytes = total, report.peak_phase = p;
  }
  return report;
}

nlohmann::json to_json(const MemoryReport& memory) {
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseMemory& m : memory.phases) {
    nlohmann::json bytes = nlohmann::json::object();
    for (size_t c = 0; c < kMemoryCategories; ++c)
      bytes[memory_category_name(static_cast<MemoryCategory>(c))] = m.bytes[c];
    phases.push_back({{"phase", m.phase}, {"bytes", bytes}, {"total_bytes", m.total()}});
  }
  return {{"phases", phases},
          {"peak_bytes", memory.peak_bytes},
          {"peak_phase", memory.phases.empty() ? "" : memory.phases[static_cast<size_t>(memory.peak_phase)].phase}};
}

}  // namespace ringlab
