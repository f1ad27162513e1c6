// The fake driver's graphs: graphs made, destroyed, cloned and listed,
// their nodes' kinds and edges, user objects and a DOT picture; the state
// shared with fake_graph_nodes.cpp, fake_graph_exec.cpp and
// fake_graph_capture.cpp (declared in fake_graph.hpp).
#include "fake_graph.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace fake {

std::unordered_map<CUstream, StreamCapture> stream_captures;
std::unordered_map<CUevent, CapturedRecord> captured_records;
std::unordered_map<CUgraphConditionalHandle, Cond> conditionals;
std::set<Capture*> captures;
unsigned long long next_capture_id = 1;
CUgraphConditionalHandle next_handle = 0x100;

namespace {

// User objects whose last reference went: their destructors run (on a
// thread of the driver's, as the driver does) once `mu` is released.
std::vector<UserObject*> dying;

// Runs the destructors of `dying`; called without `mu`.
void run_dying(std::vector<UserObject*> list) {
  for (UserObject* u : list) {
    std::thread([u] {
      in_host_function = true;
      u->destroy(u->ptr);
    }).join();
    delete u;
  }
}

// Destructors held back (fake_hold_user_object_destructors).
bool hold_destructors = false;
std::vector<UserObject*> held_back;

}  // namespace

void release(UserObject* u, long n) {
  u->refs -= n;
  if (u->refs <= 0) {
    live.erase(u);
    dying.push_back(u);
  }
}

Unlocked::~Unlocked() {
  std::vector<UserObject*> list;
  list.swap(dying);
  if (hold_destructors) {
    held_back.insert(held_back.end(), list.begin(), list.end());
    list.clear();
  }
  lock.unlock();
  run_dying(std::move(list));
}

Graph* new_graph() {
  auto* g = new Graph;
  live[g] = Kind::graph;
  return g;
}

void destroy_graph(Graph* g) {
  for (Node* n : g->nodes) {
    for (Graph* inner : n->graphs) destroy_graph(inner);
    live.erase(n);
    delete n;
  }
  for (auto& [u, refs] : g->user_refs) release(u, refs);
  live.erase(g);
  delete g;
}

Node* add_node(Graph* g, const CUgraphNode* deps, std::size_t n, Work&& w) {
  auto* node = new Node;
  node->owner = g;
  node->work = std::move(w);
  for (std::size_t i = 0; i < n; ++i) node->deps.push_back(reinterpret_cast<Node*>(deps[i]));
  g->nodes.push_back(node);
  live[node] = Kind::node;
  return node;
}

// Checks the handles a new node is given.
CUresult check_add(CUgraphNode* out, CUgraph graph, const CUgraphNode* deps, std::size_t n) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  if (n && !deps) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < n; ++i) {
    if (!alive(deps[i], Kind::node)) return CUDA_ERROR_INVALID_VALUE;
    if (reinterpret_cast<Node*>(deps[i])->owner != reinterpret_cast<Graph*>(graph)) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t j = 0; j < i; ++j)
      if (deps[j] == deps[i]) return CUDA_ERROR_INVALID_VALUE;  // as the driver: no duplicate dependency
  }
  return CUDA_SUCCESS;
}

// A deep copy of `g`; `map` receives each node's copy. The copy holds its
// own references to g's user objects.
Graph* copy_graph(const Graph* g, std::unordered_map<const Node*, Node*>& map, bool live_handle) {
  auto* c = new Graph;
  if (live_handle) live[c] = Kind::graph;
  for (const Node* n : g->nodes) {
    auto* m = new Node(*n);
    m->owner = c;
    for (Graph*& inner : m->graphs) {
      std::unordered_map<const Node*, Node*> inner_map;
      inner = copy_graph(inner, inner_map, false);
      inner->parent = c;
    }
    for (std::size_t i = 0; i < m->bodies.size(); ++i) m->bodies[i] = reinterpret_cast<CUgraph>(m->graphs[i]);
    map[n] = m;
    live[m] = Kind::node;
    c->nodes.push_back(m);
  }
  for (Node* m : c->nodes)
    for (Node*& d : m->deps) d = map[d];
  for (auto& [u, refs] : g->user_refs) {
    u->refs += refs;
    c->user_refs[u] += refs;
  }
  return c;
}

// The nodes of `g` in an order that respects every dependency; false when
// there is a cycle (`culprit`: a node on it).
bool topological(const Graph* g, std::vector<Node*>& order, Node*& culprit) {
  std::unordered_map<const Node*, int> state;  // 0 new, 1 visiting, 2 done
  std::function<bool(Node*)> visit = [&](Node* n) {
    if (state[n] == 2) return true;
    if (state[n] == 1) {
      culprit = n;
      return false;
    }
    state[n] = 1;
    for (Node* d : n->deps)
      if (!visit(d)) return false;
    state[n] = 2;
    order.push_back(n);
    return true;
  };
  for (Node* n : g->nodes)
    if (!visit(n)) return false;
  return true;
}

// Whether `g` (or a child graph in it) holds a memory allocation or free
// node. As on the H200 (driver 580.159.04): such a graph cannot be cloned,
// added as a child graph, or instantiated while an exec of it lives; each
// call returns CUDA_ERROR_NOT_SUPPORTED.
bool has_memory_nodes(const Graph* g) {
  for (const Node* n : g->nodes)
    if (n->work.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->work.type == CU_GRAPH_NODE_TYPE_MEM_FREE ||
        (n->work.type == CU_GRAPH_NODE_TYPE_GRAPH && n->child() && has_memory_nodes(n->child())))
      return true;
  return false;
}

namespace {

const char* type_name(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "KERNEL";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "MEMCPY";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "MEMSET";
    case CU_GRAPH_NODE_TYPE_HOST: return "HOST";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "GRAPH";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "WAIT_EVENT";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "EVENT_RECORD";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "MEM_ALLOC";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "MEM_FREE";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "CONDITIONAL";
    default: return "EMPTY";
  }
}

}  // namespace

// Graphs of the user's: a body or child graph (with a parent) is its node's.
long live_graph() {
  long n = 0;
  for (auto& [h, k] : live) n += k == Kind::graph && !static_cast<const Graph*>(h)->parent;
  return n;
}
long live_graph_exec() { return count_live(Kind::graph_exec); }
// User objects with a reference that no graph or exec holds: the user's own
// (a graph's, or an exec's, go with it, also when its destroy is refused).
long live_user_object() {
  std::map<const UserObject*, long> held;
  std::function<void(const Graph*)> count = [&](const Graph* g) {
    for (auto& [u, refs] : g->user_refs) held[u] += refs;
    for (const Node* n : g->nodes)
      if (n->child() && n->work.type == CU_GRAPH_NODE_TYPE_GRAPH) count(n->child());  // a child's copy (bodies are live graphs)
  };
  for (auto& [h, k] : live) {
    if (k == Kind::graph) count(static_cast<const Graph*>(h));
    if (k == Kind::graph_exec) count(static_cast<const Exec*>(h)->graph);
  }
  long n = 0;
  for (auto& [h, k] : live)
    if (k == Kind::user_object) n += static_cast<const UserObject*>(h)->refs > held[static_cast<const UserObject*>(h)];
  return n;
}

}  // namespace fake

using namespace fake;

// --- graphs ----------------------------------------------------------------------

CUresult fake_GraphCreate(CUgraph* out, unsigned int flags) {
  FAKE_ENTRY(GraphCreate);
  if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  *out = reinterpret_cast<CUgraph>(new_graph());
  return CUDA_SUCCESS;
}

CUresult fake_GraphDestroy(CUgraph graph) {
  FAKE_ENTRY(GraphDestroy);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!alive(graph, Kind::graph) || reinterpret_cast<Graph*>(graph)->parent) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A graph a capture is still capturing into (cuStreamBeginCaptureToGraph)
  // may not be destroyed, the driver documents: counted as a bad destroy.
  for (const Capture* c : captures)
    if (c->graph == reinterpret_cast<Graph*>(graph)) {
      ++invalid_destroys;
      return CUDA_ERROR_ILLEGAL_STATE;
    }
  for (auto& [p, kind] : live)
    if (kind == Kind::graph_exec && static_cast<Exec*>(const_cast<void*>(p))->source == reinterpret_cast<Graph*>(graph))
      static_cast<Exec*>(const_cast<void*>(p))->source = nullptr;
  destroy_graph(reinterpret_cast<Graph*>(graph));
  return CUDA_SUCCESS;
}

CUresult fake_GraphClone(CUgraph* out, CUgraph original) {
  FAKE_ENTRY(GraphClone);
  std::lock_guard lock(mu);
  if (!out || !alive(original, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  if (has_memory_nodes(reinterpret_cast<Graph*>(original))) return CUDA_ERROR_NOT_SUPPORTED;
  std::unordered_map<const Node*, Node*> map;
  *out = reinterpret_cast<CUgraph>(copy_graph(reinterpret_cast<Graph*>(original), map, true));
  return CUDA_SUCCESS;
}

CUresult fake_GraphGetNodes(CUgraph graph, CUgraphNode* nodes, std::size_t* count) {
  FAKE_ENTRY(GraphGetNodes);
  std::lock_guard lock(mu);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  // A live graph, or a child graph node's copy (what cuGraphChildGraphNodeGetGraph gives).
  bool known = alive(graph, Kind::graph);
  for (auto it = live.begin(); !known && it != live.end(); ++it)
    known = it->second == Kind::node && static_cast<const Node*>(it->first)->work.type == CU_GRAPH_NODE_TYPE_GRAPH &&
            static_cast<const Node*>(it->first)->child() == reinterpret_cast<Graph*>(graph);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  const auto& all = reinterpret_cast<Graph*>(graph)->nodes;
  if (nodes)
    for (std::size_t i = 0; i < *count && i < all.size(); ++i) nodes[i] = reinterpret_cast<CUgraphNode>(all[i]);
  *count = all.size();
  return CUDA_SUCCESS;
}

CUresult fake_GraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  FAKE_ENTRY(GraphNodeGetType);
  std::lock_guard lock(mu);
  if (!type || !alive(node, Kind::node)) return CUDA_ERROR_INVALID_VALUE;
  *type = reinterpret_cast<Node*>(node)->work.type;
  return CUDA_SUCCESS;
}

// A node's dependencies or dependents, in the order they were made (the
// driver's order is its own; tests compare sets).
static CUresult node_edges(CUgraphNode node, CUgraphNode* out, std::size_t* count, bool dependents) {
  std::lock_guard lock(mu);
  if (!count || !alive(node, Kind::node)) return CUDA_ERROR_INVALID_VALUE;
  const Node* me = reinterpret_cast<Node*>(node);
  std::vector<const Node*> edges;
  if (dependents) {
    for (const Node* n : me->owner->nodes)
      if (std::find(n->deps.begin(), n->deps.end(), me) != n->deps.end()) edges.push_back(n);
  } else {
    edges.assign(me->deps.begin(), me->deps.end());
  }
  if (out)
    for (std::size_t i = 0; i < *count && i < edges.size(); ++i)
      out[i] = reinterpret_cast<CUgraphNode>(const_cast<Node*>(edges[i]));
  *count = edges.size();
  return CUDA_SUCCESS;
}

CUresult fake_GraphNodeGetDependencies(CUgraphNode node, CUgraphNode* deps, std::size_t* count) {
  FAKE_ENTRY(GraphNodeGetDependencies);
  return node_edges(node, deps, count, false);
}

CUresult fake_GraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode* deps, std::size_t* count) {
  FAKE_ENTRY(GraphNodeGetDependentNodes);
  return node_edges(node, deps, count, true);
}

CUresult fake_GraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* out) {
  FAKE_ENTRY(GraphChildGraphNodeGetGraph);
  std::lock_guard lock(mu);
  if (!out || !alive(node, Kind::node)) return CUDA_ERROR_INVALID_VALUE;
  const Node* n = reinterpret_cast<Node*>(node);
  if (n->work.type != CU_GRAPH_NODE_TYPE_GRAPH || !n->child()) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUgraph>(n->child());
  return CUDA_SUCCESS;
}

CUresult fake_GraphAddDependencies(CUgraph graph, const CUgraphNode* from, const CUgraphNode* to, std::size_t n) {
  FAKE_ENTRY(GraphAddDependencies);
  std::lock_guard lock(mu);
  if (!alive(graph, Kind::graph) || (n && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < n; ++i) {
    if (!alive(from[i], Kind::node) || !alive(to[i], Kind::node) || from[i] == to[i]) return CUDA_ERROR_INVALID_VALUE;
    auto* f = reinterpret_cast<Node*>(from[i]);
    auto* t = reinterpret_cast<Node*>(to[i]);
    if (f->owner != reinterpret_cast<Graph*>(graph) || t->owner != f->owner) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(t->deps.begin(), t->deps.end(), f) != t->deps.end()) return CUDA_ERROR_INVALID_VALUE;
  }
  for (std::size_t i = 0; i < n; ++i)
    reinterpret_cast<Node*>(to[i])->deps.push_back(reinterpret_cast<Node*>(from[i]));
  return CUDA_SUCCESS;
}

CUresult fake_GraphDebugDotPrint(CUgraph graph, const char* path, unsigned int flags) {
  FAKE_ENTRY(GraphDebugDotPrint);
  std::lock_guard lock(mu);
  if (!path || !alive(graph, Kind::graph)) return CUDA_ERROR_INVALID_VALUE;
  std::FILE* f = std::fopen(path, "w");
  if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
  std::function<void(const Graph*, int&)> print = [&](const Graph* g, int& id) {
    const int me = id++;
    std::fprintf(f, "subgraph cluster_%d {\nlabel=\"graph_%d\";\n", me, me);
    std::unordered_map<const Node*, std::size_t> index;
    for (std::size_t i = 0; i < g->nodes.size(); ++i) index[g->nodes[i]] = i;
    for (std::size_t i = 0; i < g->nodes.size(); ++i) {
      const Node* n = g->nodes[i];
      std::fprintf(f, "\"graph_%d_node_%zu\"[label=\"%s", me, i, type_name(n->work.type));
      if (n->work.type == CU_GRAPH_NODE_TYPE_KERNEL) std::fprintf(f, "\\n%s", n->work.func->name.c_str());
      if ((flags & CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) && n->work.type == CU_GRAPH_NODE_TYPE_KERNEL)
        std::fprintf(f, "\\ngrid (%u,%u,%u) block (%u,%u,%u)", n->work.grid[0], n->work.grid[1], n->work.grid[2],
                     n->work.block[0], n->work.block[1], n->work.block[2]);
      std::fprintf(f, "\"];\n");
      for (const Node* d : n->deps)
        std::fprintf(f, "\"graph_%d_node_%zu\" -> \"graph_%d_node_%zu\";\n", me, index[d], me, i);
    }
    for (const Node* n : g->nodes)
      for (const Graph* inner : n->graphs) print(inner, id);
    std::fprintf(f, "}\n");
  };
  std::fprintf(f, "digraph dot {\n");
  int id = 0;
  print(reinterpret_cast<Graph*>(graph), id);
  std::fprintf(f, "}\n");
  std::fclose(f);
  return CUDA_SUCCESS;
}

// --- user objects -------------------------------------------------------------------

CUresult fake_UserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned int refs, unsigned int flags) {
  FAKE_ENTRY(UserObjectCreate);
  // As the driver: the flag is required (no destructor synchronization).
  if (!out || !destroy || refs == 0 || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mu);
  auto* u = new UserObject{ptr, destroy, static_cast<long>(refs)};
  live[u] = Kind::user_object;
  *out = reinterpret_cast<CUuserObject>(u);
  return CUDA_SUCCESS;
}

CUresult fake_UserObjectRelease(CUuserObject object, unsigned int count) {
  FAKE_ENTRY(UserObjectRelease);
  std::unique_lock lock(mu);
  Unlocked later{lock};
  if (!alive(object, Kind::user_object)) {
    ++invalid_destroys;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  release(reinterpret_cast<UserObject*>(object), count);
  return CUDA_SUCCESS;
}

CUresult fake_GraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags) {
  FAKE_ENTRY(GraphRetainUserObject);
  std::lock_guard lock(mu);
  if (!alive(graph, Kind::graph) || !alive(object, Kind::user_object) || count == 0 || flags > 1)
    return CUDA_ERROR_INVALID_VALUE;
  auto* u = reinterpret_cast<UserObject*>(object);
  if (flags != CU_GRAPH_USER_OBJECT_MOVE) u->refs += count;  // with MOVE the caller's references pass to the graph
  reinterpret_cast<Graph*>(graph)->user_refs[u] += count;
  return CUDA_SUCCESS;
}

FAKE_EXPORT void fake_hold_user_object_destructors(int hold) {
  std::vector<fake::UserObject*> list;
  {
    std::lock_guard lock(fake::mu);
    fake::hold_destructors = hold != 0;
    if (!hold) list.swap(fake::held_back);
  }
  fake::run_dying(std::move(list));
}
