// oxicuda/memory/fill.hpp — fills of device memory, synchronous and
// stream-ordered: every element set to one value (elements of 1, 2, 4 or 8
// bytes), or every byte to one byte, with no kernel of oxicuda's.
#pragma once

#include <bit>
#include <cstddef>
#include <type_traits>

#include "copy.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// An 8-byte element as the two 4-byte words at its lower and higher address.
struct WordPair {
  unsigned low, high;
};

template <class Dst>
void fill_on(CUstream q, Dst& dst, device_element_t<Dst> value, const char* op, SourceLocation where) {
  using T = device_element_t<Dst>;
  static_assert(!std::is_const_v<T>, "fill: the destination is const");
  static_assert(std::is_trivially_copyable_v<T>, "fill: the element type is not trivially copyable");
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "fill: elements of 1, 2, 4 or 8 bytes; use fill_bytes otherwise");
  check_buffer_handle(dst, op, where);
  const auto d = dst.device_span();
  if constexpr (sizeof(T) == 1) {
    check(OXICUDA_DRIVER(MemsetD8Async, d.device_ptr(), std::bit_cast<unsigned char>(value), d.size(), q), where);
  } else if constexpr (sizeof(T) == 2) {
    check(OXICUDA_DRIVER(MemsetD16Async, d.device_ptr(), std::bit_cast<unsigned short>(value), d.size(), q), where);
  } else if constexpr (sizeof(T) == 4) {
    check(OXICUDA_DRIVER(MemsetD32Async, d.device_ptr(), std::bit_cast<unsigned>(value), d.size(), q), where);
  } else {
    // The driver has no 64-bit memset. Equal halves are one 32-bit fill of
    // twice the count; else each half is a 2D 32-bit fill one word wide, with
    // an 8-byte pitch: the lower words, then the higher ones.
    (void)span_bytes(d, op, where);  // n * 8 fits a size_t
    const WordPair w = std::bit_cast<WordPair>(value);
    if (w.low == w.high) {
      check(OXICUDA_DRIVER(MemsetD32Async, d.device_ptr(), w.low, 2 * d.size(), q), where);
    } else if (d.size() != 0) {
      check(OXICUDA_DRIVER(MemsetD2D32Async, d.device_ptr(), 8, w.low, 1, d.size(), q), where);
      check(OXICUDA_DRIVER(MemsetD2D32Async, d.device_ptr() + 4, 8, w.high, 1, d.size(), q), where);
    }
  }
}

template <class Dst>
void fill_bytes_on(CUstream q, Dst& dst, unsigned char byte, const char* op, SourceLocation where) {
  static_assert(!std::is_const_v<device_element_t<Dst>>, "fill_bytes: the destination is const");
  check_buffer_handle(dst, op, where);
  const auto d = dst.device_span();
  check(OXICUDA_DRIVER(MemsetD8Async, d.device_ptr(), byte, span_bytes(d, op, where), q), where);
}

}  // namespace detail

// Sets every element of `dst` to `value`: elements of 1, 2, 4 or 8 bytes
// (cuMemsetD8Async, cuMemsetD16Async, cuMemsetD32Async; 8 bytes: one
// cuMemsetD32Async when the value's two 4-byte halves are equal, else two
// cuMemsetD2D32Async, one per half, 8 bytes apart). So a double, an
// int64_t, a half or a bfloat16 (by its bit pattern) is filled with no
// kernel. fill_bytes sets every byte, whatever T. The synchronous forms
// return with the memory set (copy.hpp's ordering rule; with a stream:
// enqueued there and waited for); the _async ones enqueue on `stream` (one
// driver call; two for an 8-byte value with unequal halves).
template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill(Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
          SourceLocation where = SourceLocation::current()) {
  detail::synchronously(detail::context_of(dst), detail::stream_of(dst), nullptr, where,
                        [&](CUstream q) { detail::fill_on(q, dst, value, "oxicuda::fill", where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill(StreamRef stream, Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
          SourceLocation where = SourceLocation::current()) {
  detail::on_stream_and_wait(stream, "oxicuda::fill", where,
                             [&](CUstream q) { detail::fill_on(q, dst, value, "oxicuda::fill", where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_async(StreamRef stream, Dst&& dst, detail::device_element_t<std::remove_cvref_t<Dst>> value,
                SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::fill_async", where,
                    [&](CUstream q) { detail::fill_on(q, dst, value, "oxicuda::fill_async", where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_bytes(Dst&& dst, unsigned char byte, SourceLocation where = SourceLocation::current()) {
  detail::synchronously(detail::context_of(dst), detail::stream_of(dst), nullptr, where,
                        [&](CUstream q) { detail::fill_bytes_on(q, dst, byte, "oxicuda::fill_bytes", where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_bytes(StreamRef stream, Dst&& dst, unsigned char byte, SourceLocation where = SourceLocation::current()) {
  detail::on_stream_and_wait(stream, "oxicuda::fill_bytes", where,
                             [&](CUstream q) { detail::fill_bytes_on(q, dst, byte, "oxicuda::fill_bytes", where); });
}

template <class Dst>
requires detail::device_range<std::remove_cvref_t<Dst>>
void fill_bytes_async(StreamRef stream, Dst&& dst, unsigned char byte,
                      SourceLocation where = SourceLocation::current()) {
  detail::on_stream(stream, "oxicuda::fill_bytes_async", where,
                    [&](CUstream q) { detail::fill_bytes_on(q, dst, byte, "oxicuda::fill_bytes_async", where); });
}

OXICUDA_DETAIL_NAMESPACE_END
