// oxicuda/graph.hpp — the graph wing: nodes and their kinds, the keep list, Graph; GraphExec; stream capture (into a new graph or one of yours; its state and dependencies while it runs); the graphed step.
//
// Including this header costs this wing's parts and the parts below that they
// use, no more. Its parts include only parts of this wing and of the wings
// below it (core, driver, memory, kernel).
#pragma once

// clang-format off
#include "graph/node.hpp"
#include "graph/keep.hpp"
#include "graph/node_kind.hpp"
#include "graph/node_params.hpp"
#include "graph/add_node.hpp"
#include "graph/dot.hpp"
#include "graph/graph.hpp"
#include "graph/graph_exec.hpp"
#include "graph/capture_into.hpp"
#include "graph/capture.hpp"
#include "graph/capture_info.hpp"
#include "graph/graphed_step.hpp"
// clang-format on
