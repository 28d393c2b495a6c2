// T.import_source + T.call_extern through the GPU lowering and the CUDA
// printer: the imported text is emitted verbatim before the kernel, each
// thread calls the function with pointers to its elements (a fragment whose
// address is taken lives in shared memory; a local array is kept in its
// storage type), NVRTC compiles it for sm_90a and compute_80 (inline-PTX
// lop3 decoding, as upstream's dequantize examples import), other targets
// and the SIMT interpreter refuse it naming the kernel and the function.
#include <gtest/gtest.h>

#include <string>

#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

namespace cu = tl::codegen::cuda;

// A decode helper in upstream's style: 8 unsigned 4-bit values (one 32-bit
// word) to 8 halves with lop3 + sub.f16x2, written in `uint` (a host typedef
// that NVRTC lacks; the printer supplies it).
constexpr const char* kDecode =
    "template <typename T1, typename T2>\n"
    "__device__ void decode_u4(T1* in, T2* out) {\n"
    "  uint* h = reinterpret_cast<uint*>(out);\n"
    "  uint const w = *reinterpret_cast<uint*>(in);\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; ++i) {\n"
    "    asm volatile(\"lop3.b32 %0, %1, %2, %3, %4;\\n\" : \"=r\"(h[i]) : \"r\"(w >> (4 * i)), \"n\"(0x000f000f), "
    "\"n\"(0x64006400), \"n\"((0xf0 & 0xcc) | 0xaa));\n"
    "    asm volatile(\"sub.f16x2 %0, %1, %2;\\n\" : \"=r\"(h[i]) : \"r\"(h[i]), \"r\"(0x64006400));\n"
    "  }\n"
    "}\n";

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Per-thread (fragment rows, inside T.Parallel) and block-wide (a local
// array outside it) calls.
std::string Kernel() {
  return "tileir 1\n\nfunc @decode_ext(Q: tensor[128, 4] u8, O: tensor[128, 8] f16, Z: tensor[8] f16) loc(\"ext.py\", 1) {\n"
         "  import_source " + Quoted(kDecode) + "\n"
         "  import_source \"__device__ void negate(unsigned short* p) { *p ^= 0x8000u; }\\n\"\n"
         "  kernel grid(1) threads(128) -> (bx) loc(\"ext.py\", 2) {\n"
         "    alloc q: fragment[128, 4] u8\n"
         "    alloc d: fragment[128, 8] f16\n"
         "    alloc ql: local[4] u8\n"
         "    alloc dl: local[8] f16\n"
         "    parallel (t) in (128) loc(\"ext.py\", 5) {\n"
         "      for i in serial(0, 4) {\n"
         "        q[t, i] = Q[t, i]\n"
         "      }\n"
         "      call_extern f16 decode_u4(&q[t, 0], &d[t, 0]) loc(\"ext.py\", 7)\n"
         "      for j in serial(0, 8) {\n"
         "        O[t, j] = d[t, j]\n"
         "      }\n"
         "    }\n"
         "    for i2 in serial(0, 4) {\n"
         "      ql[i2] = Q[0, i2]\n"
         "    }\n"
         "    call_extern f16 decode_u4(&ql[0], &dl[0]) loc(\"ext.py\", 9)\n"
         "    parallel (j2) in (8) {\n"
         "      Z[j2] = dl[j2]\n"
         "    }\n"
         "    alloc e: fragment[128, 8] f16\n"
         "    parallel (t3, c3) in (128, 8) loc(\"ext.py\", 11) {\n"
         "      e[t3, c3] = O[t3, c3]\n"
         "      call_extern i32 negate(&e[t3, c3])\n"
         "      O[t3, c3] = e[t3, c3]\n"
         "    }\n"
         "  }\n"
         "}\n";
}

tl::ir::Function ParseKernel() {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Kernel(), "ext.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? m->functions.at(0) : tl::ir::Function{};
}

tl::gpu::GpuLowerOptions Cuda() {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 99 * 1024;
  o.gemm = tl::gpu::GemmStrategy::kMmaSync;
  o.vector_copies = true;
  o.extern_calls = true;
  return o;
}

int CountCalls(const tl::gpu::SBlock& b, std::vector<const tl::gpu::SCallExtern*>* out) {
  int n = 0;
  for (const tl::gpu::SStmt& s : b) {
    if (const auto* c = std::get_if<tl::gpu::SCallExtern>(&s.node)) {
      out->push_back(c);
      ++n;
    } else if (const auto* f = std::get_if<tl::gpu::SFor>(&s.node)) {
      n += CountCalls(f->body, out);
    } else if (const auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
      n += CountCalls(i->then_body, out) + CountCalls(i->else_body, out);
    }
  }
  return n;
}

TEST(ExternCall, LoweredPerThreadWithPointersIntoMemory) {
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(ParseKernel(), Cuda());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_EQ(k->sources.size(), 2u);
  EXPECT_EQ(k->sources[0], kDecode);
  std::vector<const tl::gpu::SCallExtern*> calls;
  ASSERT_EQ(CountCalls(k->body, &calls), 3);
  for (const auto* c : calls) {
    if (c->name == "negate") continue;
    EXPECT_EQ(c->name, "decode_u4");
    ASSERT_EQ(c->args.size(), 2u);
    EXPECT_TRUE(c->args[0].address && c->args[1].address);
  }
  EXPECT_EQ(calls[0]->args[0].buffer, "q");
  EXPECT_EQ(calls[1]->args[1].buffer, "dl");
  // The fragments are in shared memory (an extern function walks memory);
  // the local arrays stay per-thread, addressed in their storage type.
  for (const tl::gpu::SimtBuffer& b : k->buffers) {
    if (b.name == "q" || b.name == "d" || b.name == "e") {
      EXPECT_EQ(b.space, tl::gpu::Space::kShared) << b.name;
    }
    if (b.name == "ql" || b.name == "dl") {
      EXPECT_EQ(b.space, tl::gpu::Space::kRegister) << b.name;
    }
  }
  EXPECT_EQ(k->addressed, (std::set<std::string>{"dl", "ql"}));
  bool noted = false;
  for (const std::string& n : k->notes) {
    // e alone would be in registers (written and read with the loop's own indices).
    noted = noted || n == "fragment e kept in shared memory: its address is passed to extern function negate "
                          "(parallel at ext.py:11)";
  }
  EXPECT_TRUE(noted) << tl::gpu::Dump(*k);

  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::string& s = src->source;
  const size_t imported = s.find(kDecode), entry = s.find("extern \"C\" __global__");
  ASSERT_NE(imported, std::string::npos) << s;
  EXPECT_LT(imported, entry);
  EXPECT_NE(s.find("typedef unsigned int uint;"), std::string::npos);
  EXPECT_NE(s.find("__align__(16) unsigned short dl[8];"), std::string::npos) << s;
  EXPECT_NE(s.find("__align__(16) unsigned char ql[4];"), std::string::npos) << s;
  EXPECT_NE(s.find("decode_u4(&ql[0], &dl[0]);"), std::string::npos) << s;
  EXPECT_NE(s.find("decode_u4(&q["), std::string::npos) << s;
  // Loads of the addressed f16 array decode its 16-bit patterns.
  EXPECT_NE(s.find("tl_h2f(dl["), std::string::npos) << s;
}

TEST(ExternCall, NvrtcCompilesSm90aAndComputeEighty) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(ParseKernel(), Cuda());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  for (const char* arch : {"sm_90a", "compute_80"}) {
    tl::StatusOr<cu::CompiledCode> c = tc->Compile(src->source, k->name, arch);
    ASSERT_TRUE(c.ok()) << arch << ": " << c.status().ToString();
    EXPECT_FALSE(c->bytes.empty());
    if (std::string(arch) == "compute_80") {
      const std::string ptx(c->bytes.begin(), c->bytes.end());
      EXPECT_NE(ptx.find("lop3.b32"), std::string::npos) << "the imported inline PTX is in the kernel";
      EXPECT_NE(ptx.find("sub.f16x2"), std::string::npos);
    }
    std::printf("[ decode_ext %s ] %s\n", arch, c->tool.c_str());
  }
}

TEST(ExternCall, OtherTargetsAndTheInterpreterRefuseIt) {
  tl::gpu::GpuLowerOptions vk;
  vk.target = "vulkan";
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(ParseKernel(), vk);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), tl::StatusCode::kUnimplemented);
  EXPECT_EQ(k.status().message(),
            "@decode_ext: call_extern at ext.py:7: T.call_extern with imported CUDA source runs only on CUDA targets: "
            "kernel 'decode_ext' calls extern function 'decode_u4', target vulkan");

  tl::StatusOr<tl::gpu::SimtKernel> cuda = tl::gpu::LowerToSimt(ParseKernel(), Cuda());
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  std::map<std::string, std::vector<double>> tensors = {
      {"Q", std::vector<double>(128 * 4, 1.0)}, {"O", std::vector<double>(128 * 8)}, {"Z", std::vector<double>(8)}};
  tl::Status run = tl::gpu::test::Interpret(*cuda, &tensors);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("extern call decode_u4: the SIMT interpreter cannot run T.import_source code"),
            std::string::npos)
      << run.message();
}

TEST(ExternCall, FragmentPassedOutsideParallelLivesInSharedMemory) {
  // A fragment passed outside T.Parallel is read there: demoted as well, so
  // its address is shared memory too (no register-layout pointer exists).
  const std::string text =
      "tileir 1\n\nfunc @f(Z: tensor[8] f16) loc(\"f.py\", 1) {\n"
      "  import_source \"__device__ void g(unsigned short* p) {}\\n\"\n"
      "  kernel grid(1) threads(32) -> (bx) {\n"
      "    alloc r: fragment[8] f16\n"
      "    fill r, 0.0:f16\n"
      "    call_extern i32 g(&r[0]) loc(\"f.py\", 4)\n"
      "    copy r -> Z\n"
      "  }\n}\n";
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text, "f.tir");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions[0], Cuda());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  for (const tl::gpu::SimtBuffer& b : k->buffers) {
    if (b.name == "r") {
      EXPECT_EQ(b.space, tl::gpu::Space::kShared);
    }
  }
}

}  // namespace
