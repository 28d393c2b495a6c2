// compiler.gpu Cluster.*: `hint cluster 2` (T.Kernel(..., cluster_dims=2))
// on the sm_90a warp-specialized GEMM (ClusterMulticast, cluster.cc): blocks
// 2j and 2j + 1 as a thread-block cluster whose producers multicast the tile
// both need. Checked here without a GPU: the lowering's structure (which
// boxes multicast, the half-box tensor map, both blocks' empty barriers, the
// cluster barriers), the printed CUDA, ptxas for sm_90a (registers, no
// spills) and the SASS (UTMALDG multicast) where cuobjdump exists; every
// refusal leaves the kernel as it was with a note saying why; the hint is a
// no-op on targets without clusters (the same numbers in the interpreter).
// The SIMT interpreter runs both blocks of each cluster together (multicast
// boxes landing in both blocks' shared memory, arrivals on the peer's
// barriers), so the clustered kernels' numbers are checked here against
// float64 and broken protocols are caught; the H200 checks them again
// (hopper_bench's "cluster2" GEMM configs verify in float64).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "lowering_test_util.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::SBlock;
using tl::gpu::SStmt;
using tl::gpu::test::Notes;
using tl::gpu::test::Occurrences;
using tl::gpu::test::Parse;
using tl::gpu::test::Sm90a;
using tl::gpu::test::Walk;

struct Gemm {
  std::string name;
  int64_t M, N, K, bm, bn, bk, threads, stages;
  int64_t cluster = 2;  // the hint's value
};

// C = A B (bf16 -> f32), the hint first in the kernel (where T.Kernel puts it).
std::string Text(const Gemm& c) {
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string t = "tileir 1\n\nfunc @" + c.name + "(A: tensor[" + n(c.M) + ", " + n(c.K) + "] bf16, B: tensor[" + n(c.K) + ", " +
                  n(c.N) + "] bf16, C: tensor[" + n(c.M) + ", " + n(c.N) + "] f32) {\n";
  t += "  kernel grid(ceildiv(" + n(c.N) + ", " + n(c.bn) + "), ceildiv(" + n(c.M) + ", " + n(c.bm) + ")) threads(" +
       n(c.threads) + ") -> (bx, by) {\n";
  t += "    hint cluster " + n(c.cluster) + "\n";
  t += "    alloc A_s: shared[" + n(c.bm) + ", " + n(c.bk) + "] bf16\n";
  t += "    alloc B_s: shared[" + n(c.bk) + ", " + n(c.bn) + "] bf16\n";
  t += "    alloc C_f: fragment[" + n(c.bm) + ", " + n(c.bn) + "] f32\n";
  t += "    fill C_f, 0.0:f32\n";
  t += "    for k in pipelined(0, ceildiv(" + n(c.K) + ", " + n(c.bk) + "), stages=" + n(c.stages) + ") {\n";
  t += "      copy A[by * " + n(c.bm) + ":" + n(c.bm) + ", k * " + n(c.bk) + ":" + n(c.bk) + "] -> A_s\n";
  t += "      copy B[k * " + n(c.bk) + ":" + n(c.bk) + ", bx * " + n(c.bn) + ":" + n(c.bn) + "] -> B_s\n";
  t += "      gemm A_s, B_s -> C_f\n    }\n";
  t += "    copy C_f -> C[by * " + n(c.bm) + ":" + n(c.bm) + ", bx * " + n(c.bn) + ":" + n(c.bn) + "]\n  }\n}\n";
  return t;
}

// The sm_90a variant's lowering as cuda_bundle.cc makes it (warp-specialized), with clusters on or off.
constexpr bool kClusters = true, kNoClusters = false;

std::string Cuobjdump() {
  for (const char* c : {"/usr/local/cuda/bin/cuobjdump", "/usr/local/cuda-13.0/bin/cuobjdump", "/usr/bin/cuobjdump"}) {
    if (std::filesystem::exists(c)) return c;
  }
  return "";
}

// The structure of a clustered raster-0 GEMM: A's tile (the same row block
// in both blocks of a pair) multicast always, as two halves through a tensor
// map of half boxes; B's (column blocks bx and bx ^ 1) behind a run-time test
// of the coordinates (false here: each block loads its own B).
TEST(Cluster, GemmStructure) {
  const Gemm c{"cl_128x256", 512, 1024, 512, 128, 256, 64, 256, 3};
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a(true, kClusters));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
  ASSERT_NE(notes.find("cluster 2: __cluster_dims__(2, 1, 1)"), std::string::npos) << notes;
  EXPECT_NE(notes.find("2 stage buffer(s) multicast where both blocks load the same tile (1 always"), std::string::npos) << notes;
  EXPECT_NE(notes.find("1 half-box tensor map(s)"), std::string::npos) << notes;
  EXPECT_EQ(k->cluster, 2);
  // Tensor maps: A 128x64, B 64x64 panels, A's half box 64x64.
  ASSERT_EQ(k->tensor_maps.size(), 3u) << dump;
  EXPECT_EQ(k->tensor_maps[2].param, k->tensor_maps[0].param);
  EXPECT_EQ(k->tensor_maps[2].box, (std::vector<int64_t>{64, 64}));
  int mc = 0, own = 0, peer_arrivals = 0, cluster_barriers = 0;
  int64_t mc_bytes = 0;
  Walk(k->body, [&](const SStmt& s) {
    if (const auto* t = std::get_if<tl::gpu::STmaLoad>(&s.node)) {
      (t->multicast ? mc : own) += 1;
      if (t->multicast) mc_bytes += t->bytes;
    }
    if (const auto* a = std::get_if<tl::gpu::SMbarArrive>(&s.node); a && a->peer) ++peer_arrivals;
    if (const auto* b = std::get_if<tl::gpu::SBarrier>(&s.node); b && b->cluster) ++cluster_barriers;
  });
  // A: one half box per producer (expecting the whole box: 128 x 64 x 2 bytes); B: 4 panels, rank 0
  // the first two, rank 1 the other two (each expecting 2 x 8 KiB), or all 4 privately.
  EXPECT_EQ(mc, 1 + 4) << dump;
  EXPECT_EQ(own, 4) << dump;
  EXPECT_EQ(mc_bytes, 128 * 64 * 2 + 4 * 2 * 64 * 64 * 2) << dump;
  EXPECT_EQ(peer_arrivals, 1) << dump;      // the consumers' release of k - 1
  EXPECT_EQ(cluster_barriers, 2) << dump;   // after the inits, before exit
  EXPECT_NE(dump.find("arrivals=16"), std::string::npos) << dump;  // 2 blocks x 8 consumer warps
  EXPECT_NE(dump.find("(bx ^ 1) * 256"), std::string::npos) << dump;  // the peer's B coordinates
  // The top level ends with the cluster barrier, after the roles.
  ASSERT_FALSE(k->body.empty());
  const auto* last = std::get_if<tl::gpu::SBarrier>(&k->body.back().node);
  ASSERT_TRUE(last && last->cluster) << dump;
}

// The printed CUDA and what ptxas / cuobjdump make of it: the best
// non-persistent and persistent hopper_bench tiles with the cluster.
TEST(Cluster, CudaSourcePtxasSass) {
  struct Big {
    Gemm c;
    int64_t persistent_sms;
  };
  const std::vector<Big> bigs = {
      {{"cl_bench_128x256x64_t256", 4096, 4096, 4096, 128, 256, 64, 256, 3}, 0},
      {{"cl_bench_128x256x64_t256_p", 4096, 4096, 4096, 128, 256, 64, 256, 3}, 132},
      {{"cl_bench_128x128x64_t256_s4", 4096, 4096, 4096, 128, 128, 64, 256, 4}, 0},
  };
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const Big& b : bigs) {
    SCOPED_TRACE(b.c.name);
    tl::gpu::GpuLowerOptions o = Sm90a(true, kClusters);
    o.persistent_sms = b.persistent_sms;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(b.c)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string notes = Notes(*k);
    ASSERT_EQ(k->cluster, 2) << notes;
    if (b.persistent_sms) {
      EXPECT_NE(notes.find("; persistent: 132 blocks over 512 tiles"), std::string::npos) << notes;
      EXPECT_NE(notes.find("(persistent: tiles 2j, 2j + 1)"), std::string::npos) << notes;
    }
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    EXPECT_NE(s.find("__cluster_dims__(2, 1, 1) " + b.c.name + "("), std::string::npos) << s;
    EXPECT_NE(s.find(".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"), std::string::npos);
    EXPECT_NE(s.find("mapa.shared::cluster.u32"), std::string::npos);
    EXPECT_NE(s.find("mbarrier.arrive.shared::cluster.b64 _, [ra]"), std::string::npos);
    // release at cluster scope costs a cluster-wide fence per arrival (H200 ncu: membar stalls, 1.6x slower)
    EXPECT_EQ(s.find("arrive.release.cluster"), std::string::npos);
    EXPECT_NE(s.find("barrier.cluster.arrive.release;"), std::string::npos);
    EXPECT_EQ(Occurrences(s, "  tl_cluster_sync();\n"), 2u) << s;  // after the inits, before exit (top level)
    EXPECT_GE(Occurrences(s, "tl_tma_load_2d_mc(&"), 3u) << s;
    EXPECT_GE(Occurrences(s, "tl_mbar_arrive_peer(&"), 1u) << s;
    EXPECT_EQ(Occurrences(s, "tl_mbar_wait(&"), 0u) << s;  // every wait bounded (a broken protocol traps, never hangs)
    EXPECT_GE(Occurrences(s, "tl_mbar_wait_bounded(&"), 2u) << s;
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, b.c.name, "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ %s sm_90a cluster 2 ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n", b.c.name.c_str(),
                code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
    EXPECT_EQ(code->spill_stores, 0) << code->log;
    EXPECT_EQ(code->spill_loads, 0) << code->log;
    EXPECT_EQ(code->stack_bytes, 0) << code->log;
    // The same kernel without the cluster: as many registers at entry (ptxas fixes them by
    // __launch_bounds__ and setmaxnreg; the cluster costs none).
    tl::StatusOr<tl::gpu::SimtKernel> plain = tl::gpu::LowerToSimt(Parse(Text(b.c)), [&] {
      tl::gpu::GpuLowerOptions p = o;
      p.clusters = false;
      return p;
    }());
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->cluster, 1);
    tl::StatusOr<cu::CudaSource> psrc = cu::PrintCuda(*plain);
    ASSERT_TRUE(psrc.ok());
    tl::StatusOr<cu::CompiledCode> pcode = tc->Compile(psrc->source, b.c.name, "sm_90a");
    ASSERT_TRUE(pcode.ok()) << pcode.status().ToString();
    EXPECT_EQ(code->registers, pcode->registers) << code->log;
    const std::string cuobjdump = Cuobjdump();
    if (cuobjdump.empty()) {
      std::printf("[ %s ] no cuobjdump here: SASS not inspected\n", b.c.name.c_str());
      continue;
    }
    const std::filesystem::path o_path = std::filesystem::temp_directory_path() / ("tl_cluster_" + b.c.name + ".cubin");
    std::ofstream(o_path, std::ios::binary).write(reinterpret_cast<const char*>(code->bytes.data()),
                                                  static_cast<std::streamsize>(code->bytes.size()));
    tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({cuobjdump, "-sass", o_path.string()});
    std::filesystem::remove(o_path);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("UTMALDG"), std::string::npos) << "no UTMALDG in the SASS";
    EXPECT_NE(r.out.find("MULTICAST"), std::string::npos) << "no multicast UTMALDG in the SASS";
    EXPECT_NE(r.out.find("UCGABAR"), std::string::npos) << "no cluster barrier (UCGABAR_*) in the SASS";
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

// Where the cluster cannot be had, the kernel is the one without the hint
// and the note says why.
TEST(Cluster, RefusalsLeaveTheKernelAlone) {
  struct Bad {
    Gemm c;
    tl::gpu::GpuLowerOptions o;
    std::string why;
  };
  tl::gpu::GpuLowerOptions persistent2 = Sm90a(true, kClusters);
  persistent2.persistent_sms = 2;
  tl::gpu::GpuLowerOptions no_ws = Sm90a(true, kClusters);
  no_ws.warp_specialize = false;
  const std::vector<Bad> bads = {
      // 3 column blocks: a cluster of 2 along x cannot cover the grid
      {{"odd_x", 256, 384, 256, 128, 128, 64, 256, 3}, Sm90a(true, kClusters), "not clustered: the grid's x extent 3 is not a static multiple of 2"},
      // clusters of 3 (the frontend refuses them; Tile IR text may still say so)
      {{"three", 256, 512, 256, 128, 128, 64, 256, 3, 3}, Sm90a(true, kClusters), "not clustered: cluster 3 (only clusters of 2 blocks"},
      // a target without clusters (every lowering but sm_90a's)
      {{"off", 256, 512, 256, 128, 128, 64, 256, 3}, Sm90a(true, kNoClusters), "cluster hint ignored: this GPU target has no thread-block clusters"},
      // no producer warpgroup (TL_CUDA_WS=0)
      {{"no_ws", 256, 512, 256, 128, 128, 64, 256, 3}, no_ws, "not clustered: the kernel is not warp-specialized"},
      // persistent over 2 blocks, 3 tiles: the second block's peer tile does not exist
      {{"odd_tiles", 384, 128, 256, 128, 128, 64, 256, 3}, persistent2, "not clustered: persistent: 3 tiles"},
  };
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.c.name);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(b.c)), b.o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find(b.why), std::string::npos) << Notes(*k);
    EXPECT_EQ(k->cluster, 1);
    bool any = false;
    Walk(k->body, [&](const SStmt& s) {
      const auto* t = std::get_if<tl::gpu::STmaLoad>(&s.node);
      const auto* a = std::get_if<tl::gpu::SMbarArrive>(&s.node);
      const auto* r = std::get_if<tl::gpu::SBarrier>(&s.node);
      any = any || (t && t->multicast) || (a && a->peer) || (r && r->cluster);
    });
    EXPECT_FALSE(any) << tl::gpu::Dump(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok());
    EXPECT_EQ(src->source.find("__cluster_dims__"), std::string::npos);
  }
}

// The hint never changes results: on a target without clusters (mma.sync,
// SIMT) the kernel is the one without it, numbers against float64; and the
// interpreter refuses a clustered kernel instead of running it as one block.
TEST(Cluster, HintIsANoOpElsewhere) {
  const Gemm c{"noop", 96, 160, 72, 32, 32, 16, 128, 2};
  tl::gpu::GpuLowerOptions o;
  o.vector_copies = true;
  o.async_copies = true;
  o.gemm = tl::gpu::GemmStrategy::kMmaSync;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(Notes(*k).find("cluster hint ignored"), std::string::npos) << Notes(*k);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["A"].resize(static_cast<size_t>(c.M * c.K));
  t["B"].resize(static_cast<size_t>(c.K * c.N));
  for (double& v : t["A"]) v = tl::gpu::test::RoundToBf16(d(rng));
  for (double& v : t["B"]) v = tl::gpu::test::RoundToBf16(d(rng));
  t["C"].assign(static_cast<size_t>(c.M * c.N), -7);
  const std::vector<double> a = t["A"], bm = t["B"];
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.K; ++p) s += a[static_cast<size_t>(i * c.K + p)] * bm[static_cast<size_t>(p * c.N + j)];
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["C"][static_cast<size_t>(i * c.N + j)] - s) / (1 + std::fabs(s))));
    }
  }
  EXPECT_LE(worst, 1e-5);
}

// Random bf16 A, B; C from the interpreter (both blocks of each cluster run
// together: four agents, multicast boxes landing in both, remote arrivals);
// the worst relative error against float64.
tl::Status RunGemm(const Gemm& c, const tl::gpu::SimtKernel& k, double* worst) {
  std::mt19937 rng(static_cast<uint32_t>(c.M * 31 + c.N * 7 + c.K));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["A"].resize(static_cast<size_t>(c.M * c.K));
  t["B"].resize(static_cast<size_t>(c.K * c.N));
  for (double& v : t["A"]) v = tl::gpu::test::RoundToBf16(d(rng));
  for (double& v : t["B"]) v = tl::gpu::test::RoundToBf16(d(rng));
  t["C"].assign(static_cast<size_t>(c.M * c.N), -7);
  const std::vector<double> a = t["A"], b = t["B"];
  const tl::Status st = tl::gpu::test::Interpret(k, &t);
  *worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.K; ++p) s += a[static_cast<size_t>(i * c.K + p)] * b[static_cast<size_t>(p * c.N + j)];
      *worst = std::max(*worst, tl::gpu::test::NanAsInf(std::fabs(t["C"][static_cast<size_t>(i * c.N + j)] - s) / (1 + std::fabs(s))));
    }
  }
  return st;
}

// A 1-D grid walked in panels of P row blocks (kernels.gemm's raster order,
// n_m a multiple of P): tiles 2j, 2j + 1 are row blocks of one column block,
// so B's tile is the shared one, found through the lets evaluated for pid ^ 1.
std::string Rastered(const Gemm& c, int64_t P) {
  std::string t = Text(c);
  auto n = [](int64_t v) { return std::to_string(v); };
  const int64_t nn = (c.N + c.bn - 1) / c.bn, nm = (c.M + c.bm - 1) / c.bm;
  const std::string head = "  kernel grid(ceildiv(" + n(c.N) + ", " + n(c.bn) + "), ceildiv(" + n(c.M) + ", " + n(c.bm) +
                           ")) threads(" + n(c.threads) + ") -> (bx, by) {\n    hint cluster " + n(c.cluster) + "\n";
  const size_t at = t.find(head);
  if (at == std::string::npos) return "";
  t.replace(at, head.size(), "  kernel grid(" + n(nn * nm) + ") threads(" + n(c.threads) + ") -> (pid) {\n    hint cluster " +
                                 n(c.cluster) + "\n    let bx = pid % " + n(P * nn) + " / " + n(P) + "\n    let by = pid / " +
                                 n(P * nn) + " * " + n(P) + " + pid % " + n(P * nn) + " % " + n(P) + "\n");
  return t;
}

// The clustered kernels against float64 in the interpreter: raster 0 (A
// multicast as half boxes), a rasterized order (B multicast, whole panels
// split between the ranks, decided per k-step), persistent over 2 and 4
// blocks (tile pairs), partial tiles in M and K (TMA zero fill in both
// halves), one k-step and more k-steps than stages.
TEST(Cluster, ClusteredGemmsMatchFloat64) {
  struct Run {
    Gemm c;
    int64_t raster, sms;
    const char* shared;  // what the note must say about the multicast stage buffers
    bool pingpong = false;  // GpuLowerOptions::gemm_pingpong (128 threads, persistent)
  };
  const std::vector<Run> runs = {
      {{"cl_r0_128x128_t128", 200, 512, 328, 128, 128, 64, 128, 2}, 0, 0, "(1 always"},
      {{"cl_r0_128x256_t256_k1", 136, 1024, 40, 128, 256, 64, 256, 3}, 0, 0, "(1 always"},
      {{"cl_r2_128x128_t128", 512, 256, 264, 128, 128, 64, 128, 3}, 2, 0, "(0 always"},
      // cuBLAS's 256x128 tile: two consumer warpgroups of 128 rows, A's 256-row box multicast as two 128-row halves
      {{"cl_r0_256x128_t256", 512, 256, 136, 256, 128, 64, 256, 3}, 0, 0, "(1 always"},
      // persistent: the block indices are lets of the tile index, the peer's of tile ^ 1 (A tested per k-step)
      {{"cl_r0_persistent2", 256, 512, 200, 128, 128, 64, 128, 2}, 0, 2, "(0 always"},
      {{"cl_r2_persistent4", 512, 256, 456, 128, 128, 64, 256, 3}, 2, 4, "(0 always"},
      // the ping-pong GEMM: one ring across the block's tiles, warpgroup j % 2 on its j-th tile in both
      // blocks; 8 tiles over 2 blocks (4 each: both warpgroups twice), 4 k-steps over 2 stages
      {{"cl_pp_r0_persistent2", 256, 512, 200, 128, 128, 64, 128, 2}, 0, 2, "(0 always", true},
      // rasterized (B shared), 3 stages, a k tail over 8 k-steps; 8 tiles over 4 blocks (one each warpgroup)
      {{"cl_pp_r2_persistent4", 512, 256, 456, 128, 128, 64, 128, 3}, 2, 4, "(0 always", true},
      // one k-step a tile over 3 stages (each stage passes between the warpgroups), ragged M; 12 tiles over 2 blocks
      {{"cl_pp_r0_persistent2_k1", 328, 512, 40, 128, 128, 64, 128, 3}, 0, 2, "(0 always", true},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.c.name);
    tl::gpu::GpuLowerOptions o = Sm90a(true, kClusters);
    o.persistent_sms = r.sms;
    o.gemm_pingpong = r.pingpong;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(r.raster ? Rastered(r.c, r.raster) : Text(r.c)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
    ASSERT_EQ(k->cluster, 2) << notes;
    EXPECT_EQ(notes.find("warp-specialized: ping-pong: two 128-thread consumer warpgroups") != std::string::npos, r.pingpong)
        << notes;
    if (r.pingpong) {  // the roles themselves: 384 threads, two consumer groups
      EXPECT_EQ(k->threads, 384);
      const auto* roles = std::get_if<tl::gpu::SWarpRoles>(&k->body[k->body.size() - 2].node);
      ASSERT_NE(roles, nullptr) << dump;  // (the last statement is the exit's cluster barrier)
      EXPECT_EQ(roles->consumer_groups, 2);
    }
    EXPECT_NE(notes.find(r.shared), std::string::npos) << notes;
    if (r.sms) {
      EXPECT_NE(notes.find("(persistent: tiles 2j, 2j + 1)"), std::string::npos) << notes;
    }
    double worst = 0;
    const tl::Status st = RunGemm(r.c, *k, &worst);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
    EXPECT_LE(worst, 1e-5) << dump;
    std::printf("[ %s ] cluster 2%s%s, worst relative error %.3g\n", r.c.name.c_str(), r.sms ? " persistent" : "",
                r.pingpong ? " ping-pong" : "", worst);
  }
}

// The interpreter catches a broken cluster protocol (so the test above can
// fail): a multicast box that expects only its own half (the phase never
// completes), consumers that release only their own block's stage (the
// peer's producer waits forever), an empty barrier whose count was not
// doubled (arrivals past the count), multicast boxes that were not split
// (twice the bytes); in the cooperative and the ping-pong GEMM.
TEST(Cluster, BrokenProtocolsAreCaught) {
  const Gemm c{"cl_broken", 256, 512, 456, 128, 128, 64, 128, 2};
  tl::StatusOr<tl::gpu::SimtKernel> good = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a(true, kClusters));
  ASSERT_TRUE(good.ok());
  ASSERT_EQ(good->cluster, 2) << Notes(*good);
  // The same breaks in the persistent ping-pong GEMM (two consumer warpgroups a block: six agents).
  tl::gpu::GpuLowerOptions pp = Sm90a(true, kClusters);
  pp.persistent_sms = 2;
  pp.gemm_pingpong = true;
  tl::StatusOr<tl::gpu::SimtKernel> good_pp = tl::gpu::LowerToSimt(Parse(Text(c)), pp);
  ASSERT_TRUE(good_pp.ok());
  ASSERT_EQ(good_pp->cluster, 2) << Notes(*good_pp);
  ASSERT_NE(Notes(*good_pp).find("ping-pong"), std::string::npos) << Notes(*good_pp);
  const std::vector<std::pair<std::string, std::function<void(tl::gpu::SimtKernel&)>>> breaks = {
      {"half the bytes", [](tl::gpu::SimtKernel& k) {
         Walk(k.body, [](SStmt& s) {
           if (auto* t = std::get_if<tl::gpu::STmaLoad>(&s.node); t && t->multicast) t->bytes /= 2;
         });
       }},
      {"own release only", [](tl::gpu::SimtKernel& k) {
         Walk(k.body, [](SStmt& s) {
           if (auto* a = std::get_if<tl::gpu::SMbarArrive>(&s.node)) a->peer = false;
         });
       }},
      {"count not doubled", [](tl::gpu::SimtKernel& k) {
         for (SStmt& s : k.body) {
           if (auto* i = std::get_if<tl::gpu::SMbarInit>(&s.node); i && i->arrivals > 1) i->arrivals /= 2;
         }
       }},
      {"not multicast", [](tl::gpu::SimtKernel& k) {
         Walk(k.body, [](SStmt& s) {
           if (auto* t = std::get_if<tl::gpu::STmaLoad>(&s.node)) t->multicast = false;
         });
       }},
  };
  for (const auto& [form, base] : {std::pair{"cooperative", &*good}, std::pair{"ping-pong", &*good_pp}}) {
    for (const auto& [name, brk] : breaks) {
      SCOPED_TRACE(std::string(form) + ": " + name);
      tl::gpu::SimtKernel k = *base;
      brk(k);
      double worst = 0;
      const tl::Status st = RunGemm(c, k, &worst);
      EXPECT_TRUE(!st.ok() || worst > 1e-3) << "a broken protocol passed: " << form << ", " << name;
      std::printf("[ %s: %s ] caught: %s\n", form, name.c_str(), st.ok() ? "wrong numbers" : st.ToString().substr(0, 160).c_str());
    }
  }
}

// Forms the lowering does not make today but ClusterMulticast would get
// wrong if it did: each is refused (the kernel as it was, the note says why)
// or takes the safe path. The kernels are lowered without clusters, changed,
// and handed to ClusterMulticast directly.
TEST(Cluster, UnsafeFormsAreRefused) {
  using tl::gpu::SimtKernel;
  const Gemm c{"cl_guard", 256, 512, 456, 128, 128, 64, 128, 2};
  auto lower = [&](const std::string& text, int64_t sms) {
    tl::gpu::GpuLowerOptions o = Sm90a(true, kNoClusters);
    o.persistent_sms = sms;
    tl::StatusOr<SimtKernel> k = tl::gpu::LowerToSimt(Parse(text), o);
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return *k;
  };
  auto b_boxes = [](SimtKernel& k, const std::function<void(tl::gpu::STmaLoad&)>& fn) {
    Walk(k.body, [&](SStmt& s) {
      if (auto* t = std::get_if<tl::gpu::STmaLoad>(&s.node); t && t->dst == "B_s") fn(*t);
    });
  };
  {  // as lowered: clustered (the changes below are what makes the difference)
    SimtKernel k = lower(Text(c), 0);
    EXPECT_NE(tl::gpu::ClusterMulticast(&k, 2).find("cluster 2: "), std::string::npos);
    SimtKernel p = lower(Text(c), 2);
    EXPECT_NE(tl::gpu::ClusterMulticast(&p, 2).find("cluster 2: "), std::string::npos);
    SimtKernel r = lower(Rastered(c, 2), 0);
    EXPECT_NE(tl::gpu::ClusterMulticast(&r, 2).find("cluster 2: "), std::string::npos);
  }
  const std::vector<std::tuple<std::string, SimtKernel, std::string>> refused = {
      // rastered: bx, a let of pid, evaluated outside the elected producer thread's block -- no peer copy
      // of it, so B's coordinates would have been taken as the same in both blocks (the wrong B tile)
      {"let outside the elected block",
       [&] {
         SimtKernel k = lower(Rastered(c, 2), 0);
         Walk(k.body, [](SStmt& s) {
           auto* r = std::get_if<tl::gpu::SWarpRoles>(&s.node);
           if (!r) return;
           for (size_t i = 0; i < r->producer.size(); ++i) {
             auto* e = std::get_if<tl::gpu::SIf>(&r->producer[i].node);
             if (!e || e->then_body.empty() || !std::holds_alternative<tl::gpu::SLet>(e->then_body.front().node)) continue;
             SStmt let = e->then_body.front();  // let bx = ..., hoisted above the `if`
             e->then_body.erase(e->then_body.begin());
             r->producer.insert(r->producer.begin() + static_cast<std::ptrdiff_t>(i), std::move(let));
             return;
           }
         });
         return k;
       }(),
       "not clustered: a box coordinate (bx * 128) reads bx, which depends on the block but has no value for the peer block"},
      // persistent: a tile loop from 0 would give both blocks the same tiles, not tiles t and t ^ 1
      {"tile loop start",
       [&] {
         SimtKernel k = lower(Text(c), 2);
         Walk(k.body, [](SStmt& s) {
           if (auto* f = std::get_if<tl::gpu::SFor>(&s.node); f && f->var == "tl_tile") f->start = tl::ir::MakeInt(0);
         });
         return k;
       }(),
       "not clustered: persistent: the tile loop starts at 0, not at the block index bx"},
      // the second barrier is the one whose count is doubled and whose arrivals go to the peer
      {"not the empty barrier",
       [&] {
         SimtKernel k = lower(Text(c), 0);
         int n = 0;
         for (SStmt& s : k.body) {
           if (auto* i = std::get_if<tl::gpu::SMbarInit>(&s.node); i && n++ == 1) i->bar = "tl_other";
         }
         return k;
       }(),
       "not clustered: the kernel's second mbarrier (tl_other) is not the empty barrier of tl_mbar"},
  };
  for (const auto& [name, kernel, why] : refused) {
    SCOPED_TRACE(name);
    SimtKernel k = kernel;
    const std::string before = tl::gpu::Dump(k), note = tl::gpu::ClusterMulticast(&k, 2);
    EXPECT_NE(note.find(why), std::string::npos) << note << "\n" << before;
    EXPECT_EQ(k.cluster, 1);
    EXPECT_EQ(tl::gpu::Dump(k), before);
  }
  {  // B's two panels of unequal bytes (as two copies into one buffer could be): not split between the
     // ranks with doubled bytes (block 0 would expect more than it gets), each box's half rows instead
    SimtKernel k = lower(Text(c), 0);
    std::vector<int64_t> bytes;
    b_boxes(k, [&](tl::gpu::STmaLoad& t) {
      if (!bytes.empty()) t.bytes /= 2;
      bytes.push_back(t.bytes);
    });
    ASSERT_EQ(bytes.size(), 2u);
    const std::string note = tl::gpu::ClusterMulticast(&k, 2);
    ASSERT_NE(note.find("cluster 2: "), std::string::npos) << note;
    EXPECT_NE(note.find("2 half-box tensor map(s)"), std::string::npos) << note;  // A's and B's
    std::vector<int64_t> mc;
    b_boxes(k, [&](tl::gpu::STmaLoad& t) {
      if (t.multicast) mc.push_back(t.bytes);
    });
    EXPECT_EQ(mc, bytes) << tl::gpu::Dump(k);  // each box's own bytes: the two halves of it complete them
  }
}

}  // namespace
