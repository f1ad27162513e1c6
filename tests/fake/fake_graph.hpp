// The fake driver's graphs, their internal shared state: what
// fake_graph.cpp (graphs, their nodes' lists, user objects, DOT),
// fake_graph_nodes.cpp (adding nodes), fake_graph_exec.cpp (executable
// graphs: instantiate, launch, update, setters) and fake_graph_capture.cpp
// (stream capture) share. Every access holds `mu` unless said otherwise.
#pragma once

#include "fake_state.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fake {

// A mem alloc node's memory (fake_state.hpp's Work holds it).
struct Block {
  void* mem = nullptr;
  std::size_t bytes = 0;
  explicit Block(std::size_t n) : mem(std::calloc(n ? n : 1, 1)), bytes(n) {
    graph_memory_reserve(reinterpret_cast<std::uintptr_t>(mem), n);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block() {
    if (!graph_memory_forget(reinterpret_cast<std::uintptr_t>(mem))) std::free(mem);
  }
};

struct Graph;

struct UserObject {
  void* ptr;
  CUhostFn destroy;
  long refs;
};

struct Node {
  Graph* owner = nullptr;
  Work work;
  std::vector<Node*> deps;
  // The graphs the node owns: a child graph node's copy (one), or a
  // conditional node's bodies (if: then, and else when it has two; while:
  // one; switch: one per value).
  std::vector<Graph*> graphs;
  CUgraphConditionalHandle handle = 0;
  CUgraphConditionalNodeType cond_type = CU_GRAPH_COND_TYPE_IF;
  std::vector<CUgraph> bodies;  // what a conditional node's phGraph_out points at (the driver's array)
  Graph* child() const { return graphs.empty() ? nullptr : graphs[0]; }
};

struct Graph {
  std::vector<Node*> nodes;               // in creation order
  std::map<UserObject*, long> user_refs;  // references this graph holds
  Graph* parent = nullptr;                // a body or child graph's parent (not a live handle of its own)
};

struct Cond {
  unsigned value = 0;
  unsigned default_value = 0;
  bool assign_default = false;
};

struct Exec {
  Graph* graph = nullptr;                             // the exec's own copy
  const Graph* source = nullptr;                      // the graph it was made from, while that lives
  std::unordered_map<const Node*, Node*> from_graph;  // the source graph's nodes -> the copy's
  std::vector<const Node*> sources;                   // the source graph's nodes, in order
  unsigned long long flags = 0;
  bool launched = false;
  // Worked out once, so that a launch allocates nothing (as the driver's, for the hot-path test):
  std::vector<Node*> order;                           // the copy's nodes, dependencies first
  std::vector<CUgraphConditionalHandle> handles;      // the conditional handles its nodes use
};

struct Capture {
  Graph* graph;
  CUstream origin;
  CUstreamCaptureMode mode;
  std::thread::id thread;
  unsigned long long id;
  bool invalidated = false;
  bool into = false;  // into a graph of the caller's (cuStreamBeginCaptureToGraph): never destroyed here
};

struct StreamCapture {
  Capture* capture;
  std::vector<Node*> deps;               // the stream's current tail in the capture graph
  std::vector<CUgraphEdgeData> edges;    // each dependency's edge data (parallel to deps)
};

struct CapturedRecord {
  Capture* capture;
  std::vector<Node*> deps;
  std::vector<CUgraphEdgeData> edges;
};

extern std::unordered_map<CUstream, StreamCapture> stream_captures;
extern std::unordered_map<CUevent, CapturedRecord> captured_records;
extern std::unordered_map<CUgraphConditionalHandle, Cond> conditionals;
extern std::set<Capture*> captures;
extern unsigned long long next_capture_id;
extern CUgraphConditionalHandle next_handle;

// --- fake_graph.cpp

// Drops `n` references to `u`; its destructor runs when the last goes (see Unlocked).
void release(UserObject* u, long n);

struct Unlocked {
  // Releases mu, then runs the destructors that became due under it.
  std::unique_lock<std::mutex>& lock;
  ~Unlocked();
};

Graph* new_graph();
void destroy_graph(Graph* g);
Node* add_node(Graph* g, const CUgraphNode* deps, std::size_t n, Work&& w);
// Checks the handles a new node is given.
CUresult check_add(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n);
// A deep copy of `g`; `map` receives each node's copy. The copy holds its
// own references to g's user objects.
Graph* copy_graph(const Graph* g, std::unordered_map<const Node*, Node*>& map, bool live_handle);
// The nodes of `g` in an order that respects every dependency; false when
// there is a cycle (`culprit`: a node on it).
bool topological(const Graph* g, std::vector<Node*>& order, Node*& culprit);
// Whether `g` (or a child graph in it) holds a memory allocation or free node.
bool has_memory_nodes(const Graph* g);

// --- fake_graph_nodes.cpp: a node's work from its parameters (as the
// cuGraphAdd*Node calls read them; the exec's setters read them alike).
CUresult kernel_work(const CUDA_KERNEL_NODE_PARAMS_v2* p, Work& w);
CUresult memcpy_work(const CUDA_MEMCPY3D* p, Work& w);
CUresult memset_work(const CUDA_MEMSET_NODE_PARAMS* p, Work& w);

}  // namespace fake
