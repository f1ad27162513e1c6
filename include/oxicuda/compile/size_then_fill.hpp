// oxicuda/compile/size_then_fill.hpp — NVRTC's and nvJitLink's way of handing
// out what they made (a log, PTX, a cubin, LTO-IR, a linked cubin): one call
// says how many bytes, a second writes them into the caller's buffer. Written
// once here, for every such pair.
#pragma once

#include <cstddef>
#include <string>

#include "../core/error.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// Asks `size` (a call taking std::size_t*) how many bytes, then has `fill`
// (a call taking char*) write them into `out`, which is empty when either
// fails. `fill` is not called for 0 bytes. `text`: trailing NULs dropped (a
// log's or PTX's terminator). Returns the first failure, else the success,
// not raised: the caller checks it, or ignores it for a best-effort log.
template <class Size, class Fill>
auto size_then_fill(Size size, Fill fill, std::string& out, bool text) -> decltype(size(static_cast<std::size_t*>(nullptr))) {
  std::size_t n = 0;
  out.clear();
  auto r = size(&n);
  if (!r.ok()) return r;
  out.assign(n, '\0');
  if (n) r = fill(out.data());
  if (!r.ok()) out.clear();
  if (text)
    while (!out.empty() && out.back() == '\0') out.pop_back();
  return r;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
