#include "sim/cost/memory_model.hpp"

#include <algorithm>
#include <optional>

#include "sim/plan/queries.hpp"

namespace ringlab {

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::inputs: return "inputs";
    case MemoryCategory::working: return "working";
    case MemoryCategory::kv_slots: return "kv slots";
    case MemoryCategory::gathered_kv: return "gathered kv";
    case MemoryCategory::accumulators: return "accumulators";
    case MemoryCategory::dkv_slots: return "dkv slots";
    case MemoryCategory::staging: return "staging";
    case MemoryCategory::outputs: return "outputs";
    case MemoryCategory::count: break;
  }
  return "?";
}

int64_t PhaseMemory::total() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

namespace {

// [first, last] phase of something's life; empty until touched.
struct Span {
  std::optional<int> first, last;
  void touch(int phase) {
    if (!first || phase < *first) first = phase;
    if (!last || phase > *last) last = phase;
  }
  bool covers(int phase) const { return first && *first <= phase && phase <= *last; }
};

}  // namespace

MemoryReport memory_per_rank(const Plan& plan) {
  const PlanSpec& spec = plan.spec();
  const AttentionDims& d = spec.dims;
  const int64_t e = spec.element_bytes, B = d.batch, D = d.dim, H = d.heads, HKV = d.kv_heads;
  const int64_t U = plan.ulysses(), R = plan.ring(), t = d.seq / spec.ranks, n = plan.block_tokens();
  const int64_t h = plan.heads_per_rank(), hk = plan.kv_heads_per_rank();
  constexpr int64_t fp32 = 4;

  const int64_t kv_slot = payload_bytes(plan, Payload::kv), dkv_slot = payload_bytes(plan, Payload::dkv);
  auto slot_bytes = [&](Slot s) -> int64_t {
    switch (s) {
      case Slot::kv0:
      case Slot::kv1: return kv_slot;
      case Slot::dkv0:
      case Slot::dkv1:
      case Slot::dkv_local: return dkv_slot;
      case Slot::gathered_kv: return R * kv_slot;
      case Slot::gathered_dkv: return R * dkv_slot;
      case Slot::count: break;
    }
    return 0;
  };
  auto shard_bytes = [&](Collective c) -> int64_t {
    switch (c) {
      case Collective::all_to_all_qkv: return t * (H + 2 * HKV) * D * B * e;
      case Collective::all_to_all_out: return t * H * (D * e + fp32) * B;
      case Collective::all_to_all_dout: return t * H * D * B * e;
      case Collective::all_to_all_grads: return t * (H + 2 * HKV) * D * B * fp32;
      default: return 0;
    }
  };

  // Liveness from the templates, slots per pass.
  const int phases = static_cast<int>(plan.phases().size());
  std::array<std::array<Span, static_cast<size_t>(Slot::count)>, 2> slots{};  // [pass][slot]
  Span forward_acc, backward_acc, backward_any;
  std::optional<int> finalize, qkv_in, dout_in, out_back, grads_back, stored;
  std::vector<int64_t> staging(static_cast<size_t>(phases), 0);
  for (int p = 0; p < phases; ++p) {
    const Phase& phase = plan.phases()[static_cast<size_t>(p)];
    const size_t pass = phase.pass == Pass::forward ? 0 : 1;
    if (phase.pass == Pass::backward) backward_any.touch(p);
    for (const TemplateEntry& entry : phase.body) {
      // The steps the entry is present at: a slot pair names both slots only if it runs on two
      // consecutive steps (a ring of one uses just the first).
      const int64_t first = entry.when.first, last = phase.steps - 1 - entry.when.skip_last;
      if (last < first) continue;
      auto use = [&](const SlotPair& pair) {
        slots[pass][static_cast<size_t>(pair.at(first))].touch(p);
        if (last > first) slots[pass][static_cast<size_t>(pair.at(first + 1))].touch(p);
      };
      std::visit(
          [&](const auto& op) {
            using T = std::decay_t<decltype(op)>;
            if constexpr (std::is_same_v<T, LoadKvT>) {
              use(op.slot);
            } else if constexpr (std::is_same_v<T, ExchangeT>) {
              if (op.sends) use(op.send_slot);
              if (op.receives) use(op.recv_slot);
            } else if constexpr (std::is_same_v<T, ComputeT>) {
              use(op.kv_slot);
              if (op.pass == Pass::backward) {
                use(op.grad_slot);
                backward_acc.touch(p);
              } else {
                forward_acc.touch(p);
              }
            } else if constexpr (std::is_same_v<T, AccumulateT>) {
              use(op.from), use(op.to);
            } else if constexpr (std::is_same_v<T, StoreGradsT>) {
              use(op.slot);
              if (!stored) stored = p;
            } else if constexpr (std::is_same_v<T, PrepareBackwardT>) {
              backward_acc.touch(p);
              slots[1][static_cast<size_t>(Slot::dkv0)].touch(p);
            } else if constexpr (std::is_same_v<T, FinalizeT>) {
              forward_acc.touch(p);
              if (!finalize) finalize = p;
            } else if constexpr (std::is_same_v<T, CollectiveT>) {
              switch (op.collective) {
                case Collective::all_gather_kv: slots[pass][static_cast<size_t>(Slot::gathered_kv)].touch(p); break;
                case Collective::reduce_scatter_dkv:
                  slots[pass][static_cast<size_t>(Slot::gathered_dkv)].touch(p);
                  slots[pass][static_cast<size_t>(Slot::dkv0)].touch(p);
                  break;
                case Collective::all_to_all_qkv: qkv_in = qkv_in.value_or(p); break;
                case Collective::all_to_all_out: out_back = out_back.value_or(p); break;
                case Collective::all_to_all_dout: dout_in = dout_in.value_or(p); break;
                case Collective::all_to_all_grads: grads_back = grads_back.value_or(p); break;
              }
              if (is_ulysses_collective(op.collective) && U > 1) staging[static_cast<size_t>(p)] += 2 * shard_bytes(op.collective);
            }
          },
          entry.op);
    }
  }
  // The backward accumulators (dq, delta) live from their preparation to the end.
  if (backward_acc.first) backward_acc.last = phases - 1;

  MemoryReport report;
  for (int p = 0; p < phases; ++p) {
    PhaseMemory m;
    m.phase = plan.phases()[static_cast<size_t>(p)].name;
    auto add = [&](MemoryCategory c, int64_t bytes) { m.bytes[static_cast<size_t>(c)] += bytes; };
    auto from = [&](const std::optional<int>& start) { return start && *start <= p; };
    add(MemoryCategory::inputs, t * (H + 2 * HKV) * D * B * e);
    if (backward_any.first && *backward_any.first <= p) add(MemoryCategory::inputs, t * H * D * B * e);  // dout
    if (U > 1 && from(qkv_in)) add(MemoryCategory::working, n * (h + 2 * hk) * D * B * e);
    if (U > 1 && from(dout_in)) add(MemoryCategory::working, n * h * D * B * e);
    for (size_t pass = 0; pass < 2; ++pass)
      for (size_t s = 0; s < static_cast<size_t>(Slot::count); ++s) {
        if (!slots[pass][s].covers(p)) continue;
        const Slot slot = static_cast<Slot>(s);
        const MemoryCategory c = slot == Slot::kv0 || slot == Slot::kv1 ? MemoryCategory::kv_slots
                                 : slot == Slot::gathered_kv            ? MemoryCategory::gathered_kv
                                                                        : MemoryCategory::dkv_slots;
        add(c, slot_bytes(slot));
      }
    if (forward_acc.first && forward_acc.covers(p)) add(MemoryCategory::accumulators, n * h * B * (D + 2) * fp32);
    if (backward_acc.covers(p)) add(MemoryCategory::accumulators, n * h * B * (D + 1) * fp32);
    add(MemoryCategory::staging, staging[static_cast<size_t>(p)]);
    if (from(finalize)) add(MemoryCategory::outputs, n * h * B * (D * e + fp32));  // out, lse
    if (from(out_back)) add(MemoryCategory::outputs, t * H * B * (D * e + fp32));  // sequence-sharded out, lse
    // dk, dv of the rank's block (fp32): in its dK/dV slot while the storing phase runs, then here.
    if (stored && p > *stored) add(MemoryCategory::outputs, dkv_slot);
    if (from(grads_back)) add(MemoryCategory::outputs, t * (H + 2 * HKV) * D * B * fp32);  // dq, dk, dv
    report.phases.push_back(std::move(m));
  }
  for (int p = 0; p < phases; ++p) {
    const int64_t total = report.phases[static_cast<size_t>(p)].total();
    if (total > report.peak_bytes) report.peak_bytes = total, report.peak_phase = p;
  }
  return report;
}

nlohmann::json to_json(const MemoryReport& memory) {
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseMemory& m : memory.phases) {
    nlohmann::json bytes = nlohmann::json::object();
    for (size_t c = 0; c < kMemoryCategories; ++c) bytes[memory_category_name(static_cast<MemoryCategory>(c))] = m.bytes[c];
    phases.push_back({{"phase", m.phase}, {"bytes", bytes}, {"total_bytes", m.total()}});
  }
  return {{"phases", phases},
          {"peak_bytes", memory.peak_bytes},
          {"peak_phase", memory.phases.empty() ? "" : memory.phases[static_cast<size_t>(memory.peak_phase)].phase}};
}

}  // namespace ringlab
