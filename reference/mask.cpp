#include "reference/mask.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "reference/error.hpp"
#include "reference/names.hpp"

namespace ringlab {

namespace {

constexpr int64_t kFar = std::numeric_limits<int64_t>::max() / 4;  // "no bound", safe to add a window to

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1) from a counter: the same lengths on every platform for a seed.
double uniform(uint64_t seed, uint64_t index) {
  return (static_cast<double>(splitmix(splitmix(seed ^ 0xD0C5D0C5ull) ^ index) >> 11) + 0.5) * 0x1.0p-53;
}

// Sum over integers i in [a, b] of max(0, c0 + slope * (i - a)).
int64_t clipped_series(int64_t a, int64_t b, int64_t c0, int64_t slope) {
  if (b < a) return 0;
  if (slope == 0) return c0 > 0 ? (b - a + 1) * c0 : 0;
  // Keep the part where the value is positive: an interval at one end.
  if (slope > 0) {
    if (c0 <= 0) {
      const int64_t first = a + (-c0) / slope + 1;  // first i with value > 0
      if (first > b) return 0;
      c0 += slope * (first - a), a = first;
    }
  } else {
    if (c0 <= 0) return 0;
    b = std::min(b, a + (c0 - 1) / (-slope));  // last i with value > 0
  }
  const int64_t n = b - a + 1, last = c0 + slope * (n - 1);
  return n * (c0 + last) / 2;
}

}  // namespace

const char* mask_name(MaskKind mask) {
  constexpr const char* kNames[] = {"none", "causal"};
  return name_of(kNames, mask);
}

Mask::Mask(bool causal, int64_t window, const std::vector<int64_t>& document_lengths, int64_t valid_tokens,
           const std::vector<int64_t>& document_padding)
    : causal_(causal), window_(window), valid_(valid_tokens > 0 ? valid_tokens : kNoPadding) {
  validate_window(window);
  if (!document_padding.empty() && document_padding.size() != document_lengths.size()) {
    throw std::logic_error("mask: one padding count per document");
  }
  const bool pads = std::any_of(document_padding.begin(), document_padding.end(), [](int64_t p) { return p != 0; });
  if (document_lengths.size() > 1 || pads) {
    auto starts = std::make_shared<std::vector<int64_t>>(1, 0);
    auto ends = std::make_shared<std::vector<int64_t>>();
    for (size_t d = 0; d < document_lengths.size(); ++d) {
      const int64_t length = document_lengths[d], padding = pads ? document_padding[d] : 0;
      if (length < 1) throw UsageError("a document length must be at least 1, got " + std::to_string(length));
      if (padding < 0) throw std::logic_error("mask: negative document padding");
      ends->push_back(starts->back() + length);
      starts->push_back(starts->back() + length + padding);
    }
    starts_ = std::move(starts);
    if (pads) ends_ = std::move(ends);
  } else if (document_lengths.size() == 1 && document_lengths[0] < 1) {
    throw UsageError("a document length must be at least 1, got " + std::to_string(document_lengths[0]));
  }
}

int64_t Mask::document_of(int64_t position) const {
  if (!starts_) return 0;
  const auto it = std::upper_bound(starts_->begin(), starts_->end() - 1, position);
  return std::max<int64_t>(0, (it - starts_->begin()) - 1);
}

int64_t Mask::document_start(int64_t document) const { return (*starts_)[static_cast<size_t>(document)]; }

std::vector<int64_t> Mask::document_lengths() const {
  std::vector<int64_t> lengths;
  if (!starts_) return lengths;
  for (size_t d = 0; d + 1 < starts_->size(); ++d) lengths.push_back((*starts_)[d + 1] - (*starts_)[d]);
  return lengths;
}

std::vector<int64_t> Mask::document_tokens() const {
  std::vector<int64_t> lengths = document_lengths();
  if (ends_)
    for (size_t d = 0; d < lengths.size(); ++d) lengths[d] = (*ends_)[d] - (*starts_)[d];
  return lengths;
}

std::vector<int64_t> Mask::document_padding() const {
  std::vector<int64_t> padding;
  if (ends_)
    for (size_t d = 0; d < ends_->size(); ++d) padding.push_back((*starts_)[d + 1] - (*ends_)[d]);
  return padding;
}

Mask Mask::bounds() const {
  Mask result = *this;
  result.causal_ = false;
  result.window_ = 0;
  return result;
}

// The last real position of document d (its padding excluded).
int64_t Mask::document_last(int64_t d) const {
  const auto next = static_cast<size_t>(d) + 1;
  if (ends_) return (*ends_)[static_cast<size_t>(d)] - 1;
  return next < starts_->size() ? (*starts_)[next] - 1 : kFar;
}

KeyRange Mask::keys_of(int64_t query) const {
  if (query >= valid_) return {0, -1};  // padding sees nothing
  KeyRange r{-kFar, valid_ - 1};
  if (starts_) {
    const int64_t d = document_of(query);
    r.first = (*starts_)[static_cast<size_t>(d)];
    r.last = std::min(r.last, document_last(d));
    if (query > r.last) return {0, -1};  // a document's padding sees nothing
  }
  if (causal_) r.last = std::min(r.last, query);
  if (window_ > 0) {
    r.first = std::max(r.first, query - window_ + 1);
    if (!causal_) r.last = std::min(r.last, query + window_ - 1);
  }
  return r;
}

KeyRange Mask::keys_reached(int64_t q_first, int64_t q_last) const {
  KeyRange r{-kFar, std::min(valid_ - 1, q_last + (causal_ ? 0 : window_ > 0 ? window_ - 1 : kFar))};
  if (starts_) {
    r.first = (*starts_)[static_cast<size_t>(document_of(q_first))];
    r.last = std::min(r.last, document_last(document_of(q_last)));
  }
  if (window_ > 0) r.first = std::max(r.first, q_first - window_ + 1);
  return r;
}

KeyRange Mask::queries_reaching(int64_t k_first, int64_t k_last) const {
  KeyRange r{causal_ ? k_first : window_ > 0 ? k_first - window_ + 1 : -kFar, valid_ - 1};
  if (starts_) {
    r.first = std::max(r.first, (*starts_)[static_cast<size_t>(document_of(k_first))]);
    r.last = std::min(r.last, document_last(document_of(k_last)));
  }
  if (window_ > 0) r.last = std::min(r.last, k_last + window_ - 1);
  return r;
}

int64_t Mask::pairs(std::span<const int64_t> queries, std::span<const int64_t> sorted_keys) const {
  if (none()) return static_cast<int64_t>(queries.size() * sorted_keys.size());
  int64_t total = 0;
  for (int64_t q : queries) {
    const KeyRange r = keys_of(q);
    if (r.empty()) continue;
    total += std::upper_bound(sorted_keys.begin(), sorted_keys.end(), r.last) -
             std::lower_bound(sorted_keys.begin(), sorted_keys.end(), r.first);
  }
  return total;
}

// Sum over queries i in [q_first, q_last] of |keys_of(i) ∩ [k_first, k_last]|. Inside one document
// both ends of keys_of(i) are clamps of i + c (c in {0, -(W-1), W-1}) against constants, so the
// count is linear in i between the points where a clamp switches: split there, sum each piece
// as an arithmetic series. O(documents touched), so dry runs at P = 1024 stay fast.
int64_t Mask::range_pairs(int64_t q_first, int64_t q_last, int64_t k_first, int64_t k_last) const {
  q_last = std::min(q_last, valid_ - 1), k_last = std::min(k_last, valid_ - 1);  // padding: no pairs
  if (q_last < q_first || k_last < k_first) return 0;
  const int64_t d_first = document_of(q_first), d_last = document_of(q_last);
  int64_t total = 0;
  for (int64_t d = d_first; d <= d_last; ++d) {
    int64_t ds = -kFar, de = kFar;                                                // the document's positions [ds, de]
    if (starts_) ds = (*starts_)[static_cast<size_t>(d)], de = document_last(d);  // padding: no pairs
    const int64_t a = std::max(q_first, ds), b = std::min(q_last, de);
    const int64_t lo_k = std::max(k_first, ds), hi_k = std::min(k_last, de);
    if (a > b || lo_k > hi_k) continue;
    // first(i) = max(lo_k, i - W + 1 if W);  last(i) = min(hi_k, i if causal, i + W - 1 if W && !causal)
    // At most 8 cuts: on the stack (this runs once per block pair and unit pair in dry runs).
    std::array<int64_t, 8> cut_at{a, b + 1};
    size_t cut_count = 2;
    auto cut = [&](int64_t at) {
      if (at > a && at <= b) cut_at[cut_count++] = at;
    };
    if (window_ > 0) cut(lo_k + window_), cut(lo_k + window_ - 1);
    if (causal_) cut(hi_k), cut(hi_k + 1);
    if (window_ > 0 && !causal_) cut(hi_k - window_ + 1), cut(hi_k - window_ + 2);
    for (size_t i = 1; i < cut_count; ++i)  // insertion sort: at most 8
      for (size_t j = i; j > 0 && cut_at[j - 1] > cut_at[j]; --j) std::swap(cut_at[j - 1], cut_at[j]);
    const std::span<int64_t> cuts(cut_at.data(), cut_count);
    const std::span<int64_t> distinct(cuts.begin(), std::unique(cuts.begin(), cuts.end()));
    auto count = [&](int64_t i) {
      int64_t first = lo_k, last = hi_k;
      if (window_ > 0) first = std::max(first, i - window_ + 1);
      if (causal_) last = std::min(last, i);
      if (window_ > 0 && !causal_) last = std::min(last, i + window_ - 1);
      return last - first + 1;  // may be <= 0
    };
    for (size_t s = 0; s + 1 < distinct.size(); ++s) {
      const int64_t from = distinct[s], to = distinct[s + 1] - 1;
      const int64_t c0 = count(from);
      const int64_t slope = to > from ? count(from + 1) - c0 : 0;
      total += clipped_series(from, to, c0, slope);
    }
  }
  return total;
}

Cover Mask::cover(std::span<const int64_t> queries, int64_t k_min, int64_t k_max) const {
  if (none()) return Cover::all;
  bool any = false, all = true;
  for (int64_t q : queries) {
    const KeyRange r = keys_of(q);
    if (r.first <= k_max && k_min <= r.last) any = true;
    if (!(r.first <= k_min && k_max <= r.last)) all = false;
    if (any && !all) return Cover::some;
  }
  return all ? Cover::all : (any ? Cover::some : Cover::none);
}

std::string Mask::describe() const {
  std::string text = causal_ ? "causal" : (general() ? "" : "none");
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (window_ > 0) add("window " + std::to_string(window_));
  if (starts_) add(std::to_string(documents()) + " documents (" + documents_string(document_tokens(), 8) + ")");

  return text;
}

bool operator==(const Mask& a, const Mask& b) {
  if (a.causal_ != b.causal_ || a.window_ != b.window_ || a.valid_ != b.valid_ ||
      a.has_documents() != b.has_documents())
    return false;
  if (a.documents_padded() != b.documents_padded() || (a.ends_ && *a.ends_ != *b.ends_)) return false;
  return !a.starts_ || *a.starts_ == *b.starts_;
}

// ---- the command-line forms ------------------------------------------------------------------

void validate_window(int64_t window) {
  if (window < 0) {
    throw UsageError("--window must be at least 1 (keys a query sees, its own included), got " +
                     std::to_string(window) + "; e.g. --window 4096");
  }
}

std::vector<int64_t> parse_documents(const std::string& text, int64_t seq, uint64_t seed, int64_t granule) {
  std::vector<int64_t> lengths;
  const std::string random = "random:";
  if (text.rfind(random, 0) == 0) {
    const std::string count_text = text.substr(random.size());
    int64_t count = 0;
    try {
      size_t used = 0;
      count = std::stoll(count_text, &used);
      if (used != count_text.size()) count = 0;
    } catch (const std::exception&) {
      count = 0;
    }
    if (count < 1) throw UsageError("--docs random:N needs a document count N >= 1, got '" + count_text + "'");
    granule = std::max<int64_t>(1, granule);
    if (seq % granule != 0) {
      throw UsageError("--docs random:" + std::to_string(count) + " cuts S=" + std::to_string(seq) +
                       " into documents of multiples of " + std::to_string(granule) +
                       " tokens (the layout cuts every document into equal chunks); pick S a multiple of " +
                       std::to_string(granule));
    }
    const int64_t granules = seq / granule;
    if (count > granules) {
      throw UsageError("--docs random:" + std::to_string(count) + " asks for more documents than S=" +
                       std::to_string(seq) + " has room for (" + std::to_string(granules) + " of " +
                       std::to_string(granule) + " tokens); ask for at most " + std::to_string(granules));
    }
    // Log-normal weights (sigma 1.2: a few long documents and many short ones), one granule each
    // and the rest shared in proportion, largest remainders first.
    std::vector<double> weight(static_cast<size_t>(count));
    for (size_t d = 0; d < weight.size(); ++d) {
      const double u1 = uniform(seed, 2 * d), u2 = uniform(seed, 2 * d + 1);
      weight[d] = std::exp(1.2 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
    }
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    const int64_t spare = granules - count;
    std::vector<std::pair<double, size_t>> remainder;
    int64_t given = 0;
    for (size_t d = 0; d < weight.size(); ++d) {
      const double share = static_cast<double>(spare) * weight[d] / total;
      const int64_t whole = static_cast<int64_t>(std::floor(share));
      lengths.push_back(1 + whole);
      given += whole;
      remainder.emplace_back(share - static_cast<double>(whole), d);
    }
    std::sort(remainder.begin(), remainder.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    for (int64_t i = 0; i < spare - given; ++i) ++lengths[remainder[static_cast<size_t>(i)].second];
    for (int64_t& length : lengths) length *= granule;
    return lengths;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    int64_t length = 0;
    try {
      size_t used = 0;
      length = std::stoll(item, &used);
      if (used != item.size()) throw UsageError("");
    } catch (const std::exception&) {
      throw UsageError("--docs: '" + item + "' is not a document length; give lengths like --docs 1024,512,512 or " +
                       "--docs random:16");
    }
    if (length < 1) {
      throw UsageError("--docs: a document length must be at least 1, got " + std::to_string(length));
    }
    lengths.push_back(length);
    at = comma + 1;
  }
  const int64_t sum = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  if (sum != seq) {
    throw UsageError("--docs lengths sum to " + std::to_string(sum) + ", not S=" + std::to_string(seq) +
                     "; make them add up to --seq (or pass --seq " + std::to_string(sum) + ")");
  }
  return lengths;
}

std::string documents_string(const std::vector<int64_t>& lengths, size_t most) {
  std::string text;
  for (size_t d = 0; d < lengths.size() && d < most; ++d) text += (d ? "," : "") + std::to_string(lengths[d]);
  if (lengths.size() > most) text += ",...";
  return text;
}

}  // namespace ringlab
