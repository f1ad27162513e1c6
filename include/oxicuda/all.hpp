// oxicuda/all.hpp — every part of oxicuda; the modular form of oxicuda.hpp.
#pragma once

// The order is the layering, bottom up (tools/amalgamate.py follows it).
// clang-format off
#include "config.hpp"
#include "ffi.hpp"
#include "loader.hpp"
#include "error.hpp"
#include "callback.hpp"
#include "device.hpp"
#include "context.hpp"
#include "event.hpp"
#include "stream.hpp"
#include "module.hpp"
#include "memory.hpp"
#include "launch.hpp"
// clang-format on
