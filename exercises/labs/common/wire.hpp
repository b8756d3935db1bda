// What crosses from the process that runs a student's code to the process that judges it: values
// written by a Writer and read back by a Reader, field by field, in one format for every lab.
//
// The judge trusts nothing it reads: every length is checked against what is left, a frame is at
// most kMaxFrame bytes, and a malformed value throws WireError (the criterion fails; the judge does
// not crash). One function per type, `io(ar, value)`, serves both directions: `ar(a, b, c)` writes
// a, b and c with a Writer and reads them with a Reader. A lab's own struct gets a `fields`
// overload next to it (found by argument-dependent lookup):
//   template <class Ar> void fields(Ar& ar, BlockCall& c) { ar(c.origin_k, c.origin_v, c.masked); }
// Sections: [archives] [values] [simulator reports]
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "exercises/labs/common/lab_support.hpp"
#include "reference/attention.hpp"
#include "sim/ranks/report.hpp"

namespace ringlab::lab::wire {

// ---- [archives] --------------------------------------------------------------------------------

inline constexpr size_t kMaxFrame = size_t{256} << 20;

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  static constexpr bool reading = false;
  void bytes(const void* data, size_t size) {
    if (size == 0) return;
    const auto* p = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), p, p + size);
  }
  template <class... T>
  void operator()(T&... values);
  const std::string& buffer() const { return buffer_; }

 private:
  std::string buffer_;
};

class Reader {
 public:
  static constexpr bool reading = true;
  explicit Reader(std::string buffer) : buffer_(std::move(buffer)) {}
  void bytes(void* data, size_t size) {
    if (size > buffer_.size() - at_) throw WireError("a value runs past the end of its frame");
    if (size == 0) return;  // an empty vector's data() may be null, which memcpy must not see
    std::memcpy(data, buffer_.data() + at_, size);
    at_ += size;
  }
  // A count of elements of `element_size` bytes each that the rest of the frame can hold.
  size_t count(size_t element_size) {
    uint64_t n = 0;
    bytes(&n, sizeof n);
    if (element_size > 0 && n > (buffer_.size() - at_) / element_size)
      throw WireError("a length of " + std::to_string(n) + " runs past the end of its frame");
    return static_cast<size_t>(n);
  }
  bool done() const { return at_ == buffer_.size(); }
  template <class... T>
  void operator()(T&... values);

 private:
  std::string buffer_;
  size_t at_ = 0;
};

// ---- [values] ----------------------------------------------------------------------------------

// Declared first, so that each can hold the others (a vector of optionals of tensors).
template <class Ar, class T>
void io(Ar& ar, T& value);
template <class Ar>
void io(Ar& ar, std::string& s);
template <class Ar, class T>
void io(Ar& ar, std::vector<T>& v);
template <class Ar, class T, size_t N>
void io(Ar& ar, std::array<T, N>& a);
template <class Ar, class T>
void io(Ar& ar, std::optional<T>& o);
template <class Ar, class A, class B>
void io(Ar& ar, std::pair<A, B>& p);
template <class Ar, class T>
void io(Ar& ar, Tensor<T>& t);

template <class Ar>
void io_count(Ar& ar, size_t& n, size_t element_size) {
  if constexpr (Ar::reading) {
    n = ar.count(element_size);
  } else {
    const uint64_t wide = n;
    ar.bytes(&wide, sizeof wide);
  }
}

template <class Ar>
void io(Ar& ar, std::string& s) {
  size_t n = s.size();
  io_count(ar, n, 1);
  if constexpr (Ar::reading) s.resize(n);
  ar.bytes(s.data(), n);
}

template <class Ar, class T>
void io(Ar& ar, std::vector<T>& v) {
  size_t n = v.size();
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    io_count(ar, n, sizeof(T));
    if constexpr (Ar::reading) v.resize(n);
    ar.bytes(v.data(), n * sizeof(T));
  } else {
    io_count(ar, n, 1);  // every element takes at least a byte
    if constexpr (Ar::reading) v.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        bool b = v[i];
        io(ar, b);
        v[i] = b;
      } else {
        io(ar, v[i]);
      }
    }
  }
}

template <class Ar, class T, size_t N>
void io(Ar& ar, std::array<T, N>& a) {
  for (T& x : a) io(ar, x);
}

template <class Ar, class T>
void io(Ar& ar, std::optional<T>& o) {
  bool present = o.has_value();
  io(ar, present);
  if constexpr (Ar::reading) {
    o.reset();
    if (present) o.emplace();
  }
  if (present) io(ar, *o);
}

template <class Ar, class A, class B>
void io(Ar& ar, std::pair<A, B>& p) {
  io(ar, p.first);
  io(ar, p.second);
}

template <class Ar, class T>
void io(Ar& ar, Tensor<T>& t) {
  Shape shape = t.shape();
  io(ar, shape);
  if constexpr (Ar::reading) {
    int64_t elements = shape.empty() ? 0 : 1;  // a default-made tensor has no shape and no values
    for (const int64_t d : shape) {
      if (d < 0 || (d > 0 && elements > static_cast<int64_t>(kMaxFrame) / d))
        throw WireError("a tensor of shape " + shape_string(shape) + " cannot be in a frame");
      elements *= d;
    }
    std::vector<T> data;
    io(ar, data);
    if (static_cast<int64_t>(data.size()) != elements)
      throw WireError("a tensor of shape " + shape_string(shape) + " came with " + std::to_string(data.size()) +
                      " values");
    t = shape.empty() ? Tensor<T>() : Tensor<T>(std::move(shape), std::move(data));
  } else {
    io(ar, t.storage());
  }
}

template <class Ar, class T>
void fields(Ar& ar, AttentionOutput<T>& o) {
  ar(o.out, o.lse);
}
template <class Ar, class T>
void fields(Ar& ar, AttentionGrads<T>& g) {
  ar(g.dq, g.dk, g.dv);
}

// ---- [simulator reports] -----------------------------------------------------------------------
// What the labs read of a run: how it ended (the deadlock, fault or error, with the thrown
// exception's kind: a starter's TODO stays "not implemented") and each rank's traffic counters.
// The trace and the fault plan stay behind.

template <class Ar>
void fields(Ar& ar, RankCounters& c) {
  ar(c.messages_sent, c.bytes_sent, c.messages_received, c.bytes_received, c.collectives, c.blocked_seconds,
     c.compute_seconds, c.flops);
}

template <class Ar>
void fields(Ar& ar, RankWaitReport& w) {
  ar(w.rank, w.state, w.call, w.communicator, w.peer, w.sending, w.tag, w.collective_index, w.not_arrived, w.waits_for,
     w.step, w.label, w.queued);
}

template <class Ar>
void fields(Ar& ar, DeadlockReport& d) {
  ar(d.timed_out, d.detected_after_seconds, d.timeout_seconds, d.ranks, d.cycle, d.faults);
}

template <class Ar>
void fields(Ar& ar, CommFault& f) {
  ar(f.kind, f.detected_by, f.peer, f.tag, f.step, f.sequence, f.detail);
}

template <class Ar>
void fields(Ar& ar, RankError& e) {
  bool todo = false;
  if constexpr (!Ar::reading) {
    if (e.exception) {
      try {
        std::rethrow_exception(e.exception);
      } catch (const NotImplemented&) {
        todo = true;
      } catch (...) {
      }
    }
  }
  ar(e.rank, e.message, todo);
  if constexpr (Ar::reading)
    e.exception = todo ? std::make_exception_ptr(NotImplemented(e.message))
                       : std::make_exception_ptr(std::runtime_error(e.message));
}

template <class Ar>
void fields(Ar& ar, RunReport& r) {
  ar(r.status, r.ranks, r.wall_seconds, r.counters, r.deadlock, r.fault, r.error);
}

// ---- the generic case, defined last: a `fields` overload of this file or of the value's own
// namespace is found wherever it is declared.

// Numbers and enumerations as their bytes (a bool as one byte, read back as 0 or 1); anything else
// through its `fields` overload.
template <class Ar, class T>
void io(Ar& ar, T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = value ? 1 : 0;
    ar.bytes(&b, 1);
    value = b != 0;
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    ar.bytes(&value, sizeof value);
  } else {
    fields(ar, value);
  }
}

template <class... T>
void Writer::operator()(T&... values) {
  (io(*this, values), ...);
}
template <class... T>
void Reader::operator()(T&... values) {
  (io(*this, values), ...);
}

}  // namespace ringlab::lab::wire
