// Interpret(): see simt_interp.h.
#include "simt_interp.h"

#include "amd_matrix_model.h"
#include "tilelang/lowering/gpu/wgmma.h"
#include "wgmma_model.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

namespace tl::gpu::test {
namespace {

using ir::DType;
using ir::Expr;

double Round(double v, DType t) {
  switch (t) {
    case DType::kF64: return v;
    case DType::kF32: return static_cast<float>(v);
    case DType::kF16: return static_cast<double>(static_cast<_Float16>(static_cast<float>(v)));
    case DType::kBF16: {
      float f = static_cast<float>(v);
      uint32_t x;
      std::memcpy(&x, &f, 4);
      x = (x + 0x7fff + ((x >> 16) & 1)) & 0xffff0000u;
      std::memcpy(&f, &x, 4);
      return f;
    }
    case DType::kBool: return v != 0;
    default: {
      const int bits = ir::BitWidth(t);
      int64_t i = static_cast<int64_t>(v);
      if (bits < 64) {
        const uint64_t mask = (uint64_t{1} << bits) - 1;
        uint64_t u = static_cast<uint64_t>(i) & mask;
        if (ir::IsSigned(t) && (u >> (bits - 1))) return static_cast<double>(static_cast<int64_t>(u | ~mask));
        return static_cast<double>(u);
      }
      return static_cast<double>(i);
    }
  }
}

struct Machine {
  const SimtKernel& k;
  std::map<std::string, std::vector<double>>* tensors;
  const std::map<std::string, double>& scalars;
  std::map<std::string, DType> dtypes;  // buffers and params
  std::set<std::string> packed;         // SimtBuffer::packed_pairs (only pair stores and register-A wgmmas)
  std::map<std::string, Space> spaces;
  std::unordered_map<std::string, std::vector<double>> shared;
  std::vector<std::unordered_map<std::string, std::vector<double>>> regs;  // per thread
  std::vector<std::unordered_map<std::string, double>> env;                // per thread
  std::vector<int64_t> block_idx;
  std::string error;
  InterpretOptions options;

  // cp.async per thread: copies of the open group, then closed groups, oldest
  // first. A copy reads its source when issued and lands in shared memory
  // only when a wait completes its group (the latest the hardware may), so
  // reading a stage before waiting for it shows stale data (NaN at first).
  struct PendingCopy {
    std::string dst;
    int64_t index;
    std::vector<double> values;
  };
  std::vector<std::vector<PendingCopy>> open_copies = {};
  std::vector<std::vector<std::vector<PendingCopy>>> copy_groups = {};

  // mbarriers and TMA, modelled from the PTX ISA independently of the
  // printer: a phase completes when its one arrival has happened AND the
  // bytes its expect_tx announced equal the bytes the TMA boxes delivered
  // (the hardware counts whole boxes, zero-filled parts included). The boxes'
  // elements land in shared memory only when a thread's wait observes the
  // phase (the latest the hardware may make them visible), so a missing wait
  // reads stale data (NaN at first), and a phase that cannot complete when
  // every thread waits for it is a deadlock, reported as an error.
  struct Mbar {
    bool init = false;
    int64_t completed = 0;  // phases completed
    int64_t arrivals = 1;   // still needed in the current phase
    int64_t count = 1;      // arrivals per phase (SMbarInit::arrivals)
    int64_t expected = 0, delivered = 0;
    std::vector<PendingCopy> data;                          // current phase's boxes
    std::map<int64_t, std::vector<PendingCopy>> landed;     // completed phase -> boxes not yet visible
  };
  std::map<std::string, std::vector<Mbar>> mbars = {};
  // Shared elements a TMA copy was issued into whose phase no thread has
  // waited for yet (buffer -> element -> copies): the hardware may write
  // them at any time until then, so a read (wgmma operand, load) or a store
  // of one is a race, reported where it happens (a producer that refills a
  // tile before the consumers released it, a consumer that reads it before
  // its phase) -- the landing above models only the latest the bytes may come.
  std::map<std::string, std::map<int64_t, int>> tma_inflight = {};
  void CheckTmaInflight(const std::string& buf, int64_t i, const char* what) {
    if (tma_inflight.empty() || !error.empty()) return;
    auto it = tma_inflight.find(buf);
    if (it == tma_inflight.end() || !it->second.count(i)) return;
    error = std::string(what) + " " + buf + "[" + std::to_string(i) +
            "] while a TMA copy into it is in flight (issued, its phase not yet waited for)";
  }

  // wgmma groups in flight (SWgmma with wait_pending != 0), oldest first. A
  // group runs when a wait_group retires it (the latest the hardware may read
  // its operands and write its accumulator), with the descriptor starts its
  // threads evaluated at issue. Until then a write of any shared element it
  // reads (TMA, cp.async or a store) and any access of its accumulator or of
  // its register operand A is an error: the race the hardware would have, reported where it happens.
  struct WgmmaGroup {
    const SWgmma* n = nullptr;
    size_t base = 0;  // its first thread (a ping-pong consumer warpgroup's own, SWarpRoles::consumer_groups)
    std::vector<int64_t> a_start, b_start;  // [ks * warpgroups + wg]
    std::map<std::string, std::set<int64_t>> reads;  // shared elements it reads
  };
  std::vector<WgmmaGroup> wgmma_groups = {};
  bool wgmma_running = false;

  // Bulk copies shared -> global (SBulkStore) per thread: copies of the open
  // bulk group, then closed groups, oldest first. A copy reads its shared
  // source and writes the tensor only when a wait (SBulkWait, .read or not)
  // completes its group -- the latest the hardware may read the source -- so
  // any write of a source element before that wait (a staging tile reused
  // before the wait) is reported where it happens, and a kernel that ends
  // with groups not waited for is an error (their shared memory is released
  // under them).
  // A TMA tensor store (STmaStore) is one such copy whose source is the box's
  // panel [src_index, src_index + count) and whose elements land at `pairs`
  // (tensor element, source element): the box's elements inside the tensor.
  struct BulkCopy {
    std::string dst, src;
    int64_t dst_index, src_index, count;
    std::vector<std::pair<int64_t, int64_t>> pairs = {};
  };
  std::vector<std::vector<BulkCopy>> bulk_open = {};
  std::vector<std::vector<std::vector<BulkCopy>>> bulk_groups = {};
  void CheckBulkWar(const std::string& buf, int64_t i0, int64_t count, const char* what) {
    for (size_t t = 0; t < bulk_groups.size() && error.empty(); ++t) {
      auto hit = [&](const std::vector<BulkCopy>& g) {
        for (const BulkCopy& c : g) {
          if (c.src == buf && i0 < c.src_index + c.count && c.src_index < i0 + count) return &c;
        }
        return static_cast<const BulkCopy*>(nullptr);
      };
      const BulkCopy* c = hit(bulk_open[t]);
      for (const auto& g : bulk_groups[t]) c = c ? c : hit(g);
      if (c) {
        error = std::string(what) + " writes " + buf + "[" + std::to_string(std::max(i0, c->src_index)) +
                "] while thread " + std::to_string(t) + "'s bulk copy of it to " + c->dst +
                " is pending (no cp.async.bulk.wait_group.read completed its group)";
      }
    }
  }
  void BulkStore(const SBulkStore& n, const std::vector<uint8_t>& mask) {
    const int64_t e = std::max(1, ir::BitWidth(dtypes[n.src]) / 8);
    if (!(spaces.count(n.src) && spaces[n.src] == Space::kShared) || spaces.count(n.dst) || dtypes[n.dst] != dtypes[n.src]) {
      error = "bulk copy " + n.src + " -> " + n.dst + ": not a shared buffer -> global tensor of one dtype";
      return;
    }
    for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
      if (!mask[t]) continue;
      const int64_t d = static_cast<int64_t>(Eval(n.dst_index, t)), si = static_cast<int64_t>(Eval(n.src_index, t));
      const int64_t bytes = static_cast<int64_t>(Eval(n.bytes, t));
      if (bytes <= 0 || bytes % 16 != 0 || (d * e) % 16 != 0 || (si * e) % 16 != 0) {
        error = "bulk copy " + n.src + "[" + std::to_string(si) + "] -> " + n.dst + "[" + std::to_string(d) + "] of " +
                std::to_string(bytes) + " bytes: not 16-byte aligned or not a positive multiple of 16 bytes";
        return;
      }
      const int64_t cnt = bytes / e;
      if (si < 0 || d < 0 || si + cnt > static_cast<int64_t>(Buf(n.src, t).size()) ||
          d + cnt > static_cast<int64_t>(Buf(n.dst, t).size())) {
        error = "bulk copy out of bounds: " + n.src + "[" + std::to_string(si) + "] -> " + n.dst + "[" + std::to_string(d) +
                "] of " + std::to_string(cnt) + " elements";
        return;
      }
      bulk_open[t].push_back({n.dst, n.src, d, si, cnt});
    }
  }
  void BulkWait(int64_t pending, const std::vector<uint8_t>& mask) {
    for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
      if (!mask[t]) continue;
      while (static_cast<int64_t>(bulk_groups[t].size()) > pending) {
        for (const BulkCopy& c : bulk_groups[t].front()) {
          const std::vector<double>& src = Buf(c.src, t);
          std::vector<double>& dst = Buf(c.dst, t);
          if (!c.pairs.empty()) {
            for (const auto& [d, si] : c.pairs) dst.at(static_cast<size_t>(d)) = src.at(static_cast<size_t>(si));
            continue;
          }
          std::copy(src.begin() + c.src_index, src.begin() + c.src_index + c.count, dst.begin() + c.dst_index);
        }
        bulk_groups[t].erase(bulk_groups[t].begin());
      }
    }
  }

  // Warp roles (SWarpRoles): the producer (role 0) and the consumers (role
  // 1) run as two agents on their own OS threads, one at a time (a baton),
  // the producer first, each until it must wait for an mbarrier phase that
  // has not completed; then the other runs. The producer thus runs as far
  // ahead as its waits let it (a missing wait shows as a TMA write into a
  // stage still being read, reported by the checks above), and the block
  // deadlocks -- an error -- when neither can go on. Within a role the
  // threads stay in lockstep; a block barrier inside a role is an error
  // (the other role never reaches it).
  // A cluster of 2 blocks (SimtKernel::cluster; Interpret runs the two
  // blocks as two Machines): the roles of both blocks are four agents (six
  // with consumer groups; agent = rank * per + the block's own agent)
  // sharing one baton, a multicast TMA box lands on the peer's barrier and
  // stage too, an arrival with `peer` counts on the peer's barrier too.
  struct Roles {
    std::mutex mu;
    std::condition_variable cv;
    int turn = -1;
    int n = 2;                  // agents: per (one block) or 2 per (a cluster of 2)
    int per = 2;                // agents a block: 2 (producer, consumers), 3 (consumer_groups 2: producer, wg 0, wg 1)
    bool done[6] = {false, false, false, false, false, false};
    int64_t steps = 0;          // statements any agent executed
    int64_t blocked_at[6] = {-1, -1, -1, -1, -1, -1};  // `steps` when the agent last gave way
  };
  Roles* roles = nullptr;
  int role = -1;              // the role running now (-1: the whole block)
  int agent = -1;             // the agent running now on this block (rank * per + the block's own)
  // SWarpRoles::consumer_groups > 1 (the ping-pong GEMM): each consumer
  // group (a warpgroup of its own tile) is an agent of its own, its wgmma
  // groups retired by its own wait_group only; my_base is the running
  // group's first thread (0 otherwise).
  int64_t ws_groups = 1;
  size_t my_base = 0;
  // With consumer groups as agents their named barriers also block live (a
  // bar.sync gives way until its phase completes): the ping-pong's order
  // barriers are what keeps a warpgroup's mbarrier parity waits exact, so
  // they must hold here too (the replay still checks the counts at the end).
  struct LiveBar {
    int64_t arrived = 0, gen = 0;
  };
  std::map<int64_t, LiveBar> live_bars = {};
  int RoleOf(int me) const {
    const int per = roles ? roles->per : 2, local = me % per;
    return per == 3 ? (local > 0 ? 1 : 0) : local;
  }
  size_t BaseOf(int me) const {
    const int per = roles ? roles->per : 2, local = me % per;
    return per == 3 && local > 0 ? static_cast<size_t>((local - 1) * (ws_consumers / ws_groups)) : 0;
  }

  // Named barriers (SNamedBarrier, bar.sync / bar.arrive id, threads). The
  // threads of a role run in lockstep, so one warp waiting here for another
  // cannot be shown as it happens: each warp's sequence of named-barrier
  // operations is recorded (a warp takes part whole or not at all) and
  // replayed at the block's end with the hardware's semantics
  // (CheckNamedBarriers): a phase of barrier `id` completes when `threads`
  // threads arrived (bar.sync counts as arriving), bar.sync blocks its warp
  // until then. Errors: a deadlock (warps blocked, none can go on), a warp
  // arriving twice in one phase (its arrival ran ahead of the other side:
  // the hardware would count it towards the wrong phase), more arrivals than
  // `threads`, phases with different thread counts, and a phase left partly
  // arrived at the block's end. The replay is run twice, letting the lower
  // and then the higher warps run ahead as far as their barriers allow.
  struct BarOp {
    int64_t id, threads;
    bool arrive;
  };
  std::vector<std::vector<BarOp>> bar_ops = {};  // per warp

  std::string ReplayNamedBarriers(bool low_first) const {
    const size_t W = bar_ops.size();
    std::vector<size_t> pos(W, 0);
    std::vector<int> blocked(W, 0);  // on a bar.sync whose phase has not completed
    struct Phase {
      int64_t threads = 0, arrived = 0;
      std::set<size_t> warps, waiting;
    };
    std::map<int64_t, Phase> bars;
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t n = 0; n < W; ++n) {
        const size_t w = low_first ? n : W - 1 - n;
        while (!blocked[w] && pos[w] < bar_ops[w].size()) {
          const BarOp& op = bar_ops[w][pos[w]++];
          progress = true;
          Phase& p = bars[op.id];
          if (p.arrived > 0 && p.threads != op.threads) {
            return "bar " + std::to_string(op.id) + ": a phase of " + std::to_string(p.threads) + " threads joined by a warp counting " +
                   std::to_string(op.threads);
          }
          if (!p.warps.insert(w).second) {
            return "warp " + std::to_string(w) + " arrives twice in one phase of bar " + std::to_string(op.id) +
                   " (its arrival runs ahead of the other side's)";
          }
          p.threads = op.threads;
          p.arrived += 32;
          if (p.arrived > p.threads) {
            return "bar " + std::to_string(op.id) + ": more than " + std::to_string(p.threads) + " threads arrive in one phase";
          }
          if (p.arrived == p.threads) {
            for (size_t x : p.waiting) blocked[x] = 0;
            p = Phase{};
          } else if (!op.arrive) {
            blocked[w] = 1;
            p.waiting.insert(w);
          }
        }
      }
    }
    for (size_t w = 0; w < W; ++w) {
      if (blocked[w]) {
        const BarOp& op = bar_ops[w][pos[w] - 1];
        return "deadlock: warp " + std::to_string(w) + " waits forever in bar.sync " + std::to_string(op.id) + ", " +
               std::to_string(op.threads) + " (" + std::to_string(bars[op.id].arrived) + " threads arrived)";
      }
    }
    for (const auto& [id, p] : bars) {
      if (p.arrived != 0) {
        return "bar " + std::to_string(id) + " left with " + std::to_string(p.arrived) + " of " + std::to_string(p.threads) +
               " threads arrived at the block's end";
      }
    }
    return "";
  }
  std::string CheckNamedBarriers() const {
    std::string e = ReplayNamedBarriers(true);
    return e.empty() ? ReplayNamedBarriers(false) : e;
  }
  int64_t ws_consumers = 0;   // SWarpRoles::consumers while the roles run
  Machine* peer = nullptr;    // the other block of the cluster

  // The agent after `me` (in turn order) that may make progress: not done,
  // and not blocked since the last statement anyone executed; -1 if none.
  static int NextAgent(const Roles& r, int me) {
    for (int i = 1; i < r.n; ++i) {
      const int a = (me + i) % r.n;
      if (!r.done[a] && r.blocked_at[a] != r.steps) return a;
    }
    return -1;
  }
  // Blocked on a phase: another agent runs. False when none can (all
  // finished, or blocked too with nothing run since they gave way).
  // `eager` (InterpretOptions::eager_roles): giving way at a wait that could
  // go on, so this agent is not counted as blocked.
  bool Yield(bool eager = false) {
    std::unique_lock<std::mutex> l(roles->mu);
    const int me = agent;
    roles->blocked_at[me] = eager ? -1 : roles->steps;
    const int next = NextAgent(*roles, me);
    if (next < 0) return false;
    roles->turn = next;
    roles->cv.notify_all();
    roles->cv.wait(l, [&] { return roles->turn == me; });
    role = RoleOf(me);
    agent = me;
    my_base = BaseOf(me);
    return true;
  }
  void RunRoles(const SWarpRoles& n, const std::vector<uint8_t>& mask) {
    if (roles) {
      error = "warp roles inside warp roles";
      return;
    }
    RunAgents(n, mask, {this});
  }
  // The roles of both blocks of a cluster (this one rank 0, peer rank 1).
  void RunClusterRoles(const SWarpRoles& n, const std::vector<uint8_t>& mask) { RunAgents(n, mask, {this, peer}); }

  // The roles of the blocks `ms` (one, or a cluster's two), each as agents on OS threads sharing one
  // baton: its producer, then its consumers -- or, with consumer_groups 2, each consumer group
  // (threads [0, C/2) and [C/2, C)) as an agent of its own, so the two meet only at mbarriers and
  // named barriers, as on the hardware. Agent a is agent a % per of block a / per.
  void RunAgents(const SWarpRoles& n, const std::vector<uint8_t>& mask, const std::vector<Machine*>& ms) {
    const int64_t groups = n.consumer_groups == 2 && n.consumers % 2 == 0 ? 2 : 1;
    if (n.consumer_groups != 1 && groups != 2) {
      error = "warp roles with " + std::to_string(n.consumer_groups) + " consumer groups";
      return;
    }
    // Per agent of a block: its statements and its threads (producer, then the consumers or each group).
    std::vector<const SBlock*> body = {&n.producer};
    std::vector<std::vector<uint8_t>> masks(1, std::vector<uint8_t>(mask.size(), 0));
    for (int64_t g = 0; g < groups; ++g) {
      body.push_back(&n.consumer);
      masks.emplace_back(mask.size(), 0);
    }
    for (size_t t = 0; t < mask.size(); ++t) {
      const int64_t ti = static_cast<int64_t>(t);
      const size_t a = ti >= n.consumers ? 0 : 1 + static_cast<size_t>(ti / (n.consumers / groups));
      masks[a][t] = mask[t];
    }
    Roles r;
    r.per = static_cast<int>(body.size());
    r.n = r.per * static_cast<int>(ms.size());
    for (Machine* m : ms) {
      m->roles = &r;
      m->ws_consumers = n.consumers;
      m->ws_groups = groups;
      m->live_bars.clear();
    }
    auto run = [&](int me) {
      Machine& m = *ms[static_cast<size_t>(me / r.per)];
      {
        std::unique_lock<std::mutex> l(r.mu);
        r.cv.wait(l, [&] { return r.turn == me; });
        m.role = m.RoleOf(me);
        m.agent = me;
        m.my_base = m.BaseOf(me);
      }
      m.Exec(*body[static_cast<size_t>(me % r.per)], masks[static_cast<size_t>(me % r.per)]);
      std::unique_lock<std::mutex> l(r.mu);
      r.done[me] = true;
      // The next agent not done (blocked or not: it checks its phase again).
      r.turn = -1;
      for (int i = 1; i < r.n; ++i) {
        if (!r.done[(me + i) % r.n]) {
          r.turn = (me + i) % r.n;
          break;
        }
      }
      r.cv.notify_all();
    };
    std::vector<std::thread> agents;
    for (int a = 0; a < r.n; ++a) agents.emplace_back(run, a);
    {
      std::lock_guard<std::mutex> l(r.mu);
      r.turn = 0;
    }
    r.cv.notify_all();
    for (std::thread& t : agents) t.join();
    for (Machine* m : ms) {
      m->roles = nullptr;
      m->role = -1;
      m->agent = -1;
      m->ws_consumers = 0;
      m->ws_groups = 1;
      m->my_base = 0;
    }
  }

  void CheckWgmmaWar(const std::string& buf, int64_t i0, int64_t count, const char* what) {
    CheckBulkWar(buf, i0, count, what);  // every shared write comes here
    for (const WgmmaGroup& g : wgmma_groups) {
      auto it = g.reads.find(buf);
      if (it == g.reads.end()) continue;
      for (int64_t i = i0; i < i0 + count; ++i) {
        if (it->second.count(i) && error.empty()) {
          error = std::string(what) + " writes " + buf + "[" + std::to_string(i) +
                  "] while a wgmma group reading it is in flight (no wait_group retired it)";
          return;
        }
      }
    }
  }

  Mbar* BarAt(const std::string& name, const Expr& index, size_t t) {
    const int64_t i = static_cast<int64_t>(Eval(index, t));
    auto it = mbars.find(name);
    if (it == mbars.end() || i < 0 || i >= static_cast<int64_t>(it->second.size()) || !it->second[i].init) {
      error = "mbarrier " + name + "[" + std::to_string(i) + "] used before initialization";
      return nullptr;
    }
    return &it->second[static_cast<size_t>(i)];
  }
  void MaybeComplete(Mbar& b) {
    if (b.arrivals > 0 || b.expected != b.delivered) return;
    if (!b.data.empty()) b.landed[b.completed] = std::move(b.data);
    b.data.clear();
    ++b.completed;
    b.arrivals = b.count;
    b.expected = b.delivered = 0;
  }
  size_t OneThread(const std::vector<uint8_t>& mask, const char* what) {
    size_t n = 0, who = 0;
    for (size_t t = 0; t < mask.size(); ++t) {
      if (mask[t]) ++n, who = t;
    }
    if (n != 1) error = std::string(what) + " executed by " + std::to_string(n) + " threads (one elected thread)";
    return who;
  }
  // The box of a TMA copy or store (STmaLoad, STmaStore): its one elected
  // thread, tensor map, the tensor's extents and the box's first element.
  struct TmaBox {
    size_t t = 0;
    const TensorMapDesc* m = nullptr;
    const SimtParam* param = nullptr;
    std::vector<int64_t> shape, coord;
    int64_t esize = 1, total = 1;
    // Box element e (row-major over the box): whether it lies inside the tensor, and its row-major index there.
    bool At(int64_t e, int64_t* lin) const {
      const size_t rank = m->box.size();
      std::vector<int64_t> idx(rank);
      bool inside = true;
      for (size_t d = rank; d-- > 0;) {
        idx[d] = coord[d] + e % m->box[d];
        e /= m->box[d];
        inside = inside && idx[d] >= 0 && idx[d] < shape[d];
      }
      *lin = 0;
      for (size_t d = 0; d < rank; ++d) *lin = *lin * shape[d] + idx[d];
      return inside;
    }
  };
  // A shared buffer's byte offset in the block's shared memory (the swizzle
  // and TMA alignment rules are about absolute addresses; the base is
  // 1024-byte aligned, which the printed kernel checks).
  int64_t SharedOffset(const std::string& name) const {
    for (const SimtBuffer& b : k.buffers) {
      if (b.name == name) return b.shared_offset;
    }
    return 0;
  }
  bool Box(int map, const std::vector<Expr>& coords, const std::vector<uint8_t>& mask, const char* what, TmaBox* b) {
    b->t = OneThread(mask, what);
    if (!error.empty()) return false;
    if (map < 0 || static_cast<size_t>(map) >= k.tensor_maps.size()) {
      error = std::string(what) + " names tensor map " + std::to_string(map);
      return false;
    }
    b->m = &k.tensor_maps[static_cast<size_t>(map)];
    b->param = &k.params.at(static_cast<size_t>(b->m->param));
    const size_t rank = b->m->box.size();
    if (coords.size() != rank || b->m->shape.size() != rank) {
      error = std::string(what) + " of rank " + std::to_string(coords.size()) + " on a map of rank " + std::to_string(rank);
      return false;
    }
    for (size_t d = 0; d < rank; ++d) {
      b->shape.push_back(static_cast<int64_t>(Eval(b->m->shape[d], b->t)));
      b->coord.push_back(static_cast<int64_t>(Eval(coords[d], b->t)));
      b->total *= b->m->box[d];
    }
    b->esize = std::max(1, ir::BitWidth(b->param->dtype) / 8);
    return true;
  }

  void TmaLoad(const STmaLoad& n, const std::vector<uint8_t>& mask) {
    TmaBox box;
    if (!Box(n.map, n.coords, mask, "TMA copy", &box)) return;
    const size_t t = box.t;
    const TensorMapDesc& m = *box.m;
    const SimtParam& param = *box.param;
    const int64_t esize = box.esize, total = box.total;
    const int64_t dst0 = static_cast<int64_t>(Eval(n.dst_index, t));
    if ((SharedOffset(n.dst) + dst0 * esize) % std::max<int64_t>(128, SwizzleAtomBytes(m.swizzle)) != 0) {
      error = "TMA destination " + n.dst + "[" + std::to_string(dst0) + "] not aligned";
      return;
    }
    Mbar* bar = BarAt(n.bar, n.bar_index, t);
    if (!bar) return;
    // A stage refilled before any thread waited for its previous contents
    // (a warp-specialized producer that did not wait for the stage's release).
    if (!bar->landed.empty()) {
      error = "TMA copy into " + n.dst + " on " + n.bar + "[" + std::to_string(static_cast<int64_t>(Eval(n.bar_index, t))) +
              "] overwrites a stage whose previous contents no thread has waited for yet";
      return;
    }
    Mbar* pbar = nullptr;  // multicast: the peer's barrier at the same index
    if (n.multicast) {
      const int64_t bi = static_cast<int64_t>(Eval(n.bar_index, t));
      auto it = peer ? peer->mbars.find(n.bar) : decltype(mbars.end()){};
      if (!peer || it == peer->mbars.end() || bi < 0 || bi >= static_cast<int64_t>(it->second.size()) || !it->second[bi].init) {
        error = "multicast TMA copy on " + n.bar + "[" + std::to_string(bi) + "]: " +
                (peer ? "the peer block's barrier is not initialized" : "no cluster");
        return;
      }
      pbar = &it->second[static_cast<size_t>(bi)];
      if (!pbar->landed.empty()) {
        error = "multicast TMA copy into " + n.dst + " on " + n.bar + "[" + std::to_string(bi) +
                "] overwrites a stage of the peer block whose previous contents no thread there has waited for yet";
        return;
      }
    }
    std::vector<double>& src = (*tensors)[param.name];
    for (int64_t e = 0; e < total; ++e) {
      int64_t lin = 0;
      const bool inside = box.At(e, &lin);  // zero outside
      const double v = inside ? src.at(static_cast<size_t>(lin)) : 0.0;
      const int64_t at = dst0 + SwizzleOffset(m.swizzle, e * esize) / esize;
      CheckWgmmaWar(n.dst, at, 1, "TMA copy");
      bar->data.push_back(PendingCopy{n.dst, at, {v}});
      ++tma_inflight[n.dst][at];
      if (pbar) {
        peer->CheckWgmmaWar(n.dst, at, 1, "multicast TMA copy (in the peer block)");
        if (!peer->error.empty() && error.empty()) error = "peer block: " + peer->error;
        pbar->data.push_back(PendingCopy{n.dst, at, {v}});
        ++peer->tma_inflight[n.dst][at];
      }
    }
    bar->expected += n.bytes;  // expect_tx, then the engine's complete_tx
    bar->delivered += total * esize;
    MaybeComplete(*bar);
    if (pbar) {  // the same bytes complete on the peer's barrier (its own expect_tx counts them)
      pbar->delivered += total * esize;
      peer->MaybeComplete(*pbar);
    }
  }

  // STmaStore: box element e (row-major over the box) is read from
  // src[src0 + swizzled(e)] and written to the tensor where it lies inside
  // (the engine clips the rest), when a wait completes the thread's group.
  void TmaStore(const STmaStore& n, const std::vector<uint8_t>& mask) {
    TmaBox box;
    if (!Box(n.map, n.coords, mask, "TMA store", &box)) return;
    const size_t t = box.t;
    const SimtParam& param = *box.param;
    if (!(spaces.count(n.src) && spaces[n.src] == Space::kShared) || dtypes[n.src] != param.dtype) {
      error = "TMA store " + n.src + " -> " + param.name + ": not a shared buffer of the tensor's dtype";
      return;
    }
    const int64_t src0 = static_cast<int64_t>(Eval(n.src_index, t));
    if ((SharedOffset(n.src) + src0 * box.esize) % std::max<int64_t>(128, SwizzleAtomBytes(box.m->swizzle)) != 0) {
      error = "TMA store source " + n.src + "[" + std::to_string(src0) + "] not aligned";
      return;
    }
    if (src0 < 0 || src0 + box.total > static_cast<int64_t>(Buf(n.src, t).size())) {
      error = "TMA store source " + n.src + "[" + std::to_string(src0) + "] + " + std::to_string(box.total) + " out of bounds";
      return;
    }
    BulkCopy c{param.name, n.src, 0, src0, box.total};
    for (int64_t e = 0; e < box.total; ++e) {
      int64_t lin = 0;
      if (box.At(e, &lin)) c.pairs.push_back({lin, src0 + SwizzleOffset(box.m->swizzle, e * box.esize) / box.esize});
    }
    if (c.pairs.empty()) return;  // a box wholly outside the tensor writes nothing
    bulk_open[t].push_back(std::move(c));
  }

  void CopyAsync(const SCopyAsync& n, const std::vector<uint8_t>& mask) {
    const int64_t lanes = n.bytes / std::max(1, ir::BitWidth(dtypes[n.dst]) / 8);
    for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
      if (!mask[t]) continue;
      const int64_t d = static_cast<int64_t>(Eval(n.dst_index, t));
      const bool valid = !n.src_valid || Eval(*n.src_valid, t) != 0;
      CheckWgmmaWar(n.dst, d, lanes, "cp.async");
      PendingCopy c{n.dst, d, std::vector<double>(static_cast<size_t>(lanes), 0.0)};
      if (valid) {
        const int64_t si = static_cast<int64_t>(Eval(n.src_index, t));
        std::vector<double>& src = Buf(n.src, t);
        if (si % lanes != 0 || d % lanes != 0 || si < 0 || si + lanes > static_cast<int64_t>(src.size())) {
          error = "cp.async: source " + n.src + "[" + std::to_string(si) + "] of " + std::to_string(lanes) +
                  " misaligned or out of bounds";
          return;
        }
        for (int64_t i = 0; i < lanes; ++i) c.values[static_cast<size_t>(i)] = src[static_cast<size_t>(si + i)];
      }
      open_copies[t].push_back(std::move(c));
    }
  }
  void AsyncWait(int64_t pending, const std::vector<uint8_t>& mask) {
    for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
      if (!mask[t]) continue;
      while (static_cast<int64_t>(copy_groups[t].size()) > pending) {
        for (const PendingCopy& c : copy_groups[t].front()) {
          std::vector<double>& dst = Buf(c.dst, t);
          if (c.index < 0 || c.index + static_cast<int64_t>(c.values.size()) > static_cast<int64_t>(dst.size())) {
            error = "cp.async: destination " + c.dst + "[" + std::to_string(c.index) + "] out of bounds";
            return;
          }
          std::copy(c.values.begin(), c.values.end(), dst.begin() + c.index);
        }
        copy_groups[t].erase(copy_groups[t].begin());
      }
    }
  }

  std::vector<double>& Buf(const std::string& name, size_t t) {
    if (!wgmma_running) {
      for (const WgmmaGroup& g : wgmma_groups) {
        if (t < g.base || t >= g.base + static_cast<size_t>(128 * g.n->warpgroups)) continue;  // another group's registers
        if (g.n->c == name && error.empty()) {
          error = "accumulator " + name + " accessed while a wgmma group writing it is in flight (no wait_group retired it)";
        }
        if (g.n->a_frag == name && error.empty()) {
          error = "register operand A " + name + " accessed while a wgmma group reading it is in flight (no wait_group retired it)";
        }
      }
    }
    auto sp = spaces.find(name);
    if (sp != spaces.end() && sp->second == Space::kRegister) return regs[t][name];
    if (sp != spaces.end() && sp->second == Space::kShared) return shared[name];
    return (*tensors)[name];
  }

  double Var(const std::string& n, size_t t) {
    auto it = env[t].find(n);
    // tl_tid is the block's thread index unless a let rebinds it (a ping-pong consumer warpgroup's
    // own index, tl_tid - 128, at the start of its body; persistent FlashAttention's opaque re-read).
    if (n == "tl_tid") return it != env[t].end() ? it->second : static_cast<double>(t);
    if (it != env[t].end()) return it->second;
    for (size_t i = 0; i < k.block_vars.size(); ++i) {
      if (k.block_vars[i] == n) return static_cast<double>(block_idx[i]);
    }
    auto s = scalars.find(n);
    if (s != scalars.end()) return s->second;
    error = "unbound name " + n;
    return 0;
  }

  double Eval(const Expr& e, size_t t) {
    switch (ir::Kind(e)) {
      case ir::ExprKind::kIntImm: return static_cast<double>(ir::As<ir::IntImm>(e)->value);
      case ir::ExprKind::kFloatImm: return ir::As<ir::FloatImm>(e)->value;
      case ir::ExprKind::kVarRef: return Var(ir::As<ir::VarRef>(e)->name, t);
      case ir::ExprKind::kLoad: {
        const auto* l = ir::As<ir::Load>(e);
        const int64_t i = static_cast<int64_t>(Eval(l->indices.at(0), t));
        if (packed.count(l->buffer)) {  // only a register-A wgmma reads a packed buffer (simt_ir.h)
          error = "load of the packed register buffer " + l->buffer;
          return 0;
        }
        std::vector<double>& b = Buf(l->buffer, t);
        if (i < 0 || i >= static_cast<int64_t>(b.size())) {
          error = "out-of-bounds load " + l->buffer + "[" + std::to_string(i) + "] (size " + std::to_string(b.size()) + ")";
          return 0;
        }
        CheckTmaInflight(l->buffer, i, "a load of");
        return b[static_cast<size_t>(i)];
      }
      case ir::ExprKind::kUnary: {
        const auto* u = ir::As<ir::Unary>(e);
        const double v = Eval(*u->operand, t);
        if (u->op == ir::UnaryOp::kNeg) return -v;
        if (u->op == ir::UnaryOp::kNot) return v == 0;
        return static_cast<double>(~static_cast<int64_t>(v));
      }
      case ir::ExprKind::kBinary: {
        const auto* b = ir::As<ir::Binary>(e);
        const DType dt = ir::ExprDType(*b->lhs);
        if (b->op == ir::BinaryOp::kAnd) return Eval(*b->lhs, t) != 0 && Eval(*b->rhs, t) != 0;
        if (b->op == ir::BinaryOp::kOr) return Eval(*b->lhs, t) != 0 || Eval(*b->rhs, t) != 0;
        const double x = Eval(*b->lhs, t), y = Eval(*b->rhs, t);
        const bool integer = ir::IsInt(dt) || dt == DType::kBool;
        const int64_t a = static_cast<int64_t>(x), c = static_cast<int64_t>(y);
        double r = 0;
        switch (b->op) {
          case ir::BinaryOp::kAdd: r = x + y; break;
          case ir::BinaryOp::kSub: r = x - y; break;
          case ir::BinaryOp::kMul: r = x * y; break;
          case ir::BinaryOp::kDiv:
            if (!integer) return x / y;
            if (c == 0) return 0;
            r = static_cast<double>(a / c - ((a % c != 0) && ((a < 0) != (c < 0))));
            break;
          case ir::BinaryOp::kMod:
            if (!integer) return std::fmod(x, y);
            if (c == 0) return 0;
            r = static_cast<double>(((a % c) + c) % c);
            break;
          case ir::BinaryOp::kShl: r = static_cast<double>(a << c); break;
          case ir::BinaryOp::kShr: r = static_cast<double>(a >> c); break;
          case ir::BinaryOp::kLt: return x < y;
          case ir::BinaryOp::kLe: return x <= y;
          case ir::BinaryOp::kGt: return x > y;
          case ir::BinaryOp::kGe: return x >= y;
          case ir::BinaryOp::kEq: return x == y;
          case ir::BinaryOp::kNe: return x != y;
          case ir::BinaryOp::kBitAnd: r = static_cast<double>(a & c); break;
          case ir::BinaryOp::kBitXor: r = static_cast<double>(a ^ c); break;
          case ir::BinaryOp::kBitOr: r = static_cast<double>(a | c); break;
          default: break;
        }
        // Carried like the printed code: f16/bf16 in f32, others in their own type.
        return integer ? Round(r, dt) : Round(r, dt == DType::kF64 ? DType::kF64 : DType::kF32);
      }
      case ir::ExprKind::kSelect: {
        const auto* s = ir::As<ir::Select>(e);
        return Eval(*s->cond, t) != 0 ? Eval(*s->true_value, t) : Eval(*s->false_value, t);
      }
      case ir::ExprKind::kCast: {
        const auto* c = ir::As<ir::Cast>(e);
        double v = Eval(*c->value, t);
        if (ir::IsInt(c->dtype)) v = std::trunc(v);
        return Round(v, c->dtype);
      }
      case ir::ExprKind::kCall: {
        const auto* c = ir::As<ir::Call>(e);
        const DType dt = ir::ExprDType(c->args.at(0));
        const double x = Eval(c->args[0], t);
        const double y = c->args.size() > 1 ? Eval(c->args[1], t) : 0;
        const int64_t a = static_cast<int64_t>(x), b = static_cast<int64_t>(y);
        double r = 0;
        switch (c->op) {
          case ir::CallOp::kExp: r = std::exp(x); break;
          case ir::CallOp::kExp2: r = std::exp2(x); break;
          case ir::CallOp::kLog: r = std::log(x); break;
          case ir::CallOp::kLog2: r = std::log2(x); break;
          case ir::CallOp::kSqrt: r = std::sqrt(x); break;
          case ir::CallOp::kRsqrt: r = 1 / std::sqrt(x); break;
          case ir::CallOp::kTanh: r = std::tanh(x); break;
          case ir::CallOp::kSigmoid: r = 1 / (1 + std::exp(-x)); break;
          case ir::CallOp::kAbs: r = std::fabs(x); break;
          case ir::CallOp::kFloor: r = std::floor(x); break;
          case ir::CallOp::kCeil: r = std::ceil(x); break;
          case ir::CallOp::kRound: r = std::nearbyint(x); break;
          case ir::CallOp::kSin: r = std::sin(x); break;
          case ir::CallOp::kCos: r = std::cos(x); break;
          case ir::CallOp::kPow: r = std::pow(x, y); break;
          case ir::CallOp::kMax: r = std::fmax(x, y); break;
          case ir::CallOp::kMin: r = std::fmin(x, y); break;
          case ir::CallOp::kTruncDiv: return b ? static_cast<double>(a / b) : 0;
          case ir::CallOp::kTruncMod: return b ? static_cast<double>(a % b) : 0;
          case ir::CallOp::kCeilDiv: return b ? static_cast<double>(-((-a) / b - (((-a) % b != 0) && ((-a < 0) != (b < 0))))) : 0;
        }
        return ir::IsFloat(dt) ? Round(r, dt == DType::kF64 ? DType::kF64 : DType::kF32) : r;
      }
    }
    return 0;
  }

  // `hi` (a pair store into a packed buffer): also element idx + 1 = hi.
  void Store(const std::string& name, const Expr& idx, const Expr& val, const std::vector<uint8_t>& mask, bool atomic,
             const Expr* hi = nullptr) {
    const DType dt = dtypes.count(name) ? dtypes[name] : DType::kF32;
    const bool reg = spaces.count(name) && spaces[name] == Space::kRegister;
    // Evaluate for every thread first (a statement reads before it writes).
    std::vector<std::pair<int64_t, double>> w(mask.size(), {-1, 0});
    std::vector<double> wh(mask.size(), 0);
    for (size_t t = 0; t < mask.size(); ++t) {
      if (mask[t]) w[t] = {static_cast<int64_t>(Eval(idx, t)), Eval(val, t)};
      if (mask[t] && hi) wh[t] = Eval(*hi, t);
    }
    for (size_t t = 0; t < mask.size(); ++t) {
      if (!mask[t]) continue;
      std::vector<double>& b = Buf(name, t);
      if (!reg) {
        CheckWgmmaWar(name, w[t].first, 1, "a store");
        CheckTmaInflight(name, w[t].first, "a store to");
      }
      if (w[t].first < 0 || w[t].first + (hi ? 1 : 0) >= static_cast<int64_t>(b.size())) {
        error = "out-of-bounds store " + name + "[" + std::to_string(w[t].first) + "] (size " + std::to_string(b.size()) + ")";
        return;
      }
      double& slot = b[static_cast<size_t>(w[t].first)];
      // Registers of f16/bf16 hold rounded f32 values, like the printed code.
      slot = Round(atomic ? slot + w[t].second : w[t].second, dt);
      if (hi) b[static_cast<size_t>(w[t].first) + 1] = Round(wh[t], dt);
    }
  }

  // SStmatrix (simt_ir.h): per warp with any active lane (every lane must
  // be), matrix m's row r -- values[2 m + e] of lanes 4 r + j, j < 4 -- to
  // the 8 elements at the index lane 8 m + r gave (a multiple of 8).
  void Stmatrix(const SStmatrix& n, const std::vector<uint8_t>& mask) {
    const DType dt = dtypes.count(n.buffer) ? dtypes[n.buffer] : DType::kF32;
    if (n.values.size() != 8 || !(dt == DType::kF16 || dt == DType::kBF16) ||
        !(spaces.count(n.buffer) && spaces[n.buffer] == Space::kShared)) {
      error = "stmatrix into " + n.buffer + ": not a shared f16/bf16 buffer, or not 8 values";
      return;
    }
    for (size_t w0 = 0; w0 < mask.size() && error.empty(); w0 += 32) {
      bool any = false, all = w0 + 32 <= mask.size();
      for (size_t t = w0; t < w0 + 32 && t < mask.size(); ++t) any = any || mask[t], all = all && mask[t];
      if (!any) continue;
      if (!all) {
        error = "stmatrix under divergence (warp " + std::to_string(w0 / 32) + ")";
        return;
      }
      // Every lane's values and row address first (a statement reads before it writes).
      std::vector<int64_t> addr(32);
      std::vector<double> val(32 * 8);
      for (size_t l = 0; l < 32; ++l) {
        addr[l] = static_cast<int64_t>(Eval(n.index, w0 + l));
        for (size_t i = 0; i < 8; ++i) val[l * 8 + i] = Round(Eval(n.values[i], w0 + l), dt);
      }
      std::vector<double>& b = Buf(n.buffer, w0);
      for (size_t m = 0; m < 4; ++m) {
        for (size_t r = 0; r < 8; ++r) {
          const int64_t at = addr[8 * m + r];
          if (at % 8 != 0 || at < 0 || at + 8 > static_cast<int64_t>(b.size())) {
            error = "stmatrix: row address " + n.buffer + "[" + std::to_string(at) + "] not 16-byte aligned or out of bounds";
            return;
          }
          CheckWgmmaWar(n.buffer, at, 8, "a stmatrix");
          for (int64_t i = 0; i < 8; ++i) CheckTmaInflight(n.buffer, at + i, "a stmatrix writes");
          for (size_t j = 0; j < 4; ++j) {
            for (size_t e = 0; e < 2; ++e) b[static_cast<size_t>(at) + 2 * j + e] = val[(4 * r + j) * 8 + 2 * m + e];
          }
        }
      }
    }
  }

  // tf32 as cvt.rna.tf32.f32 makes it: 10 mantissa bits, ties away from zero.
  static double Tf32(double v) {
    float f = static_cast<float>(v);
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7f800000u) != 0x7f800000u) x = (x + 0x1000u) & 0xffffe000u;
    std::memcpy(&f, &x, 4);
    return f;
  }

  // SMma per thread, as simt_ir.h defines it (warp-collective: every lane active).
  void Mma(const SMma& n, const std::vector<uint8_t>& mask) {
    const int64_t kk = MmaStepK(n.kind, n.sm75);  // Turing's m16n8k8 / m8n8k16 (SMma::sm75)
    if (n.sm75 && n.kind != MmaKind::kF16 && n.kind != MmaKind::kI8) {
      error = std::string("mma: no sm_75 instruction for ") + MmaKindName(n.kind);
      return;
    }
    for (size_t t = 0; t < mask.size(); ++t) {
      if (!mask[t]) {
        error = "mma under divergence (thread " + std::to_string(t) + " inactive)";
        return;
      }
    }
    for (size_t t = 0; t < mask.size(); ++t) {
      const int64_t w = static_cast<int64_t>(t) / 32, l = static_cast<int64_t>(t) % 32;
      const int64_t wr = w % (n.R / 8), wc = w / (n.R / 8);  // warp grid (simt_ir.h)
      const int64_t ab = static_cast<int64_t>(Eval(n.a_base, t)), bb = static_cast<int64_t>(Eval(n.b_base, t));
      const int64_t k0 = static_cast<int64_t>(Eval(n.k0, t));
      std::vector<double>& A = Buf(n.a, t);
      std::vector<double>& B = Buf(n.b, t);
      std::vector<double>& C = Buf(n.c, t);
      auto at = [&](std::vector<double>& v, int64_t i, const std::string& name) -> double {
        if (i < 0 || i >= static_cast<int64_t>(v.size())) {
          error = "mma: out-of-bounds read " + name + "[" + std::to_string(i) + "]";
          return 0;
        }
        const double x = v[static_cast<size_t>(i)];
        return n.kind == MmaKind::kTF32 ? Tf32(x) : x;
      };
      for (int64_t j = 0; j < n.m_tiles; ++j) {
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t row = (2 * j + h) * n.R + wr * 8 + l / 4;
          for (int64_t nt = 0; nt < n.n_tiles; ++nt) {
            for (int64_t e = 0; e < 2; ++e) {
              const int64_t col = (nt * n.C + wc) * 8 + 2 * (l % 4) + e;
              double sum = 0;
              for (int64_t q = 0; q < kk; ++q) {
                sum += at(A, ab + row * n.a_row_stride + (k0 + q) * n.a_col_stride, n.a) *
                       at(B, bb + (k0 + q) * n.b_k_stride + col * n.b_n_stride, n.b);
              }
              const size_t slot = static_cast<size_t>((2 * j + h) * n.c_col_slots + 2 * nt + e);
              if (slot >= C.size()) {
                error = "mma: accumulator slot " + std::to_string(slot) + " out of range";
                return;
              }
              C[slot] = n.kind == MmaKind::kI8 ? C[slot] + sum : Round(C[slot] + sum, DType::kF32);
            }
          }
        }
      }
      if (!error.empty()) return;
    }
  }

  // Evaluates an amd_matrix.h index expression for thread t with its
  // variables (bound in the thread's environment for the step).
  struct StepVars {
    int64_t w, l, t, n, s, e, p;
  };
  int64_t EvalWith(const Expr& e, size_t th, const StepVars& v) {
    auto& en = env[th];
    en["tl_w"] = static_cast<double>(v.w);
    en["tl_l"] = static_cast<double>(v.l);
    en["tl_t"] = static_cast<double>(v.t);
    en["tl_n"] = static_cast<double>(v.n);
    en["tl_s"] = static_cast<double>(v.s);
    en["tl_e"] = static_cast<double>(v.e);
    en["tl_p"] = static_cast<double>(v.p);
    return static_cast<int64_t>(Eval(e, th));
  }

  // SAmdMma: whole wavefronts through the hardware model (simt_interp.h).
  void AmdMma(const SAmdMma& n, const std::vector<uint8_t>& mask) {
    const int64_t W = MatrixCoreWave(n.core);
    if (static_cast<int64_t>(mask.size()) % W != 0) {
      error = "amd mma: " + std::to_string(mask.size()) + " threads are not whole wavefronts of " + std::to_string(W);
      return;
    }
    for (size_t t = 0; t < mask.size(); ++t) {
      if (!mask[t]) {
        error = "amd mma under divergence (thread " + std::to_string(t) + " inactive)";
        return;
      }
    }
    const std::vector<AmdMatrixInstr> ins = AmdMatrixInstrs(n.core, n.kind, options.mfma_gfx94);
    const Expr ea = AmdOperandA(n, ins[0]), eb = AmdOperandB(n, ins[0]), ec = AmdAccSlot(n);
    const AmdMatrixInstrInfo f = Info(ins[0]);
    const bool exact = n.kind == MmaKind::kI8;
    const int64_t waves = static_cast<int64_t>(mask.size()) / W;
    for (int64_t w = 0; w < waves && error.empty(); ++w) {
      auto thread = [&](int64_t lane) { return static_cast<size_t>(w * W + lane); };
      // The step's bases, as each lane computes them.
      for (int64_t lane = 0; lane < W; ++lane) {
        const size_t th = thread(lane);
        const double ab = Eval(n.a_base, th), bb = Eval(n.b_base, th), k0 = Eval(n.k0, th);
        env[th]["tl_ab"] = ab;
        env[th]["tl_bb"] = bb;
        env[th]["tl_k0"] = k0;
      }
      auto vars = [&](int64_t lane, int64_t t, int64_t nt, int64_t s, int64_t e, int64_t p) {
        return StepVars{w, lane, t, nt, s, e, p};
      };
      auto read = [&](const std::string& buf, int64_t idx, size_t th) -> double {
        std::vector<double>& v = Buf(buf, th);
        if (idx < 0 || idx >= static_cast<int64_t>(v.size())) {
          error = "amd mma: out-of-bounds read " + buf + "[" + std::to_string(idx) + "]";
          return 0;
        }
        return v[static_cast<size_t>(idx)];
      };
      for (int64_t t = 0; t < n.m_tiles && error.empty(); ++t) {
        for (int64_t nt = 0; nt < n.n_tiles && error.empty(); ++nt) {
          // The lanes' accumulator registers -> D[i][j] (hardware placement).
          double D[16][16];
          for (int i = 0; i < 16; ++i) {
            for (int j = 0; j < 16; ++j) {
              const HwSlot h = HwD(ins[0], i, j);
              if (h.index >= f.regs || h.lane >= W) {
                error = "amd mma model: D register out of range";
                return;
              }
              const int64_t slot = EvalWith(ec, thread(h.lane), vars(h.lane, t, nt, 0, 0, h.index));
              D[i][j] = read(n.c, slot, thread(h.lane));
            }
          }
          for (size_t s = 0; s < ins.size() && error.empty(); ++s) {
            const int kk = static_cast<int>(f.k);
            std::vector<std::vector<double>> A(16, std::vector<double>(kk)), B(kk, std::vector<double>(16));
            // Each hardware element from every lane that holds it: they must agree.
            for (int i = 0; i < 16 && error.empty(); ++i) {
              for (int k = 0; k < kk && error.empty(); ++k) {
                bool first = true;
                for (const HwSlot& h : HwA(ins[s], i, k)) {
                  const double v = read(n.a, EvalWith(ea, thread(h.lane), vars(h.lane, t, nt, s, h.index, 0)), thread(h.lane));
                  if (!first && !(v == A[i][k] || (std::isnan(v) && std::isnan(A[i][k])))) {
                    error = "amd mma: lanes holding A[" + std::to_string(i) + "][" + std::to_string(k) + "] disagree";
                  }
                  A[i][k] = v;
                  first = false;
                }
                first = true;
                for (const HwSlot& h : HwB(ins[s], k, i)) {  // B[k][j] with j = i
                  const double v = read(n.b, EvalWith(eb, thread(h.lane), vars(h.lane, t, nt, s, h.index, 0)), thread(h.lane));
                  if (!first && !(v == B[k][i] || (std::isnan(v) && std::isnan(B[k][i])))) {
                    error = "amd mma: lanes holding B[" + std::to_string(k) + "][" + std::to_string(i) + "] disagree";
                  }
                  B[k][i] = v;
                  first = false;
                }
              }
            }
            for (int i = 0; i < 16; ++i) {
              for (int j = 0; j < 16; ++j) {
                double sum = 0;
                for (int k = 0; k < kk; ++k) sum += A[i][k] * B[k][j];
                D[i][j] = exact ? D[i][j] + sum : Round(D[i][j] + sum, DType::kF32);
              }
            }
          }
          for (int i = 0; i < 16; ++i) {
            for (int j = 0; j < 16; ++j) {
              const HwSlot h = HwD(ins[0], i, j);
              const int64_t slot = EvalWith(ec, thread(h.lane), vars(h.lane, t, nt, 0, 0, h.index));
              std::vector<double>& C = Buf(n.c, thread(h.lane));
              if (slot < 0 || slot >= static_cast<int64_t>(C.size())) {
                error = "amd mma: accumulator slot " + std::to_string(slot) + " out of range";
                return;
              }
              C[static_cast<size_t>(slot)] = D[i][j];
            }
          }
        }
      }
      for (int64_t lane = 0; lane < W; ++lane) {
        for (const char* v : {"tl_w", "tl_l", "tl_t", "tl_n", "tl_s", "tl_e", "tl_p", "tl_ab", "tl_bb", "tl_k0"}) {
          env[thread(lane)].erase(v);
        }
      }
    }
  }

  // SWgmma: per warpgroup, the descriptors (wgmma.h's encoder, then
  // decoded by wgmma_model.h) give every operand element's shared byte,
  // which is mapped back to (buffer, element) through the buffers' shared
  // offsets; D is gathered from and scattered to the lanes' registers by
  // the PTX ISA's D fragment (row 16 wi + 8 ((i / 2) % 2) + l / 4, column
  // 8 (i / 4) + 2 (l % 4) + i % 2 of register i).
  void Wgmma(const SWgmma& n, const std::vector<uint8_t>& mask) {
    // Every thread of its warpgroups; under warp roles the threads past them
    // (the producer warpgroup) are not.
    // (A ping-pong consumer group, SWarpRoles::consumer_groups: its own warpgroups from my_base.)
    const size_t wg_threads = static_cast<size_t>(128 * n.warpgroups), base = roles ? my_base : 0;
    for (size_t t = 0; t < mask.size(); ++t) {
      if (!mask[t] && t >= base && t < base + wg_threads) {
        error = "wgmma under divergence (thread " + std::to_string(t) + " inactive)";
        return;
      }
      if (mask[t] && (t < base || t >= base + wg_threads)) {
        error = "wgmma executed by thread " + std::to_string(t) + ", outside its " + std::to_string(n.warpgroups) + " warpgroups";
        return;
      }
    }
    if (static_cast<int64_t>(mask.size()) < 128 * n.warpgroups || (static_cast<int64_t>(mask.size()) != 128 * n.warpgroups && !roles) ||
        n.n % 8 != 0 || n.n > 256) {
      error = "wgmma: " + std::to_string(mask.size()) + " threads for " + std::to_string(n.warpgroups) +
              " warpgroups, n = " + std::to_string(n.n);
      return;
    }
    const bool ra = !n.a_frag.empty();
    if ((!ra && n.a.starts.size() != static_cast<size_t>(n.k_steps)) || n.b.starts.size() != static_cast<size_t>(n.k_steps)) {
      error = "wgmma: operand starts do not match k_steps";
      return;
    }
    bool pairs_ok = true;  // a packed operand: every register is one (2j, 2j + 1) pair
    for (size_t i = 0; ra && packed.count(n.a_frag) && i + 1 < n.a_slots.size(); i += 2) {
      pairs_ok = pairs_ok && n.a_slots[i] % 2 == 0 && n.a_slots[i + 1] == n.a_slots[i] + 1;
    }
    if (ra && (n.kind == MmaKind::kI8 || !pairs_ok ||
               n.a_slots.size() != static_cast<size_t>(n.k_steps * n.m_tiles * 8))) {
      error = "wgmma: register operand A " + n.a_frag + " with " + std::to_string(n.a_slots.size()) + " slots, wait_group " +
              std::to_string(n.wait_pending);
      return;
    }
    if (n.wait_pending < -1 || n.wait_pending > 7) {
      error = "wgmma: wait_group " + std::to_string(n.wait_pending);
      return;
    }
    // The descriptors' starts as the threads evaluate them at issue.
    WgmmaGroup g;
    g.n = &n;
    g.base = base;
    for (int64_t ks = 0; ks < n.k_steps; ++ks)
    for (int64_t wg = 0; wg < n.warpgroups; ++wg) {
      const size_t t0 = base + static_cast<size_t>(wg * 128);
      const Expr& sb = n.b.starts[static_cast<size_t>(ks)];
      const Expr& sa = n.a_frag.empty() ? n.a.starts[static_cast<size_t>(ks)] : sb;  // register A: no descriptor
      const int64_t a_start = static_cast<int64_t>(Eval(sa, t0)), b_start = static_cast<int64_t>(Eval(sb, t0));
      for (size_t t = t0; t < t0 + 128; ++t) {  // warpgroup-uniform operands
        if (Eval(sa, t) != a_start || Eval(sb, t) != b_start) {
          error = "wgmma: descriptor starts differ between lanes of a warpgroup";
          return;
        }
      }
      g.a_start.push_back(a_start);
      g.b_start.push_back(b_start);
    }
    // In flight until a wait retires it: its operands are read, its accumulator written then.
    WgmmaRun(&g, true);
    if (!error.empty()) return;
    wgmma_groups.push_back(std::move(g));
    if (n.wait_pending >= 0) WgmmaRetire(n.wait_pending);  // -1: in flight until an SWgmmaWait
  }
  // wait_group `pending`: run the oldest groups until at most `pending` remain.
  // (Ping-pong consumer groups: only the running group's own, oldest first.)
  void WgmmaRetire(int64_t pending) {
    const size_t base = roles ? my_base : 0;
    auto mine = [&] {
      int64_t n = 0;
      for (const WgmmaGroup& g : wgmma_groups) n += g.base == base;
      return n;
    };
    while (mine() > pending && error.empty()) {
      auto it = std::find_if(wgmma_groups.begin(), wgmma_groups.end(), [&](const WgmmaGroup& g) { return g.base == base; });
      WgmmaGroup g = std::move(*it);
      wgmma_groups.erase(it);
      wgmma_running = true;
      WgmmaRun(&g, false);
      wgmma_running = false;
    }
  }
  // One group: with `dry`, only records the shared elements it reads.
  void WgmmaRun(WgmmaGroup* g, bool dry) {
    const SWgmma& n = *g->n;
    // Shared byte -> operand value, only inside the operand's own buffer.
    auto read = [&](const SWgmmaOperand& op, uint32_t byte) -> double {
      const SimtBuffer* b = nullptr;
      for (const SimtBuffer& x : k.buffers) {
        if (x.name == op.buffer) b = &x;
      }
      const int64_t e = std::max(1, ir::BitWidth(b ? b->dtype : DType::kF16) / 8);
      const int64_t rel = static_cast<int64_t>(byte) - (b ? b->shared_offset : 0);
      if (!b || b->space != Space::kShared || rel < 0 || rel % e != 0 || rel / e >= b->elements) {
        error = "wgmma: descriptor of " + op.buffer + " reaches shared byte " + std::to_string(byte) + " outside it";
        return 0;
      }
      if (dry) {
        g->reads[op.buffer].insert(rel / e);
        CheckTmaInflight(op.buffer, rel / e, "wgmma reads");
      }
      return shared[op.buffer][static_cast<size_t>(rel / e)];
    };
    for (int64_t ks = 0; ks < n.k_steps && error.empty(); ++ks)
    for (int64_t wg = 0; wg < n.warpgroups && error.empty(); ++wg) {
      const size_t t0 = g->base + static_cast<size_t>(wg * 128);
      const size_t at = static_cast<size_t>(ks * n.warpgroups + wg);
      const int64_t a_start = g->a_start[at], b_start = g->b_start[at];
      for (int64_t j = 0; j < n.m_tiles && error.empty(); ++j) {
        const int64_t qa = j * n.warpgroups + wg;
        const bool ra = !n.a_frag.empty();
        const WgmmaDescFields da = ra ? WgmmaDescFields{} : DecodeWgmmaDesc(
            WgmmaDescriptor(static_cast<uint32_t>(a_start + qa * n.a.tile_bytes), n.a.lbo, n.a.sbo, n.a.swizzle));
        for (int64_t q = 0; q < n.n_tiles && error.empty(); ++q) {
          const WgmmaDescFields db = DecodeWgmmaDesc(
              WgmmaDescriptor(static_cast<uint32_t>(b_start + q * n.b.tile_bytes), n.b.lbo, n.b.sbo, n.b.swizzle));
          if ((!ra && da.base_offset != 0) || db.base_offset != 0) {
            error = "wgmma: nonzero descriptor base offset";
            return;
          }
          // The instruction's k: 16 16-bit elements, or 32 s8 (always 32 bytes of a K-major row).
          const bool i8 = n.kind == MmaKind::kI8;
          const uint32_t KK = i8 ? 32 : 16, eb = i8 ? 1 : 2;
          std::vector<double> A(64 * KK), B(KK * static_cast<size_t>(n.n));
          if (ra) {
            // Register A: each lane's four .b32 registers (the fragment slots the
            // lowering named) placed by the ISA's A fragment (wgmma_model.h),
            // each element rounded to the operand type as the packing cvt does.
            std::vector<int> seen(64 * KK, 0);
            for (int64_t tw = 0; tw < 128; ++tw) {
              const std::vector<double>& R = Buf(n.a_frag, t0 + static_cast<size_t>(tw));
              for (uint32_t r = 0; r < 4; ++r) {
                for (uint32_t h = 0; h < 2; ++h) {
                  const size_t slot = static_cast<size_t>(n.a_slots[static_cast<size_t>(((ks * n.m_tiles + j) * 4 + r) * 2 + h)]);
                  uint32_t row = 0, col = 0;
                  WgmmaARegisterElement(static_cast<uint32_t>(tw), r, h, &row, &col);
                  if (slot >= R.size()) {
                    error = "wgmma: register operand A slot " + std::to_string(slot) + " out of range";
                    return;
                  }
                  A[row * KK + col] = Round(R[slot], n.kind == MmaKind::kF16 ? DType::kF16 : DType::kBF16);
                  ++seen[row * KK + col];
                }
              }
            }
            for (int c : seen) {
              if (c != 1 && error.empty()) error = "wgmma: the register A fragment model does not cover the 64x16 tile once";
            }
          } else {
            for (uint32_t x = 0; x < 64; ++x) {
              for (uint32_t kk = 0; kk < KK; ++kk) A[x * KK + kk] = read(n.a, WgmmaElementByte(da, n.a.mn_major, eb, x, kk));
            }
          }
          for (uint32_t kk = 0; kk < KK; ++kk) {
            for (uint32_t x = 0; x < static_cast<uint32_t>(n.n); ++x) {
              B[kk * n.n + x] = read(n.b, WgmmaElementByte(db, n.b.mn_major, eb, x, kk));
            }
          }
          if (!error.empty() || dry) continue;
          for (int64_t tw = 0; tw < 128; ++tw) {
            const int64_t wi = tw / 32, l = tw % 32;
            std::vector<double>& C = Buf(n.c, t0 + static_cast<size_t>(tw));
            for (int64_t i = 0; i < n.n / 2; ++i) {
              const int64_t row = 16 * wi + 8 * ((i / 2) % 2) + l / 4, col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
              const size_t slot = static_cast<size_t>((2 * j + (i / 2) % 2) * n.c_col_slots + 2 * (q * n.n / 8 + i / 4) + i % 2);
              if (slot >= C.size()) {
                error = "wgmma: accumulator slot " + std::to_string(slot) + " out of range";
                return;
              }
              double sum = 0;
              for (int64_t kk = 0; kk < KK; ++kk) sum += A[static_cast<size_t>(row * KK + kk)] * B[static_cast<size_t>(kk * n.n + col)];
              const double d = n.zero_init && ks == 0 ? 0.0 : C[slot];  // scale-d = 0: the accumulator is not read
              C[slot] = i8 ? d + sum : Round(d + sum, DType::kF32);
            }
          }
        }
      }
    }
  }

  void Exec(const SBlock& block, const std::vector<uint8_t>& mask) {
    for (const SStmt& s : block) {
      if (!error.empty()) return;
      bool any = false;
      for (uint8_t m : mask) any = any || m;
      if (!any) return;
      if (roles) ++roles->steps;
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, SLet> || std::is_same_v<T, SVar>) {
              std::vector<double> v(mask.size());
              for (size_t t = 0; t < mask.size(); ++t) {
                if (!mask[t]) continue;
                if constexpr (std::is_same_v<T, SLet>) v[t] = Eval(n.value, t);
                else v[t] = n.init ? Round(Eval(*n.init, t), n.dtype) : 0;
              }
              for (size_t t = 0; t < mask.size(); ++t) {
                if (mask[t]) env[t][n.name] = v[t];
              }
              if constexpr (std::is_same_v<T, SVar>) dtypes[n.name] = n.dtype;
            } else if constexpr (std::is_same_v<T, SAssign>) {
              const DType dt = dtypes.count(n.name) ? dtypes[n.name] : DType::kF32;
              std::vector<double> v(mask.size());
              for (size_t t = 0; t < mask.size(); ++t) {
                if (mask[t]) v[t] = Round(Eval(n.value, t), dt);
              }
              for (size_t t = 0; t < mask.size(); ++t) {
                if (mask[t]) env[t][n.name] = v[t];
              }
            } else if constexpr (std::is_same_v<T, SStore>) {
              if (n.hi || packed.count(n.buffer)) {
                // A pair store (simt_ir.h): register j of a packed buffer is elements 2j and 2j + 1,
                // each rounded once to the dtype (Store rounds as a 16-bit register does).
                if (!n.hi || !packed.count(n.buffer)) {
                  error = (n.hi ? "pair store into the unpacked buffer " : "single-element store into the packed buffer ") +
                          n.buffer;
                  return;
                }
                const Expr lo = ir::MakeBinary(ir::BinaryOp::kMul, n.index, ir::MakeInt(2));
                // Both halves are evaluated before either is written (one statement).
                Store(n.buffer, lo, n.value, mask, false, n.hi ? &*n.hi : nullptr);
              } else {
                Store(n.buffer, n.index, n.value, mask, false);
              }
            } else if constexpr (std::is_same_v<T, SAtomicAdd>) {
              Store(n.buffer, n.index, n.value, mask, true);
              for (size_t i = 0; i < n.more.size(); ++i) {  // a vector atomic: element by element
                Store(n.buffer, ir::MakeBinary(ir::BinaryOp::kAdd, n.index, ir::MakeInt(static_cast<int64_t>(i) + 1)),
                      n.more[i], mask, true);
              }
            } else if constexpr (std::is_same_v<T, SFor>) {
              const DType dt = ir::ExprDType(n.start);
              std::vector<uint8_t> live = mask;
              for (size_t t = 0; t < mask.size(); ++t) {
                if (mask[t]) env[t][n.var] = Eval(n.start, t);
              }
              for (;;) {
                bool any_live = false;
                for (size_t t = 0; t < mask.size(); ++t) {
                  if (!live[t]) continue;
                  const double step = Eval(n.step, t);
                  const double stop = Eval(n.stop, t);
                  const double v = env[t][n.var];
                  live[t] = step < 0 ? v > stop : v < stop;
                  any_live = any_live || live[t];
                }
                if (!any_live || !error.empty()) break;
                Exec(n.body, live);
                for (size_t t = 0; t < mask.size(); ++t) {
                  if (live[t]) env[t][n.var] = Round(env[t][n.var] + Eval(n.step, t), dt);
                }
              }
            } else if constexpr (std::is_same_v<T, SIf>) {
              std::vector<uint8_t> a(mask.size()), b(mask.size());
              for (size_t t = 0; t < mask.size(); ++t) {
                if (!mask[t]) continue;
                const bool c = Eval(n.cond, t) != 0;
                a[t] = c;
                b[t] = !c;
              }
              Exec(n.then_body, a);
              Exec(n.else_body, b);
            } else if constexpr (std::is_same_v<T, SLaneReduce>) {
              std::vector<double> v(mask.size());
              for (size_t t = 0; t < mask.size(); ++t) v[t] = mask[t] ? env[t][n.var] : 0;
              for (int64_t o = n.width / 2; o > 0; o /= 2) {
                std::vector<double> nv = v;
                for (size_t t = 0; t < mask.size(); ++t) {
                  if (!mask[t]) continue;
                  const size_t p = t ^ static_cast<size_t>(o);
                  if (p >= mask.size() || !mask[p]) {
                    error = "lane_reduce partner lane inactive";
                    return;
                  }
                  const double x = v[t], y = v[p];
                  nv[t] = n.op == ir::ReduceOp::kMax ? std::fmax(x, y) : n.op == ir::ReduceOp::kMin ? std::fmin(x, y) : x + y;
                  nv[t] = Round(nv[t], n.dtype);
                }
                v = nv;
              }
              for (size_t t = 0; t < mask.size(); ++t) {
                if (mask[t]) env[t][n.var] = v[t];
              }
            }
            if constexpr (std::is_same_v<T, SStmatrix>) Stmatrix(n, mask);
            if constexpr (std::is_same_v<T, SMma>) Mma(n, mask);
            if constexpr (std::is_same_v<T, SCopyAsync>) CopyAsync(n, mask);
            if constexpr (std::is_same_v<T, SAsyncWait>) AsyncWait(n.pending, mask);
            if constexpr (std::is_same_v<T, SAsyncCommit>) {
              for (size_t t = 0; t < mask.size(); ++t) {
                if (!mask[t]) continue;
                copy_groups[t].push_back(std::move(open_copies[t]));
                open_copies[t].clear();
              }
            }
            if constexpr (std::is_same_v<T, SAmdMma>) AmdMma(n, mask);
            if constexpr (std::is_same_v<T, SWgmma>) Wgmma(n, mask);
            if constexpr (std::is_same_v<T, SWgmmaWait>) {
              // The consumers under warp roles (a ping-pong consumer group: its own threads).
              const size_t lo = roles ? my_base : 0,
                           all = roles ? (ws_groups > 1 ? my_base + static_cast<size_t>(ws_consumers / ws_groups)
                                                        : static_cast<size_t>(ws_consumers))
                                       : mask.size();
              for (size_t t = lo; t < mask.size(); ++t) {
                if (!mask[t] && t < all && error.empty()) error = "wgmma.wait_group under divergence (thread " + std::to_string(t) + " inactive)";
              }
              WgmmaRetire(n.pending);
            }
            if constexpr (std::is_same_v<T, SCallExtern>) {
              // External (T.import_source) code is opaque here: say so instead of skipping it.
              error = "extern call " + n.name + ": the SIMT interpreter cannot run T.import_source code (only the GPU can)";
              return;
            }
            if constexpr (std::is_same_v<T, SMbarInit>) {
              std::vector<Mbar>& v = mbars[n.bar];
              v.assign(static_cast<size_t>(n.count), Mbar{});
              for (Mbar& b : v) {
                b.init = true;
                b.arrivals = b.count = n.arrivals;
              }
            }
            if constexpr (std::is_same_v<T, STmaLoad>) TmaLoad(n, mask);
            if constexpr (std::is_same_v<T, SMbarArrive>) {
              for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
                if (!mask[t] || (!n.each_thread && t != OneThread(mask, "mbarrier arrive"))) continue;
                Mbar* b = error.empty() ? BarAt(n.bar, n.index, t) : nullptr;
                if (!b) break;
                if (b->arrivals <= 0) {
                  error = "mbarrier " + n.bar + " arrived on more often than its count";
                  break;
                }
                --b->arrivals;
                MaybeComplete(*b);
                if (n.peer) {  // the same barrier in the other block of the cluster
                  const int64_t bi = static_cast<int64_t>(Eval(n.index, t));
                  auto it = peer ? peer->mbars.find(n.bar) : decltype(mbars.end()){};
                  if (!peer || it == peer->mbars.end() || bi < 0 || bi >= static_cast<int64_t>(it->second.size()) ||
                      !it->second[bi].init) {
                    error = "arrival on the peer's " + n.bar + "[" + std::to_string(bi) + "]: " +
                            (peer ? "not initialized" : "no cluster");
                    break;
                  }
                  Mbar& pb = it->second[static_cast<size_t>(bi)];
                  if (pb.arrivals <= 0) {
                    error = "the peer's mbarrier " + n.bar + " arrived on more often than its count (an arrival a phase ahead)";
                    break;
                  }
                  --pb.arrivals;
                  peer->MaybeComplete(pb);
                }
              }
            }
            if constexpr (std::is_same_v<T, SWarpRoles>) RunRoles(n, mask);
            if constexpr (std::is_same_v<T, SSetMaxNReg>) {
              // Warpgroup-collective: a warpgroup's threads all execute it or none does.
              for (size_t t0 = 0; t0 < mask.size() && error.empty(); t0 += 128) {
                size_t on = 0;
                for (size_t t = t0; t < std::min(mask.size(), t0 + 128); ++t) on += mask[t];
                if (on != 0 && on != 128) error = "setmaxnreg executed by " + std::to_string(on) + " threads of a warpgroup";
              }
              if (n.regs < 24 || n.regs > 256 || n.regs % 8 != 0) error = "setmaxnreg " + std::to_string(n.regs);
            }
            if constexpr (std::is_same_v<T, SNamedBarrier>) {
              // Recorded per warp, replayed at the block's end (CheckNamedBarriers).
              const std::string what = std::string(n.arrive ? "bar.arrive " : "bar.sync ") + std::to_string(n.id) + ", " +
                                       std::to_string(n.threads);
              if (n.threads <= 0 || n.threads % 32 != 0 || n.id < 1 || n.id > 15) error = what + ": not a named barrier";
              bar_ops.resize((mask.size() + 31) / 32);
              for (size_t w0 = 0; w0 < mask.size() && error.empty(); w0 += 32) {
                size_t on = 0;
                for (size_t t = w0; t < std::min(mask.size(), w0 + 32); ++t) on += mask[t];
                if (on == 0) continue;
                if (on != 32) {
                  error = what + " executed by " + std::to_string(on) + " threads of warp " + std::to_string(w0 / 32);
                } else {
                  bar_ops[w0 / 32].push_back({n.id, n.threads, n.arrive});
                }
              }
              if (roles && ws_groups > 1 && error.empty()) {
                int64_t on = 0;
                for (uint8_t m : mask) on += m;
                LiveBar& lb = live_bars[n.id];
                const int64_t gen = lb.gen;
                lb.arrived += on;
                if (lb.arrived >= n.threads) {
                  lb.arrived = 0;
                  ++lb.gen;
                } else if (!n.arrive) {
                  while (lb.gen == gen && error.empty()) {
                    if (!Yield()) {
                      error = "deadlock: " + what + " waits forever (" + std::to_string(lb.arrived) +
                              " threads arrived; no warp role can go on)";
                      return;
                    }
                  }
                }
              }
            }
            if constexpr (std::is_same_v<T, SBarrier>) {
              if (roles) error = "a block barrier inside a warp role (the other role never reaches it)";
              // (Interpret runs the top level of a cluster's two blocks statement by statement,
              // each cluster barrier between them: here it is one inside a block's code.)
              if (n.cluster) error = "a cluster barrier inside the code of one block";
            }
            if constexpr (std::is_same_v<T, SMbarWait>) {
              // Eager roles: every wait of the consumers lets the producer run as far as it can first.
              if (roles && options.eager_roles && role == 1) Yield(true);
              if (!error.empty()) return;
              // Under warp roles a phase not completed yet lets the other role run first.
              for (bool ready = false; !ready;) {
                ready = true;
                std::string why;
                for (size_t t = 0; t < mask.size() && ready; ++t) {
                  if (!mask[t]) continue;
                  Mbar* b = BarAt(n.bar, n.index, t);
                  if (!b) return;
                  const int64_t parity = static_cast<int64_t>(Eval(n.parity, t)) & 1;
                  // try_wait.parity P succeeds once the current phase's parity differs from P.
                  if ((b->completed & 1) == parity) {
                    ready = false;
                    why = "deadlock: wait on " + n.bar + "[" + std::to_string(static_cast<int64_t>(Eval(n.index, t))) +
                          "] parity " + std::to_string(parity) + ": the phase cannot complete (" +
                          std::to_string(b->delivered) + " of " + std::to_string(b->expected) + " bytes, " +
                          std::to_string(b->arrivals) + " arrivals missing)";
                  }
                }
                if (ready) break;
                if (!roles || !Yield()) {
                  error = why + (roles ? " (neither warp role can go on)" : "");
                  return;
                }
                if (!error.empty()) return;
              }
              for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
                if (!mask[t]) continue;
                Mbar* b = BarAt(n.bar, n.index, t);
                if (!b) return;
                auto land = b->landed.find(b->completed - 1);
                if (land != b->landed.end()) {
                  for (const PendingCopy& c : land->second) {
                    std::vector<double>& dst = Buf(c.dst, t);
                    if (c.index < 0 || c.index >= static_cast<int64_t>(dst.size())) {
                      error = "TMA destination " + c.dst + "[" + std::to_string(c.index) + "] out of bounds";
                      return;
                    }
                    dst[static_cast<size_t>(c.index)] = c.values[0];  // bytes are moved, not converted
                    auto fl = tma_inflight.find(c.dst);
                    if (fl != tma_inflight.end()) {
                      auto e = fl->second.find(c.index);
                      if (e != fl->second.end() && --e->second <= 0) fl->second.erase(e);
                      if (fl->second.empty()) tma_inflight.erase(fl);
                    }
                  }
                  b->landed.erase(land);
                }
              }
            }
            if constexpr (std::is_same_v<T, SBulkStore>) BulkStore(n, mask);
            if constexpr (std::is_same_v<T, STmaStore>) TmaStore(n, mask);
            if constexpr (std::is_same_v<T, SBulkCommit>) {
              for (size_t t = 0; t < mask.size(); ++t) {
                if (!mask[t]) continue;
                bulk_groups[t].push_back(std::move(bulk_open[t]));
                bulk_open[t].clear();
              }
            }
            if constexpr (std::is_same_v<T, SBulkWait>) BulkWait(n.pending, mask);
            if constexpr (std::is_same_v<T, SCopyVec>) {
              for (size_t t = 0; t < mask.size() && error.empty(); ++t) {
                if (!mask[t]) continue;
                const int64_t d = static_cast<int64_t>(Eval(n.dst_index, t));
                const int64_t si = static_cast<int64_t>(Eval(n.src_index, t));
                if (spaces.count(n.dst) && spaces[n.dst] == Space::kShared) CheckBulkWar(n.dst, d, n.lanes, "a vector copy");
                if (d % n.lanes != 0 || si % n.lanes != 0) {
                  error = "copy_vec index not a multiple of " + std::to_string(n.lanes);
                  return;
                }
                std::vector<double>& src = Buf(n.src, t);
                std::vector<double>& dst = Buf(n.dst, t);
                if (si < 0 || d < 0 || si + n.lanes > static_cast<int64_t>(src.size()) ||
                    d + n.lanes > static_cast<int64_t>(dst.size())) {
                  error = "copy_vec out of bounds: " + n.src + "[" + std::to_string(si) + "] -> " + n.dst + "[" +
                          std::to_string(d) + "]";
                  return;
                }
                for (int64_t i = 0; i < n.lanes; ++i) {
                  CheckTmaInflight(n.src, si + i, "a vector copy reads");
                  CheckTmaInflight(n.dst, d + i, "a vector copy writes");
                  dst[static_cast<size_t>(d + i)] = src[static_cast<size_t>(si + i)];
                }
              }
            }
            // SBarrier, SComment: nothing (lockstep).
          },
          s.node);
    }
  }
};

}  // namespace

tl::Status Interpret(const SimtKernel& k, std::map<std::string, std::vector<double>>* tensors,
                     const std::map<std::string, double>& scalars, const InterpretOptions& options) {
  std::vector<int64_t> grid;
  for (const Expr& g : k.grid) {
    // Shape symbols (scalar params with SimtParam::symbol) come from `scalars`.
    const Expr bound = ir::RewriteExpr(g, [&](const Expr& x) -> std::optional<Expr> {
      const auto* v = ir::As<ir::VarRef>(x);
      if (!v) return std::nullopt;
      auto it = scalars.find(v->name);
      if (it == scalars.end()) return std::nullopt;
      return ir::MakeInt(static_cast<int64_t>(it->second), v->dtype);
    });
    std::optional<int64_t> v = ir::FoldInt(ir::FoldConstants(bound));
    if (!v) return tl::Status(tl::StatusCode::kUnimplemented, "interpreter: grid must be constant");
    grid.push_back(*v);
  }
  while (grid.size() < 3) grid.push_back(1);
  const size_t T = static_cast<size_t>(k.threads);
  const int64_t C = std::max<int64_t>(1, k.cluster);
  if (C > 2 || grid[0] % C != 0) {
    return tl::Status(tl::StatusCode::kInvalidArgument, "interpreter: a cluster of " + std::to_string(C) +
                                                            " blocks over a grid x extent of " + std::to_string(grid[0]));
  }
  Machine m0{k, tensors, scalars, {}, {}, {}, {}, {}, {}, {}, {}, options};
  Machine m1{k, tensors, scalars, {}, {}, {}, {}, {}, {}, {}, {}, options};
  Machine* ms[2] = {&m0, &m1};
  for (Machine* m : ms) {
    for (const SimtParam& p : k.params) m->dtypes[p.name] = p.dtype;
    for (const SimtBuffer& b : k.buffers) {
      m->dtypes[b.name] = b.dtype;
      m->spaces[b.name] = b.space;
      if (b.packed_pairs) m->packed.insert(b.name);
    }
  }
  auto setup = [&](Machine& m, int64_t x, int64_t y, int64_t z) {
    m.block_idx = {x, y, z};
    m.shared.clear();
    m.regs.assign(T, {});
    m.env.assign(T, {});
    m.open_copies.assign(T, {});
    m.copy_groups.assign(T, {});
    m.bulk_open.assign(T, {});
    m.bulk_groups.assign(T, {});
    m.mbars.clear();
    m.wgmma_groups.clear();
    m.bar_ops.clear();
    for (const SimtBuffer& b : k.buffers) {
      // Uninitialized memory is NaN, so reading it before writing shows.
      if (b.space == Space::kShared) m.shared[b.name].assign(static_cast<size_t>(b.elements), std::nan(""));
      else for (size_t t = 0; t < T; ++t) m.regs[t][b.name].assign(static_cast<size_t>(b.elements), std::nan(""));
    }
  };
  auto finish = [&](Machine& m) {
    if (m.error.empty()) m.error = m.CheckNamedBarriers();
    for (size_t t = 0; t < T && m.error.empty(); ++t) {
      if (!m.open_copies[t].empty() || !m.copy_groups[t].empty()) m.error = "cp.async copies never waited for";
      if (!m.bulk_open[t].empty() || !m.bulk_groups[t].empty()) {
        m.error = "bulk copies of thread " + std::to_string(t) + " never waited for (cp.async.bulk.wait_group) before the kernel's end";
      }
    }
    if (m.error.empty() && !m.wgmma_groups.empty()) {
      m.error = std::to_string(m.wgmma_groups.size()) + " wgmma group(s) of " + m.wgmma_groups.front().n->c +
                " never retired by a wait_group";
    }
    for (const auto& [name, bars] : m.mbars) {
      for (const auto& b : bars) {
        if (m.error.empty() && (!b.landed.empty() || !b.data.empty() || b.expected != 0)) {
          m.error = "TMA copies on " + name + " never waited for";
        }
      }
    }
    if (m.error.empty()) return tl::Status::Ok();
    return tl::Status(tl::StatusCode::kInternal, "interpreter, block (" + std::to_string(m.block_idx[0]) + ", " +
                                                     std::to_string(m.block_idx[1]) + ", " + std::to_string(m.block_idx[2]) +
                                                     "): " + m.error);
  };
  const std::vector<uint8_t> all(T, 1);
  for (int64_t z = 0; z < grid[2]; ++z) {
    for (int64_t y = 0; y < grid[1]; ++y) {
      for (int64_t x = 0; x < grid[0]; x += C) {
        if (C == 1) {
          setup(m0, x, y, z);
          m0.Exec(k.body, all);
          if (tl::Status st = finish(m0); !st.ok()) return st;
          continue;
        }
        // A cluster of 2: blocks x (rank 0) and x + 1 (rank 1). The top level runs statement by
        // statement in both blocks (a cluster barrier is the point where both have run everything
        // before it), the warp roles as four agents of one baton.
        setup(m0, x, y, z);
        setup(m1, x + 1, y, z);
        m0.peer = &m1;
        m1.peer = &m0;
        for (const SStmt& s : k.body) {
          if (const auto* b = std::get_if<SBarrier>(&s.node); b && b->cluster) continue;
          if (const auto* r = std::get_if<SWarpRoles>(&s.node)) {
            m0.RunClusterRoles(*r, all);
          } else {
            for (Machine* m : ms) m->Exec(SBlock{s}, all);
          }
          if (!m0.error.empty() || !m1.error.empty()) break;
        }
        for (Machine* m : ms) {
          if (tl::Status st = finish(*m); !st.ok()) return st;
        }
      }
    }
  }
  return tl::Status::Ok();
}

}  // namespace tl::gpu::test
