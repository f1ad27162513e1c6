// oxicuda/kernel/image.hpp — what kind of image a module is loaded from (PTX text,
// a cubin, a fatbin), and whether a binary one is whole: the driver reads an
// image without knowing its size, so a truncated or crafted header would
// make it read past the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "../core/check.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

inline std::uint64_t read_le(const unsigned char* p, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ltoir: NVRTC's LTO-IR (-dlto), which only nvJitLink reads; unknown: bytes
// that are none of these (a control byte among the first ones, where PTX
// text has none).
enum class ImageKind { ptx, elf, fatbin, ltoir, unknown };

inline ImageKind image_kind(const unsigned char* p, std::size_t size) noexcept {
  if (size >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') return ImageKind::elf;
  if (size >= 4 && read_le(p, 4) == 0xBA55ED50u) return ImageKind::fatbin;
  if (size >= 4 && read_le(p, 4) == 0x7F4E43EDu) return ImageKind::ltoir;
  std::size_t n = size;
  while (n > 0 && p[n - 1] == '\0') --n;  // a terminating NUL is PTX's
  for (std::size_t i = 0; i < n && i < 16; ++i)
    if (p[i] == 0x7f || (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r' && p[i] != '\f'))
      return ImageKind::unknown;
  return ImageKind::ptx;
}

// The first bytes of an image, in hex, for messages ("7f 45 4c 46 ...").
inline std::string first_bytes(const unsigned char* p, std::size_t size) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < size && i < 8; ++i) {
    if (i) s.push_back(' ');
    s.push_back(hex[p[i] >> 4]);
    s.push_back(hex[p[i] & 15]);
  }
  return size > 8 ? cat({s, " ..."}) : s;
}

// PTX text of n bytes as the driver and nvJitLink take it: copied and
// NUL-terminated (they read up to a NUL, not a size). Trailing NULs are
// dropped; an empty text (or only white space), or a NUL inside it (they would read only what
// comes before it), is an Error of `operation` with `code`.
template <class Result>
std::string ptx_text(const char* ptx, std::size_t n, Result code, const char* operation, std::string_view what,
                     std::string_view reader, SourceLocation where) {
  while (n > 0 && ptx[n - 1] == '\0') --n;
  std::size_t text = 0;
  while (text < n && (ptx[text] == ' ' || ptx[text] == '\t' || ptx[text] == '\r' || ptx[text] == '\n')) ++text;
  if (text == n) raise(Error(code, operation, cat({what, " is empty"}), where));
  if (const void* nul = std::memchr(ptx, '\0', n))
    raise(Error(code, operation,
                cat({what, " of ", std::to_string(n), " bytes has a NUL byte at offset ",
                     std::to_string(static_cast<const char*>(nul) - ptx),
                     "; ", reader, " would read only the text before it"}),
                where));
  return std::string(ptx, n);
}

// Why a binary image is unfit to hand to the driver (which reads it without
// knowing its size), or empty when it is fit.
inline std::string image_problem(const unsigned char* p, std::size_t size, ImageKind kind) {
  // Whether [offset, offset + length) lies within the `size` bytes given,
  // computed without overflow (a crafted header may claim nearly 2^64 bytes).
  auto fits = [&](std::uint64_t offset, std::uint64_t length) { return offset <= size && length <= size - offset; };
  auto truncated = [&](const char* what, std::uint64_t offset, std::uint64_t length) {
    const bool wraps = length > ~std::uint64_t{0} - offset;
    return cat({"the ", what, " image is truncated: its headers describe ",
                wraps ? cat({std::to_string(offset), " + ", std::to_string(length)}) : std::to_string(offset + length),
                " bytes but only ", std::to_string(size), " were given"});
  };
  if (kind == ImageKind::elf) {
    if (size < 64) return truncated("cubin (ELF)", 0, 64);
    if (p[4] != 2) return cat({"the cubin (ELF) image is not a 64-bit ELF file"});
    const std::uint64_t phoff = read_le(p + 32, 8), shoff = read_le(p + 40, 8);
    const std::uint64_t phsize = read_le(p + 54, 2) * read_le(p + 56, 2);
    const std::uint64_t shsize = read_le(p + 58, 2) * read_le(p + 60, 2);
    if (!fits(phoff, phsize)) return truncated("cubin (ELF)", phoff, phsize);
    if (!fits(shoff, shsize)) return truncated("cubin (ELF)", shoff, shsize);
  } else if (kind == ImageKind::fatbin) {
    if (size < 16) return truncated("fatbin", 0, 16);
    const std::uint64_t header = read_le(p + 6, 2), payload = read_le(p + 8, 8);
    if (!fits(header, payload)) return truncated("fatbin", header, payload);
  }
  return {};
}

// The kind of the image of `size` bytes at `data`, for the driver to load
// (`operation`: Module::from_image, Library::from_image): an Error when it
// is empty, LTO-IR (which only nvJitLink reads), of no known format, or a
// binary image whose headers describe more bytes than were given.
OXICUDA_DETAIL_COLD inline ImageKind checked_image(const void* data, std::size_t size, const char* operation,
                                                   SourceLocation where) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (p == nullptr || size == 0) raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, operation, "the image is empty", where));
  const ImageKind kind = image_kind(p, size);
  if (kind == ImageKind::ltoir)
    raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, operation,
                cat({"the image of ", std::to_string(size),
                     " bytes is LTO-IR (NVRTC's output with CompileOptions::lto), which the driver "
                     "cannot load: link it with an oxicuda::LtoLinker into a cubin, and load that"}),
                where));
  if (kind == ImageKind::unknown)
    raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, operation,
                cat({"the image of ", std::to_string(size), " bytes is of an unknown format (it starts with ",
                     first_bytes(p, size), "): not PTX text, a cubin (ELF) or a fatbin"}),
                where));
  if (kind != ImageKind::ptx) {
    std::string problem = image_problem(p, size, kind);
    if (!problem.empty()) raise(Error(ffi::CUDA_ERROR_INVALID_IMAGE, operation, std::move(problem), where));
  }
  return kind;
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
