// oxicuda/graph.hpp — the graph wing: Graph and its nodes; GraphExec; stream capture; the graphed step.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core, driver, memory, kernel).
#pragma once

// clang-format off
#include "graph/graph.hpp"
#include "graph/graph_exec.hpp"
#include "graph/capture.hpp"
// clang-format on
