// The attention mask: which keys a query may see, as a predicate on *global* token positions.
//
//   visible(i, j) = same_document(i, j) && (!causal || j <= i) && (W == 0 || within_window(i, j))
//
// within_window: i - W < j <= i when causal (W keys including the query's own, FlashAttention's
// window (W-1, 0)), |i - j| < W when not. Documents are packed back to back (cu_seqlens): a query
// never sees a key of another document.
//
// For every query the visible keys are one interval of positions, [first, last] (keys_of), so
// counting visible pairs, classifying a tile and masking a score row are all interval arithmetic.
// Every part of ringlab takes the mask from here: the oracle, the blockwise kernel, the plan, the
// checker and the cost model.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ringlab {

enum class MaskKind : uint8_t {
  none,    // every query sees every key of the block
  causal,  // query at position i sees keys at positions j <= i
};

const char* mask_name(MaskKind mask);

// Inclusive interval of key positions; empty when last < first.
struct KeyRange {
  int64_t first = 0;
  int64_t last = -1;
  bool empty() const { return last < first; }
  bool contains(int64_t j) const { return first <= j && j <= last; }
};

// How much of a set of (query, key) pairs the mask shows.
enum class Cover : uint8_t { none, some, all };

class Mask {
 public:
  Mask() = default;
  Mask(MaskKind kind) : causal_(kind == MaskKind::causal) {}  // NOLINT(google-explicit-constructor)
  // lengths: documents packed in order (empty = one document). Throws UsageError on a length < 1.
  // valid_tokens > 0: positions from valid_tokens on are padding — they see no key and no query
  // sees them (how an uneven S runs on a layout that needs S to divide).
  // document_padding (empty, or one count per document): padding positions at the end of each
  // document — document d then spans lengths[d] + padding[d] positions, the last padding[d] of
  // which see nothing and are seen by nothing (how a per-document layout takes any lengths: each
  // document padded to what the layout cuts, as TransformerEngine pads THD sequences).
  Mask(bool causal, int64_t window, const std::vector<int64_t>& document_lengths = {}, int64_t valid_tokens = 0,
       const std::vector<int64_t>& document_padding = {});

  bool causal() const { return causal_; }
  int64_t window() const { return window_; }
  bool has_documents() const { return starts_ != nullptr; }
  // Something beyond none/causal: a window or documents (the general path of every consumer).
  bool general() const { return window_ > 0 || has_documents() || padded() || documents_padded(); }
  bool padded() const { return valid_ < kNoPadding; }         // tail padding (valid_tokens)
  bool documents_padded() const { return ends_ != nullptr; }  // padding at the end of documents
  int64_t valid_tokens() const { return valid_; }             // positions before the padding
  bool none() const { return !causal_ && !general(); }
  // The simple kind this mask is, for consumers that only know none/causal (GPU kernels).
  MaskKind kind() const { return causal_ ? MaskKind::causal : MaskKind::none; }

  int64_t documents() const { return starts_ ? static_cast<int64_t>(starts_->size()) - 1 : 1; }
  int64_t document_of(int64_t position) const;
  int64_t document_start(int64_t document) const;  // requires has_documents()
  // The positions each document spans, its padding included (what a per-document layout cuts);
  // empty without documents.
  std::vector<int64_t> document_lengths() const;
  // Each document's real tokens (document_lengths() less the padding); empty without documents.
  std::vector<int64_t> document_tokens() const;
  // Padding positions at the end of each document; empty when none.
  std::vector<int64_t> document_padding() const;
  // The same documents and padding without causality or window: which keys a row may see at all.
  Mask bounds() const;

  KeyRange keys_of(int64_t query) const;
  bool visible(int64_t query, int64_t key) const { return keys_of(query).contains(key); }
  // One interval holding every key some query in [q_first, q_last] sees (its documents, the causal
  // side, the window, before the padding), and its mirror: one holding every query that sees some
  // key in [k_first, k_last]. Supersets (a query or key inside may see nothing); an end without a
  // bound is far out (clamp it to the sequence); empty when nothing can be seen.
  KeyRange keys_reached(int64_t q_first, int64_t q_last) const;
  KeyRange queries_reaching(int64_t k_first, int64_t k_last) const;

  // Visible pairs between query positions (any order) and key positions sorted ascending.
  int64_t pairs(std::span<const int64_t> queries, std::span<const int64_t> sorted_keys) const;
  // Visible pairs between the position ranges [q_first, q_last] and [k_first, k_last].
  int64_t range_pairs(int64_t q_first, int64_t q_last, int64_t k_first, int64_t k_last) const;
  // Whether the queries see none, some or all of the keys that lie in [k_min, k_max] — exact for
  // keys filling that range, conservative (some) otherwise.
  Cover cover(std::span<const int64_t> queries, int64_t k_min, int64_t k_max) const;

  // "causal", "causal, window 4096, 16 documents", "none".
  std::string describe() const;

  friend bool operator==(const Mask& a, const Mask& b);

 private:
  static constexpr int64_t kNoPadding = std::numeric_limits<int64_t>::max() / 4;
  int64_t document_last(int64_t d) const;  // requires starts_
  bool causal_ = false;
  int64_t window_ = 0;
  int64_t valid_ = kNoPadding;
  std::shared_ptr<const std::vector<int64_t>> starts_;  // cu_seqlens: 0 = s0 < s1 < ... < sN = S
  std::shared_ptr<const std::vector<int64_t>> ends_;    // per-document padding: document d's real
                                                        // tokens are [s_d, e_d), padding [e_d, s_{d+1})
};

// ---- the command-line forms ------------------------------------------------------------------

// "--docs L1,L2,..." or "--docs random:N" -> lengths summing to seq. random:N draws N lengths from
// a long-tailed (log-normal, sigma 1) distribution seeded by seed, each a multiple of `granule`
// (a layout that cuts every document into 2P equal chunks needs 2P) and at least one granule.
// Throws UsageError: a length < 1, a sum other than seq, N < 1, more documents than tokens.
std::vector<int64_t> parse_documents(const std::string& text, int64_t seq, uint64_t seed, int64_t granule = 1);
// The lengths as "L1,L2,...", cut with ",..." after `most` of them.
std::string documents_string(const std::vector<int64_t>& lengths, size_t most = 16);
// Throws UsageError when window < 0 (0 = no window).
void validate_window(int64_t window);

}  // namespace ringlab
