// The catalog's table: every exercise, in the order `ringlab exercises` lists them (catalog.hpp),
// and making one by id and variant.
#include "exercises/catalog/catalog.hpp"

#include <string>

#include "reference/error.hpp"

namespace ringlab::exercises {

Exercise CatalogEntry::make(int64_t variant) const {
  Exercise exercise{.id = std::string(id),
                    .title = std::string(title),
                    .source = std::string(source),
                    .variant = variant,
                    .lab = std::string(lab)};
  VariantDraw draw(exercise.id, variant);
  write(draw, exercise);
  return exercise;
}

const std::vector<CatalogEntry>& exercise_catalog() {
  using namespace catalog;
  static const std::vector<CatalogEntry> entries = {
      // the source material's exercises 1-7
      attention_memory::kEntry, comm_volume::kEntry, overlap_time::kEntry, causal_skip::kEntry, hybrid_plan::kEntry,
      online_softmax::kEntry, flash_ring_memory::kEntry,
      // the worked numbers of the context-parallelism notes
      imbalance_ratio::kEntry, zigzag_positions::kEntry, layout_efficiency::kEntry, overlap_threshold::kEntry,
      overlap_profile::kEntry, ring_vs_allgather::kEntry, backward_volume::kEntry, ulysses_degree::kEntry,
      memory_table::kEntry,
      // one per known mistake of the source material
      erratum_dkv_direction::kEntry, erratum_causal_mask::kEntry, erratum_softmax_scale::kEntry,
      erratum_skip_speedup::kEntry, erratum_initial_transfer::kEntry, erratum_merge_weights::kEntry,
      erratum_head_memory::kEntry,
      // documents and windows
      packed_balance::kEntry, window_hops::kEntry, redundant_bytes::kEntry,
      // low precision
      precision_growth::kEntry};
  return entries;
}

Exercise make_exercise(std::string_view id, int64_t variant) {
  if (variant < 0)
    throw UsageError("--variant " + std::to_string(variant) +
                     " is negative; use 0 (the source's numbers) or a positive N");
  for (const CatalogEntry& entry : exercise_catalog())
    if (entry.id == id) return entry.make(variant);
  std::string known;
  for (const CatalogEntry& entry : exercise_catalog()) (known += known.empty() ? "" : ", ") += entry.id;
  throw UsageError("unknown exercise '" + std::string(id) + "'; the exercises are " + known +
                   " (run 'ringlab exercises')");
}

}  // namespace ringlab::exercises
