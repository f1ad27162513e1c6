// oxicuda/all.hpp — every part of oxicuda; the modular form of oxicuda.hpp.
#pragma once

// The wings, bottom up; each wing header lists its parts in order, and
// tools/amalgamate.py follows both. A wing includes only the wings below it.
// clang-format off
#include "core.hpp"
#include "driver.hpp"
#include "memory.hpp"
#include "kernel.hpp"
#include "graph.hpp"
#include "compile.hpp"
// clang-format on
