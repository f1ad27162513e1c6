// oxicuda/compile.hpp — the compile wing: NVRTC programs; nvJitLink (LTO) and cuLink; the kernel cache;
// module_from_source.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core, driver, memory, kernel).
#pragma once

// clang-format off
#include "compile/size_then_fill.hpp"
#include "compile/toolkit_paths.hpp"
#include "compile/program.hpp"
#include "compile/arch.hpp"
#include "compile/device_runtime.hpp"
#include "compile/lto.hpp"
#include "compile/link.hpp"
#include "compile/cache_key.hpp"
#include "compile/cache_dir.hpp"
#include "compile/cache_file.hpp"
#include "compile/cache_evict.hpp"
#include "compile/cache.hpp"
#include "compile/cache_entry.hpp"
#include "compile/source_rules.hpp"
#include "compile/compiler_identity.hpp"
#include "compile/source.hpp"
#include "compile/source_image.hpp"
// clang-format on
