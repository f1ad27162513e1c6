// oxicuda/core.hpp — the core wing: config; the ABI tables (driver, NVRTC, nvJitLink); one traits type per
// library; the one lazy-library mechanism; the driver loader; NVRTC and nvJitLink loaded; Error; the checked call.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (none: this is the ground).
#pragma once

// clang-format off
#include "core/config.hpp"
#include "core/ffi.hpp"
#include "core/nvrtc_ffi.hpp"
#include "core/nvjitlink_ffi.hpp"
#include "core/traits.hpp"
#include "core/library.hpp"
#include "core/loader.hpp"
#include "core/toolkit.hpp"
#include "core/error.hpp"
#include "core/check.hpp"
// clang-format on
