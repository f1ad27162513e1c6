// oxicuda/graph/node_kind.hpp — CUDA's node kinds (CUgraphNodeType) in one
// traits table: each kind's name in error texts, its driver name, its
// parameters' type, whether a conditional node's body may hold it. From it:
// the body rule and its check, and how an error names a node.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "keep.hpp"

OXICUDA_DETAIL_NAMESPACE_BEGIN

namespace detail {

// One row per node kind, in CUgraphNodeType's order (the way
// cuda-api-wrappers' kind_traits does it): X(kind, name in error texts,
// parameters' type (void: none oxicuda declares), may be in a conditional
// body). The body column is the driver's rule: a body may hold only kernel,
// empty, memset, memcpy, child graph and conditional nodes, and so may a
// child graph in it, at any depth; the driver accepts other nodes there and
// refuses the whole graph at instantiation (CUDA_ERROR_INVALID_VALUE,
// naming no node), so oxicuda refuses them when they are added.
// clang-format off
#define OXICUDA_DETAIL_GRAPH_NODE_KINDS(X)                                                      \
  X(KERNEL,           "kernel",                    ffi::CUDA_KERNEL_NODE_PARAMS_v2,   true)  \
  X(MEMCPY,           "memcpy",                    ffi::CUDA_MEMCPY3D,                true)  \
  X(MEMSET,           "memset",                    ffi::CUDA_MEMSET_NODE_PARAMS,      true)  \
  X(HOST,             "host function",             ffi::CUDA_HOST_NODE_PARAMS,        false) \
  X(GRAPH,            "child graph",               CUgraph,                           true)  \
  X(EMPTY,            "empty",                     void,                              true)  \
  X(WAIT_EVENT,       "event wait",                CUevent,                           false) \
  X(EVENT_RECORD,     "event record",              CUevent,                           false) \
  X(EXT_SEMAS_SIGNAL, "external semaphore signal", void,                              false) \
  X(EXT_SEMAS_WAIT,   "external semaphore wait",   void,                              false) \
  X(MEM_ALLOC,        "mem alloc",                 ffi::CUDA_MEM_ALLOC_NODE_PARAMS,   false) \
  X(MEM_FREE,         "mem free",                  ffi::CUdeviceptr,                  false) \
  X(BATCH_MEM_OP,     "batch memory operation",    void,                              false) \
  X(CONDITIONAL,      "conditional",               ffi::CUDA_CONDITIONAL_NODE_PARAMS, true)
// clang-format on

// A kind's row, as the code that does not know the kind at compile time reads it.
struct NodeKindRow {
  ffi::CUgraphNodeType type;
  const char* name;         // what error texts call it ("host function")
  const char* driver_name;  // its CUgraphNodeType enumerator ("CU_GRAPH_NODE_TYPE_HOST")
  bool in_conditional_body;
};

// A kind's traits: its row, and the type of its parameters.
template <ffi::CUgraphNodeType K>
struct NodeKind;

#define OXICUDA_NODE_KIND(K, NAME, PARAMS, BODY)                                                           \
  template <>                                                                                               \
  struct NodeKind<ffi::CU_GRAPH_NODE_TYPE_##K> {                                                            \
    using params = PARAMS;                                                                                  \
    static constexpr NodeKindRow row{ffi::CU_GRAPH_NODE_TYPE_##K, NAME, "CU_GRAPH_NODE_TYPE_" #K, BODY}; \
  };
OXICUDA_DETAIL_GRAPH_NODE_KINDS(OXICUDA_NODE_KIND)
#undef OXICUDA_NODE_KIND

#define OXICUDA_NODE_KIND_ROW(K, NAME, PARAMS, BODY) NodeKind<ffi::CU_GRAPH_NODE_TYPE_##K>::row,
inline constexpr NodeKindRow node_kinds[] = {OXICUDA_DETAIL_GRAPH_NODE_KINDS(OXICUDA_NODE_KIND_ROW)};
#undef OXICUDA_NODE_KIND_ROW

// The row of kind `t`, or null for a kind the table does not know (a newer driver's).
[[nodiscard]] constexpr const NodeKindRow* node_kind(ffi::CUgraphNodeType t) noexcept {
  const auto i = static_cast<std::size_t>(t);
  return i < sizeof(node_kinds) / sizeof(node_kinds[0]) && node_kinds[i].type == t ? &node_kinds[i] : nullptr;
}

[[nodiscard]] constexpr const char* node_kind_name(ffi::CUgraphNodeType t) noexcept {
  const NodeKindRow* row = node_kind(t);
  return row ? row->name : "other";
}

[[nodiscard]] constexpr bool allowed_in_body(ffi::CUgraphNodeType t) noexcept {
  const NodeKindRow* row = node_kind(t);
  return row && row->in_conditional_body;
}

inline std::string body_rule(std::string_view what) {
  return cat({"a conditional node's body may hold only kernel, empty, memset, memcpy, child graph and conditional "
              "nodes, and so may a child graph in it (the driver's rule: it would accept the node here and refuse "
              "the whole graph at instantiation with CUDA_ERROR_INVALID_VALUE); ",
              what,
              ". Put that work before or after the conditional node, in the graph that holds it"});
}

// The first node of `g`, or of a child graph in it at any depth, that a
// conditional body cannot hold (null when there is none). The bodies of
// conditional nodes in it were checked when their nodes were added.
inline CUgraphNode refused_in_body(CUgraph g, SourceLocation where, int depth = 0) {
  const GraphNodes all = list_nodes(g, [](CUgraph h, CUgraphNode* out, std::size_t* n) {
    return OXICUDA_DRIVER(GraphGetNodes, h, out, n);
  }, where);
  for (const GraphNode& node : all) {
    ffi::CUgraphNodeType t = ffi::CU_GRAPH_NODE_TYPE_EMPTY;
    check(OXICUDA_DRIVER(GraphNodeGetType, node.raw(), &t), where);
    if (!allowed_in_body(t)) return node.raw();
    if (t == ffi::CU_GRAPH_NODE_TYPE_GRAPH && depth < 64) {
      CUgraph child = nullptr;
      check(OXICUDA_DRIVER(GraphChildGraphNodeGetGraph, node.raw(), &child), where);
      if (CUgraphNode inner = refused_in_body(child, where, depth + 1)) return inner;
    }
  }
  return nullptr;
}

// "node 3 of 7 (kernel 'saxpy')": where a node is in its graph and what it
// is, as far as the driver (and the graph's own records) can tell. Never
// throws for a driver failure: it is a part of another error's text.
inline std::string describe_node(CUgraph graph, CUgraphNode node, const KeepList* keep) {
  if (!node) return "no node named by the driver";
  ffi::CUgraphNodeType type = ffi::CU_GRAPH_NODE_TYPE_EMPTY;
  const bool typed = OXICUDA_DRIVER(GraphNodeGetType, node, &type).ok();
  std::string what = typed ? node_kind_name(type) : "of unknown kind";
  if (keep && !keep->kernel_name(node).empty()) what = cat({what, " '", keep->kernel_name(node), "'"});
  std::size_t n = 0;
  std::string at;
  if (graph && OXICUDA_DRIVER(GraphGetNodes, graph, nullptr, &n).ok() && n > 0) {
    const NodeArray all(n);
    if (OXICUDA_DRIVER(GraphGetNodes, graph, all.get(), &n).ok())
      for (std::size_t i = 0; i < n; ++i)
        if (all.get()[i] == node) at = cat({"node ", std::to_string(i), " of ", std::to_string(n), " "});
  }
  return cat({at.empty() ? "a node " : at, "(", what, ")"});
}

// The Error for a node of kind `t` added (by `operation`) to a graph that is
// a conditional node's body, when the body may not hold it.
inline void refuse_in_body(ffi::CUgraphNodeType t, const char* operation, SourceLocation where) {
  if (allowed_in_body(t)) return;
  raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
              body_rule(cat({"this graph is a conditional node's body, so a ", node_kind_name(t),
                             " node cannot be added to it"})),
              where));
}

// The same for a child graph `child` (whose state keeps `keep`) that holds
// such a node, directly or in a child graph of its own.
inline void refuse_child_in_body(CUgraph child, const KeepList* keep, const char* operation, SourceLocation where) {
  if (CUgraphNode refused = refused_in_body(child, where))
    raise(Error(ffi::CUDA_ERROR_NOT_SUPPORTED, operation,
                body_rule(cat({"this graph is a conditional node's body, and the child graph holds ",
                               describe_node(nullptr, refused, keep), ", directly or in a child graph of its own"})),
                where));
}

}  // namespace detail

OXICUDA_DETAIL_NAMESPACE_END
