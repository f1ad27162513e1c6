// oxicuda/compile/cache_key.hpp — the kernel cache's key and hashes: KeyHash
// (the 128-bit key of everything that made an entry, as the entry's file
// name), the checksum that guards an entry's payload, and the length-framed
// fields a payload is made of.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "../core/error.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// Two 64-bit lanes, eight bytes at a time, for a 128-bit key. Each step of
// a lane, (h ^ v) * odd then h ^= h >> r, is a bijection of h for a given
// v, so two inputs of one framing that differ in one word always differ in
// that lane; the lanes take the words with different multipliers and the
// second rotated. A source of 4 KiB hashes in about a quarter of a
// microsecond, where the byte-at-a-time FNV-1a before it took two (a
// cache hit's cost, BENCHMARKS.md). Not a defence against a forger: the
// entries are the user's own files.
struct KeyHash {
  std::uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  void word(std::uint64_t v) noexcept {
    a = (a ^ v) * 0x9e3779b97f4a7c15ull;
    a ^= a >> 32;
    b = (b ^ ((v << 29) | (v >> 35))) * 0xc2b2ae3d27d4eb4full;
    b ^= b >> 29;
  }
  void bytes(const void* data, std::size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    for (; n >= 8; p += 8, n -= 8) {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      word(v);
    }
    if (n > 0) {  // the tail, with its length in the top byte
      std::uint64_t v = static_cast<std::uint64_t>(n) << 56;
      for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
      word(v);
    }
  }
  // A field: its length first, so that ("ab", "c") and ("a", "bc") differ.
  KeyHash& add(std::string_view s) noexcept {
    const std::uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
    return *this;
  }
  [[nodiscard]] std::string hex() const {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s(32, '0');
    for (int i = 0; i < 16; ++i) {
      s[static_cast<std::size_t>(15 - i)] = digits[(a >> (4 * i)) & 15];
      s[static_cast<std::size_t>(31 - i)] = digits[(b >> (4 * i)) & 15];
    }
    return s;
  }
};

// An entry's checksum covers its key too, so an entry renamed to another
// key's name does not pass for that key's. It guards against a torn or
// damaged file, not against a forger (anyone can recompute it): eight bytes
// at a time in four independent lanes, each a multiply and a shift, so a
// hit's check costs a fraction of a microsecond per 8 KiB.
inline std::uint64_t checksum(std::string_view key, std::string_view s) noexcept {
  constexpr std::uint64_t m = 0x9e3779b97f4a7c15ull;
  KeyHash k;
  k.add(key);
  std::uint64_t h[4] = {k.a, k.b, k.a ^ 0xc2b2ae3d27d4eb4full, k.b ^ 0x165667b19e3779f9ull};
  const char* p = s.data();
  std::size_t n = s.size();
  for (; n >= 32; p += 32, n -= 32)
    for (int lane = 0; lane < 4; ++lane) {
      std::uint64_t v;
      std::memcpy(&v, p + 8 * lane, 8);
      h[lane] = (h[lane] ^ v) * m;
      h[lane] ^= h[lane] >> 31;
    }
  for (; n > 0; --n, ++p) h[0] = (h[0] ^ static_cast<unsigned char>(*p)) * 0x100000001b3ull;
  std::uint64_t r = s.size();
  for (const std::uint64_t lane : h) {
    r = (r ^ lane) * m;
    r ^= r >> 29;
  }
  return r;
}

// Fields joined into one payload, each as 8 bytes of length and its bytes.
inline void put_field(std::string& out, std::string_view field) {
  const std::uint64_t n = field.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n).append(field.data(), field.size());
}
// The next field of `in`; false when `in` is too short for it.
inline bool take_field(std::string_view& in, std::string_view& field) noexcept {
  std::uint64_t n = 0;
  if (in.size() < sizeof n) return false;
  std::memcpy(&n, in.data(), sizeof n);
  in.remove_prefix(sizeof n);
  if (n > in.size()) return false;
  field = in.substr(0, static_cast<std::size_t>(n));
  in.remove_prefix(static_cast<std::size_t>(n));
  return true;
}

// Whether `name` is an entry's: a key (KeyHash::hex, 32 lowercase hex
// digits) and ".bin". Eviction touches no other file.
inline bool entry_name(std::string_view name) noexcept {
  if (name.size() != 36 || name.substr(32) != ".bin") return false;
  for (const char c : name.substr(0, 32))
    if ((c < '0' || c > '9') && (c < 'a' || c > 'f')) return false;
  return true;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
