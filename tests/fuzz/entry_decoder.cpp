// Fuzz test of the kernel cache's entry decoder (cache_entry.hpp): any
// payload either decodes into views that lie inside it, whose kernel names
// Module::function can walk without reading past them and whose image the
// driver may be handed, or is refused. Run under AddressSanitizer.
//
// Built two ways (tests/fuzz/run.sh): with libFuzzer (clang++
// -fsanitize=fuzzer,address), or, where libFuzzer is missing, with
// -DOXICUDA_FUZZ_LOOP: a seeded mutation loop of our own, which runs for the
// seconds given and prints the inputs it ran ("executed N inputs").
//
// The first byte of an input picks how the rest is read: even, as a payload
// as it is on disk; odd, as the parts of an entry (split at 0xFF bytes: kind,
// names, log, image) put together by encode_entry, then perhaps cut or
// extended by a few bytes, so that the checks behind the framing are reached.
#include "oxicuda.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using oxicuda::StringList;
namespace detail = oxicuda::detail;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "entry decoder: %s\n", what);
  std::abort();
}

// Walks the names as Module::function does (module.hpp), over a copy of
// exactly their size, so that AddressSanitizer sees any read past them.
void walk_names(std::string_view names, std::string_view wanted) {
  std::unique_ptr<char[]> copy(new char[names.size() ? names.size() : 1]);
  if (!names.empty()) std::memcpy(copy.get(), names.data(), names.size());
  std::string_view name = wanted;
  for (std::string_view rest(copy.get(), names.size()); !rest.empty();) {
    const std::string_view expr = rest.substr(0, rest.find('\0'));
    if (expr.size() == rest.size()) broken("a name expression without its NUL passed");
    rest.remove_prefix(expr.size() + 1);
    const std::string_view lowered = rest.substr(0, rest.find('\0'));
    if (lowered.size() == rest.size()) broken("a lowered name without its NUL passed");
    rest.remove_prefix(lowered.size() + 1);
    if (expr == name) {
      name = lowered;
      break;
    }
  }
  if (name.data() == nullptr && !wanted.empty()) broken("a name walked to nothing");
}

void check_decoded(const std::string& payload, const detail::CacheEntry& e) {
  const char* begin = payload.data();
  const char* end = payload.data() + payload.size();
  for (std::string_view f : {e.names, e.log, e.image})
    if (!f.empty() && (f.data() < begin || f.data() + f.size() > end)) broken("a field lies outside the payload");
  if (e.image.data() + e.image.size() != end) broken("the image is not the payload's last field");
  if (e.is_text && (e.image.find('\0') != std::string_view::npos || *end != '\0'))
    broken("PTX passed that is not one NUL-terminated text");
  if (!e.is_text) {
    // The image's own headers, as the driver would read them, over a copy
    // of exactly its size.
    std::unique_ptr<unsigned char[]> copy(new unsigned char[e.image.size()]);
    std::memcpy(copy.get(), e.image.data(), e.image.size());
    const detail::ImageKind kind = detail::image_kind(copy.get(), e.image.size());
    if (kind == detail::ImageKind::ptx || !detail::image_problem(copy.get(), e.image.size(), kind).empty())
      broken("a binary image passed that Module::from_image refuses");
  }
  walk_names(e.names, "saxpy<float>");
  walk_names(e.names, "no such kernel");
}

void decode(const std::string& payload) {
  static const StringList expected{"saxpy<float>", "fill"};
  detail::CacheEntry e;
  if (detail::decode_entry(payload, e).empty()) check_decoded(payload, e);
  detail::CacheEntry f;
  if (detail::decode_entry(payload, f, &expected).empty()) {
    check_decoded(payload, f);
    if (detail::entry_names_problem(f.names, &expected) != "") broken("the names passed, then failed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    decode(std::string(in));
    return 0;
  }
  std::string_view parts[4];
  std::string_view rest = in;
  for (int i = 0; i < 4; ++i) {
    const std::size_t cut = i < 3 ? rest.find('\xff') : std::string_view::npos;
    parts[i] = rest.substr(0, cut);
    rest.remove_prefix(cut == std::string_view::npos ? rest.size() : cut + 1);
  }
  std::string payload = detail::encode_entry({parts[0] == "1", parts[1], parts[2], parts[3]});
  const int change = (data[0] >> 1) & 7;  // 0..3: as encoded; 4, 5: a byte cut; 6, 7: bytes added
  if (change == 4 || change == 5) {
    if (!payload.empty()) payload.pop_back();
  } else if (change >= 6) {
    payload.append(static_cast<std::size_t>(change - 5), '\0');
  }
  decode(payload);
  return 0;
}

#ifdef OXICUDA_FUZZ_LOOP
// A seeded mutation loop, for where libFuzzer is missing: seeds that decode
// (PTX with names, a cubin-shaped image), mutated by bit flips, byte sets,
// inserts, deletes, length fields set to edge values, and splices.
namespace {
std::uint64_t rng = 0x9e3779b97f4a7c15ull;
std::uint64_t next() {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

std::vector<std::string> seeds() {
  std::vector<std::string> s;
  const std::string names = std::string("saxpy<float>\0_Z5saxpyIfEvPT_\0fill\0fill\0", 40);
  std::string elf(128, '\0');
  std::memcpy(elf.data(), "\x7f" "ELF\x02", 5);
  elf[40] = 64;  // section headers at 64
  elf[58] = 32;  // of 32 bytes,
  elf[60] = 2;   // two of them
  s.push_back(std::string(1, '\0') + detail::encode_entry({true, names, "a log", ".version 8.0\n.target sm_90\n"}));
  s.push_back(std::string(1, '\0') + detail::encode_entry({false, names, "", elf}));
  s.push_back(std::string(1, '\0') + detail::encode_entry({true, "", "", ".version 8.0\n"}));
  s.push_back(std::string(1, '\1') + "1\xff" + names + "\xff" + "log\xff" + ".version 8.0\n");
  s.push_back(std::string(1, '\1') + "0\xff" + names + "\xff\xff" + elf);
  return s;
}

void mutate(std::string& s, const std::vector<std::string>& pool) {
  const int n = 1 + static_cast<int>(next() % 4);
  for (int k = 0; k < n; ++k) {
    const std::size_t at = s.empty() ? 0 : next() % s.size();
    switch (next() % 7) {
      case 0:
        if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1 << (next() % 8)));
        break;
      case 1:
        if (!s.empty()) s[at] = static_cast<char>(next());
        break;
      case 2:
        s.insert(at, 1 + next() % 8, static_cast<char>(next()));
        break;
      case 3:
        if (!s.empty()) s.erase(at, 1 + next() % 8);
        break;
      case 4: {  // a length field (8 bytes) set to an edge value
        static const std::uint64_t edges[] = {0, 1, 7, 8, 0x7f, 0xffffffffull, ~0ull, ~0ull - 7, 1ull << 63};
        const std::uint64_t v = next() % 2 ? edges[next() % (sizeof edges / sizeof edges[0])] : next() % 64;
        if (s.size() >= 9) std::memcpy(s.data() + 1 + (next() % (s.size() - 8)), &v, 8);
        break;
      }
      case 5: {  // a splice with another input
        const std::string& o = pool[next() % pool.size()];
        if (!o.empty()) s = s.substr(0, at) + o.substr(next() % o.size());
        break;
      }
      default:
        if (!s.empty()) s[0] = static_cast<char>(next());  // another reading
        break;
    }
  }
}
}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60;
  if (argc > 2) rng = std::strtoull(argv[2], nullptr, 10) | 1;
  std::vector<std::string> pool = seeds();
  const std::size_t seed_count = pool.size();
  unsigned long long executed = 0;
  const std::time_t start = std::time(nullptr);
  for (std::time_t last = start;;) {
    for (int i = 0; i < 4096; ++i) {
      std::string s = pool[next() % pool.size()];
      mutate(s, pool);
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
      ++executed;
      if (next() % 64 == 0) {  // keep some mutants as parents, in a bounded pool
        if (pool.size() < 4096) pool.push_back(std::move(s));
        else pool[seed_count + next() % (pool.size() - seed_count)] = std::move(s);
      }
    }
    const std::time_t now = std::time(nullptr);
    if (now - last >= 60) {
      std::printf("#%llu inputs after %lds\n", executed, static_cast<long>(now - start));
      std::fflush(stdout);
      last = now;
    }
    if (now - start >= seconds) break;
  }
  std::printf("Done: executed %llu inputs in %lds (seeded mutation loop, no crash)\n", executed,
              static_cast<long>(std::time(nullptr) - start));
  return 0;
}
#endif
