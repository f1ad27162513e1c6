#!/usr/bin/env python3
"""oxicuda.hpp includes nothing but standard and system headers.

  includes.py HEADER

Every #include line must be <name> with name a C++20 standard library header
or one of the platform headers oxicuda needs (<windows.h>; <dlfcn.h> and <unistd.h>, for dlopen and getpid;
<fcntl.h>, <sys/stat.h>, <sys/uio.h> and <dirent.h>, for the kernel cache's files on POSIX
(readv: a hit's header and payload in one read);
<link.h>, for the loaded NVRTC's identity in the cache key: dlinfo, dl_iterate_phdr;
<sys/file.h> and <sys/resource.h>, for the cache's counter lock (flock) and
RLIMIT_FSIZE; <pthread.h>, for pthread_atfork: a forked child's driver table goes
back to its stand-ins);
never "..." (the single header includes nothing of ours, so it works when
fetched alone, e.g. by Compiler Explorer), and never the heavy headers the
design rules out (<iostream>, <regex>, <format>), nor <algorithm>: measured
on top of the typical unit of BENCHMARKS.md's "Include cost", it adds about
250 M g++ instructions to every translation unit (it came back once for one
std::min and took the header from 1.35x to 1.47x).
"""
import re
import sys

STANDARD = set("""
algorithm any array atomic barrier bit bitset charconv chrono codecvt compare complex concepts
condition_variable coroutine deque exception execution filesystem format forward_list fstream functional
future initializer_list iomanip ios iosfwd iostream istream iterator latch limits list locale map memory
memory_resource mutex new numbers numeric optional ostream queue random ranges ratio regex
scoped_allocator semaphore set shared_mutex source_location span sstream stack stdexcept stop_token
streambuf string string_view strstream syncstream system_error thread tuple type_traits typeindex typeinfo
unordered_map unordered_set utility valarray variant vector version
cassert cctype cerrno cfenv cfloat cinttypes climits clocale cmath csetjmp csignal cstdarg cstddef
cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype
""".split())
PLATFORM = {"windows.h", "dlfcn.h", "unistd.h", "fcntl.h", "sys/stat.h", "dirent.h", "link.h", "sys/file.h",
            "sys/resource.h", "sys/uio.h", "pthread.h"}
RULED_OUT = {"iostream", "regex", "format", "algorithm"}
INCLUDE = re.compile(r'^\s*#\s*include\s*(.*?)\s*(//.*)?$')


def main(header):
    problems, seen = [], []
    with open(header, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            name = target[1:-1]
            if not (target.startswith("<") and target.endswith(">")):
                problems.append(f"line {n}: {target} is not a standard or system header")
            elif name in RULED_OUT:
                problems.append(f"line {n}: <{name}> is ruled out (include cost)")
            elif name not in STANDARD | PLATFORM:
                problems.append(f"line {n}: <{name}> is neither a standard header nor one of " + "/".join(sorted(PLATFORM)) + "")
            seen.append(target)
    print(f"{header}: {len(seen)} includes: {' '.join(seen)}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems or not seen else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
