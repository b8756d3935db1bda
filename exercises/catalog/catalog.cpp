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
      kAttentionMemory, kCommVolume, kOverlapTime, kCausalSkip, kHybridPlan, kOnlineSoftmax, kFlashRingMemory,
      // the worked numbers of the context-parallelism notes
      kImbalanceRatio, kZigzagPositions, kLayoutEfficiency, kOverlapThreshold, kOverlapProfile, kRingVsAllgather,
      kBackwardVolume, kUlyssesDegree, kMemoryTable,
      // one per known mistake of the source material
      kErratumDkvDirection, kErratumCausalMask, kErratumSoftmaxScale, kErratumSkipSpeedup, kErratumInitialTransfer,
      kErratumMergeWeights, kErratumHeadMemory,
      // documents and windows
      kPackedBalance, kWindowHops, kRedundantBytes,
      // low precision
      kPrecisionGrowth};
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
