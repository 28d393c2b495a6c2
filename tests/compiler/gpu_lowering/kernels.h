// Test kernels (Tile IR text, static shapes that are not multiples of their
// tiles) shared by the compile tests and the H200 run tests.
#pragma once
#include <string>
#include <vector>

struct TestKernel {
  std::string name;
  std::string text;
};

inline std::string GemmF16(bool ta, bool tb, const std::string& dt = "f16") {
  // C[200,130] = op(A) op(B), K = 150, tiles 64x64x32, f16 operands, f32 accumulation.
  const std::string a_shape = ta ? "[150, 200]" : "[200, 150]";
  const std::string b_shape = tb ? "[130, 150]" : "[150, 130]";
  const std::string as = ta ? "shared[32, 64]" : "shared[64, 32]";
  const std::string bs = tb ? "shared[64, 32]" : "shared[32, 64]";
  const std::string ar = ta ? "A[k * 32:32, by * 64:64]" : "A[by * 64:64, k * 32:32]";
  const std::string br = tb ? "B[bx * 64:64, k * 32:32]" : "B[k * 32:32, bx * 64:64]";
  const std::string name = "gemm_" + dt + "_" + (ta ? "t" : "n") + (tb ? "t" : "n");
  return "tileir 1\n\nfunc @" + name + "(A: tensor" + a_shape + " " + dt + ", B: tensor" + b_shape +
         " " + dt + ", C: tensor[200, 130] f32) {\n"
         "  kernel grid(3, 4) threads(128) -> (bx, by) {\n"
         "    alloc A_s: " + as + " " + dt + "\n    alloc B_s: " + bs + " " + dt + "\n"
         "    alloc C_f: fragment[64, 64] f32\n    fill C_f, 0.0:f32\n"
         "    for k in pipelined(0, 5, stages=2) {\n"
         "      copy " + ar + " -> A_s\n      copy " + br + " -> B_s\n"
         "      gemm A_s, B_s -> C_f" + (ta ? " trans_a" : "") + (tb ? " trans_b" : "") + "\n    }\n"
         "    copy C_f -> C[by * 64:64, bx * 64:64]\n  }\n}\n";
}

inline std::vector<TestKernel> TestKernels() {
  std::vector<TestKernel> k;
  k.push_back({"elementwise", R"(tileir 1

func @elementwise(A: tensor[1000, 77] f32, B: tensor[1000, 77] f32, C: tensor[1000, 77] f32) {
  kernel grid(ceildiv(77, 32), ceildiv(1000, 64)) threads(128) -> (bx, by) {
    alloc a: fragment[64, 32] f32
    alloc b: fragment[64, 32] f32
    copy A[by * 64:64, bx * 32:32] -> a
    copy B[by * 64:64, bx * 32:32] -> b
    parallel (i, j) in (64, 32) {
      a[i, j] = a[i, j] * 2.0:f32 + b[i, j]
    }
    copy a -> C[by * 64:64, bx * 32:32]
  }
}
)"});
  k.push_back({"softmax", R"(tileir 1

func @softmax(X: tensor[300, 100] f32, Y: tensor[300, 100] f32) {
  kernel grid(ceildiv(300, 8)) threads(128) -> (bx) {
    alloc x: fragment[8, 100] f32
    alloc m: fragment[8] f32
    alloc s: fragment[8] f32
    copy X[bx * 8:8, 0:100] -> x
    reduce max x -> m dim=1 clear
    parallel (i, j) in (8, 100) {
      x[i, j] = exp(x[i, j] - m[i])
    }
    reduce sum x -> s dim=1 clear
    parallel (i2, j2) in (8, 100) {
      x[i2, j2] = x[i2, j2] / s[i2]
    }
    copy x -> Y[bx * 8:8, 0:100]
  }
}
)"});
  k.push_back({"rowsum", R"(tileir 1

func @rowsum(X: tensor[333, 250] f32, Y: tensor[333] f32) {
  kernel grid(ceildiv(333, 4)) threads(256) -> (bx) {
    alloc x: fragment[4, 250] f32
    alloc r: fragment[4] f32
    copy X[bx * 4:4, 0:250] -> x
    reduce sum x -> r dim=1 clear
    copy r -> Y[bx * 4:4]
  }
}
)"});
  k.push_back({"rmsnorm", R"(tileir 1

func @rmsnorm(X: tensor[257, 96] f32, W: tensor[96] f32, Y: tensor[257, 96] f32) {
  kernel grid(ceildiv(257, 2)) threads(64) -> (bx) {
    alloc x: fragment[2, 96] f32
    alloc sq: fragment[2, 96] f32
    alloc ss: fragment[2] f32
    copy X[bx * 2:2, 0:96] -> x
    parallel (i, j) in (2, 96) {
      sq[i, j] = x[i, j] * x[i, j]
    }
    reduce sum sq -> ss dim=1 clear
    parallel (i2, j2) in (2, 96) {
      x[i2, j2] = x[i2, j2] * rsqrt(ss[i2] / 96.0:f32 + 1e-6:f32) * W[j2]
    }
    copy x -> Y[bx * 2:2, 0:96]
  }
}
)"});
  k.push_back({"gemm_f32", R"(tileir 1

func @gemm_f32(A: tensor[200, 150] f32, B: tensor[150, 130] f32, C: tensor[200, 130] f32) {
  kernel grid(ceildiv(130, 64), ceildiv(200, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] f32
    alloc B_s: shared[32, 64] f32
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, ceildiv(150, 32), stages=3) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  for (int t = 0; t < 4; ++t) k.push_back({GemmF16(t & 2, t & 1).substr(16, 11), GemmF16(t & 2, t & 1)});
  k.push_back({"gemm_bf16_tn", GemmF16(true, false, "bf16")});
  k.push_back({"cumsum", R"(tileir 1

func @cumsum(X: tensor[100, 50] f32, Y: tensor[100, 50] f32) {
  kernel grid(ceildiv(100, 16)) threads(128) -> (bx) {
    alloc s: shared[16, 50] f32
    copy X[bx * 16:16, 0:50] -> s
    cumsum s -> s dim=1
    copy s -> Y[bx * 16:16, 0:50]
  }
}
)"});
  k.push_back({"splitk", R"(tileir 1

func @splitk(A: tensor[96, 512] f32, B: tensor[512, 80] f32, C: tensor[96, 80] f32) {
  kernel grid(ceildiv(80, 32), ceildiv(96, 32), 4) threads(64) -> (bx, by, bz) {
    alloc A_s: shared[32, 32] f32
    alloc B_s: shared[32, 32] f32
    alloc C_f: fragment[32, 32] f32
    fill C_f, 0.0:f32
    for k in serial(0, 4) {
      copy A[by * 32:32, bz * 128 + k * 32:32] -> A_s
      copy B[bz * 128 + k * 32:32, bx * 32:32] -> B_s
      gemm A_s, B_s -> C_f
    }
    atomic_add C_f -> C[by * 32:32, bx * 32:32]
  }
}
)"});
  // Tensor-core kinds beyond f16/bf16: f32 as tf32 (lowered with tf32 on) and
  // i8 x i8 -> i32 (B transposed: the k-contiguous form int8 mma wants).
  k.push_back({"gemm_tf32", R"(tileir 1

func @gemm_tf32(A: tensor[200, 150] f32, B: tensor[150, 130] f32, C: tensor[200, 130] f32) {
  kernel grid(ceildiv(130, 64), ceildiv(200, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] f32
    alloc B_s: shared[32, 64] f32
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in serial(0, ceildiv(150, 32)) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  k.push_back({"gemm_i8", R"(tileir 1

func @gemm_i8(A: tensor[200, 150] i8, B: tensor[130, 150] i8, C: tensor[200, 130] i32) {
  kernel grid(ceildiv(130, 64), ceildiv(200, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] i8
    alloc B_s: shared[64, 32] i8
    alloc C_f: fragment[64, 64] i32
    fill C_f, 0:i32
    for k in serial(0, ceildiv(150, 32)) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[bx * 64:64, k * 32:32] -> B_s
      gemm A_s, B_s -> C_f trans_b
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  // T.Parallel indexing global tensors past their extents (no user guard):
  // loads there read 0, stores there are dropped (upstream's safe memory).
  k.push_back({"edges", R"(tileir 1

func @edges(X: tensor[77, 45] f32, Y: tensor[77, 45] f32) {
  kernel grid(ceildiv(45, 16), ceildiv(77, 32)) threads(128) -> (bx, by) {
    parallel (i, j) in (32, 16) {
      Y[by * 32 + i, bx * 16 + j] = X[by * 32 + i, bx * 16 + j] * 2.0:f32 + X[by * 32 + i, bx * 16 + j - 1]
    }
  }
}
)"});
  // Dynamic M, N, K (shape symbols passed as kernel parameters by the runtime).
  k.push_back({"gemm_dyn", R"(tileir 1

func @gemm_dyn(A: tensor[M, K] f16, B: tensor[K, N] f16, C: tensor[M, N] f32) dynamic(M: i32, N: i32, K: i32) {
  kernel grid(ceildiv(N, 64), ceildiv(M, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] f16
    alloc B_s: shared[32, 64] f16
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, ceildiv(K, 32), stages=2) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    parallel (i, j) in (64, 64) {
      C_f[i, j] = C_f[i, j] * 0.5:f32 + cast<f32>(K)
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  // An f16 accumulator (upstream's accum_dtype="float16"): tensor cores,
  // accumulated in f32 registers, rounded to f16 when stored.
  k.push_back({"gemm_f16acc", R"(tileir 1

func @gemm_f16acc(A: tensor[200, 150] f16, B: tensor[150, 130] f16, C: tensor[200, 130] f16) {
  kernel grid(ceildiv(130, 64), ceildiv(200, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] f16
    alloc B_s: shared[32, 64] f16
    alloc C_f: fragment[64, 64] f16
    fill C_f, 0.0:f16
    for k in pipelined(0, ceildiv(150, 32), stages=3) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  // FlashAttention forward, causal (the conformance kernel's Tile IR, B2 H2
  // S100 D32, 64x32 tiles), its K/V loop as a 3-stage cp.async pipeline; the
  // first block's loop has 2 iterations, fewer than the prologue's 2 + 1.
  k.push_back({"flash_attn", R"(tileir 1

func @flash_attn(Q: tensor[2, 2, 100, 32] f16, K: tensor[2, 2, 100, 32] f16, V: tensor[2, 2, 100, 32] f16, Output: tensor[2, 2, 100, 32] f16) {
  kernel grid(2, 2, 2) threads(128) -> (bx, by, bz) {
    alloc Q_shared: shared[64, 32] f16
    alloc K_shared: shared[32, 32] f16
    alloc V_shared: shared[32, 32] f16
    alloc O_shared: shared[64, 32] f16
    alloc acc_s: fragment[64, 32] f32
    alloc acc_s_cast: fragment[64, 32] f16
    alloc acc_o: fragment[64, 32] f32
    alloc scores_max: fragment[64] f32
    alloc scores_max_prev: fragment[64] f32
    alloc scores_scale: fragment[64] f32
    alloc scores_sum: fragment[64] f32
    alloc logsum: fragment[64] f32
    copy Q[bz, by, bx * 64:64, 0:32] -> Q_shared
    fill acc_o, 0.0:f32
    fill logsum, 0.0:f32
    fill scores_max, -inf:f32
    let loop_range = min(4, ceildiv((bx + 1) * 64, 32))
    for k in pipelined(0, loop_range, stages=3) {
      copy K[bz, by, k * 32:32, 0:32] -> K_shared
      parallel (i, j) in (64, 32) {
        let q_idx = bx * 64 + i
        let k_idx = k * 32 + j
        acc_s[i, j] = select(q_idx >= k_idx && k_idx < 100, 0.0:f32, -inf:f32)
      }
      gemm Q_shared, K_shared -> acc_s trans_b policy=full_row
      copy scores_max -> scores_max_prev
      reduce max acc_s -> scores_max dim=1
      parallel (i_1) in (64) {
        scores_scale[i_1] = exp2(scores_max_prev[i_1] * 0.25503486:f32 - scores_max[i_1] * 0.25503486:f32)
      }
      parallel (i_2, j_1) in (64, 32) {
        acc_s[i_2, j_1] = exp2(acc_s[i_2, j_1] * 0.25503486:f32 - scores_max[i_2] * 0.25503486:f32)
      }
      reduce sum acc_s -> scores_sum dim=1 clear
      parallel (i_3) in (64) {
        logsum[i_3] = logsum[i_3] * scores_scale[i_3] + scores_sum[i_3]
      }
      copy acc_s -> acc_s_cast
      parallel (i_4, j_2) in (64, 32) {
        acc_o[i_4, j_2] = acc_o[i_4, j_2] * scores_scale[i_4]
      }
      copy V[bz, by, k * 32:32, 0:32] -> V_shared
      gemm acc_s_cast, V_shared -> acc_o policy=full_row
    }
    parallel (i_5, j_3) in (64, 32) {
      acc_o[i_5, j_3] = acc_o[i_5, j_3] / logsum[i_5]
    }
    copy acc_o -> O_shared
    copy O_shared -> Output[bz, by, bx * 64:64, 0:32]
  }
}
)"});
  // FlashAttention with two warpgroups (block_M 128, 256 threads, 2 stages,
  // 5 k-steps, the last ragged; not causal): on sm_90a the warp-specialized
  // synchronous-compute form, whose two consumer warpgroups run the k-loop
  // without a barrier between them (warp_specialize.cc).
  k.push_back({"flash_attn_2wg", R"(tileir 1

func @flash_attn_2wg(Q: tensor[1, 2, 300, 64] f16, K: tensor[1, 2, 300, 64] f16, V: tensor[1, 2, 300, 64] f16, Output: tensor[1, 2, 300, 64] f16) {
  kernel grid(3, 2, 1) threads(256) -> (bx, by, bz) {
    alloc Q_shared: shared[128, 64] f16
    alloc K_shared: shared[64, 64] f16
    alloc V_shared: shared[64, 64] f16
    alloc O_shared: shared[128, 64] f16
    alloc acc_s: fragment[128, 64] f32
    alloc acc_s_cast: fragment[128, 64] f16
    alloc acc_o: fragment[128, 64] f32
    alloc scores_max: fragment[128] f32
    alloc scores_max_prev: fragment[128] f32
    alloc scores_scale: fragment[128] f32
    alloc scores_sum: fragment[128] f32
    alloc logsum: fragment[128] f32
    copy Q[bz, by, bx * 128:128, 0:64] -> Q_shared
    fill acc_o, 0.0:f32
    fill logsum, 0.0:f32
    fill scores_max, -inf:f32
    for k in pipelined(0, 5, stages=2) {
      copy K[bz, by, k * 64:64, 0:64] -> K_shared
      parallel (i, j) in (128, 64) {
        acc_s[i, j] = select(k * 64 + j < 300, 0.0:f32, -inf:f32)
      }
      gemm Q_shared, K_shared -> acc_s trans_b policy=full_row
      copy scores_max -> scores_max_prev
      reduce max acc_s -> scores_max dim=1
      parallel (i_1) in (128) {
        scores_scale[i_1] = exp2(scores_max_prev[i_1] * 0.18033688:f32 - scores_max[i_1] * 0.18033688:f32)
      }
      parallel (i_2, j_1) in (128, 64) {
        acc_s[i_2, j_1] = exp2(acc_s[i_2, j_1] * 0.18033688:f32 - scores_max[i_2] * 0.18033688:f32)
      }
      reduce sum acc_s -> scores_sum dim=1 clear
      parallel (i_3) in (128) {
        logsum[i_3] = logsum[i_3] * scores_scale[i_3] + scores_sum[i_3]
      }
      copy acc_s -> acc_s_cast
      parallel (i_4, j_2) in (128, 64) {
        acc_o[i_4, j_2] = acc_o[i_4, j_2] * scores_scale[i_4]
      }
      copy V[bz, by, k * 64:64, 0:64] -> V_shared
      gemm acc_s_cast, V_shared -> acc_o policy=full_row
    }
    parallel (i_5, j_3) in (128, 64) {
      acc_o[i_5, j_3] = acc_o[i_5, j_3] / logsum[i_5]
    }
    copy acc_o -> O_shared
    copy O_shared -> Output[bz, by, bx * 128:128, 0:64]
  }
}
)"});
  // The timing kernel: 2048^3 f16 -> f32, 128x128x32 tiles, 256 threads.
  // TMA on sm_90a (tensor maps, mbarriers): rows a multiple of 16 bytes,
  // tiles partial in M, N and K (zero-filled by the hardware), the operands'
  // padded rows written by boxes as wide as the padded row.
  k.push_back({"gemm_tma", R"(tileir 1

func @gemm_tma(A: tensor[200, 152] f16, B: tensor[152, 136] f16, C: tensor[200, 136] f32) {
  kernel grid(ceildiv(136, 64), ceildiv(200, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] f16
    alloc B_s: shared[32, 64] f16
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, ceildiv(152, 32), stages=3) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  // Split-K as kernels/gemm.py matmul_splitk: K = 448 is 14 k-steps of 32 over 3 splits of 5 (the last
  // split's 5th step lies past K: its TMA box reads zeros), 128 x 64 tiles partial in M (100 rows), pipelined
  // (TMA + wgmma on sm_90a), each split's tile added into f32 C with atomics.
  k.push_back({"splitk_tma", R"(tileir 1

func @splitk_tma(A: tensor[100, 448] f16, B: tensor[448, 136] f16, C: tensor[100, 136] f32) {
  kernel grid(ceildiv(136, 64), ceildiv(100, 128), 3) threads(256) -> (bx, by, bz) {
    alloc A_s: shared[128, 32] f16
    alloc B_s: shared[32, 64] f16
    alloc C_f: fragment[128, 64] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, 5, stages=3) {
      copy A[by * 128:128, (bz * 5 + k) * 32:32] -> A_s
      copy B[(bz * 5 + k) * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    atomic_add C_f -> C[by * 128:128, bx * 64:64]
  }
}
)"});
  // The same split-K into an f16 C: each split's f32 accumulator rounded to f16 and added in column pairs
  // (f16x2 vector atomics on CUDA).
  k.push_back({"splitk_f16c", R"(tileir 1

func @splitk_f16c(A: tensor[100, 448] f16, B: tensor[448, 136] f16, C: tensor[100, 136] f16) {
  kernel grid(ceildiv(136, 64), ceildiv(100, 64), 3) threads(128) -> (bx, by, bz) {
    alloc A_s: shared[64, 32] f16
    alloc B_s: shared[32, 64] f16
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, 5, stages=2) {
      copy A[by * 64:64, (bz * 5 + k) * 32:32] -> A_s
      copy B[(bz * 5 + k) * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    atomic_add C_f -> C[by * 64:64, bx * 64:64]
  }
}
)"});
  // atomic_add into 16-bit floats: 4 rows of X added into Y (f16 runs; bf16 is compiled for every arch:
  // red.add.noftz.bf16 on sm_90a, a compare-and-swap loop before).
  for (const char* dt : {"f16", "bf16"}) {
    const std::string name = std::string("atomic_add_") + dt;
    k.push_back({name, "tileir 1\n\nfunc @" + name + "(X: tensor[4, 200] " + dt + ", Y: tensor[200] " + dt +
                           ") {\n  kernel grid(ceildiv(200, 64), 4) threads(64) -> (bx, by) {\n"
                           "    alloc x: fragment[64] f32\n    copy X[by, bx * 64:64] -> x\n"
                           "    atomic_add x -> Y[bx * 64:64]\n  }\n}\n"});
  }
  k.push_back({"gemm_big", R"(tileir 1

func @gemm_big(A: tensor[2048, 2048] f16, B: tensor[2048, 2048] f16, C: tensor[2048, 2048] f32) {
  kernel grid(16, 16) threads(256) -> (bx, by) {
    alloc A_s: shared[128, 32] f16
    alloc B_s: shared[32, 128] f16
    alloc C_f: fragment[128, 128] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, 64, stages=2) {
      copy A[by * 128:128, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 128:128] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 128:128, bx * 128:128]
  }
}
)"});
  // upstream's example_mha_fwd_bshd (B1 S100 H2 D64, 64x64 tiles, not
  // causal, keys past S masked): its row vectors have their own 1-D T.Parallel
  // loops, fills and a row-vector copy, and stay in registers in the
  // replicated row layout of the reductions; LSE is stored from a 1-D loop
  // over that replicated layout (one lane of each group stores).
  k.push_back({"flash_attn_rowvec", R"(tileir 1

func @flash_attn_rowvec(Q: tensor[1, 100, 2, 64] f16, K: tensor[1, 100, 2, 64] f16, V: tensor[1, 100, 2, 64] f16, Output: tensor[1, 100, 2, 64] f16, LSE: tensor[1, 2, 100] f32) {
  kernel grid(2, 2, 1) threads(128) -> (bx, by, bz) {
    alloc Q_shared: shared[64, 64] f16
    alloc K_shared: shared[64, 64] f16
    alloc V_shared: shared[64, 64] f16
    alloc O_shared: shared[64, 64] f16
    alloc acc_s: fragment[64, 64] f32
    alloc acc_s_cast: fragment[64, 64] f16
    alloc acc_o: fragment[64, 64] f32
    alloc scores_max: fragment[64] f32
    alloc scores_max_prev: fragment[64] f32
    alloc scores_scale: fragment[64] f32
    alloc scores_sum: fragment[64] f32
    alloc logsum: fragment[64] f32
    copy Q[bz, bx * 64:64, by, 0:64] -> Q_shared
    fill acc_o, 0.0:f32
    fill logsum, 0.0:f32
    fill scores_max, -inf:f32
    for k in pipelined(0, 2, stages=1) {
      copy K[bz, k * 64:64, by, 0:64] -> K_shared
      parallel (i, j) in (64, 64) {
        acc_s[i, j] = select(k * 64 + j >= 100, -inf:f32, 0.0:f32)
      }
      gemm Q_shared, K_shared -> acc_s trans_b policy=full_row
      copy scores_max -> scores_max_prev
      fill scores_max, -inf:f32
      reduce max acc_s -> scores_max dim=1
      parallel (i_1) in (64) {
        scores_max[i_1] = max(scores_max[i_1], scores_max_prev[i_1])
      }
      parallel (i_2) in (64) {
        scores_scale[i_2] = exp2(scores_max_prev[i_2] * 0.18033688:f32 - scores_max[i_2] * 0.18033688:f32)
      }
      parallel (i_3, j_1) in (64, 64) {
        acc_s[i_3, j_1] = exp2(acc_s[i_3, j_1] * 0.18033688:f32 - scores_max[i_3] * 0.18033688:f32)
      }
      reduce sum acc_s -> scores_sum dim=1 clear
      parallel (i_4) in (64) {
        logsum[i_4] = logsum[i_4] * scores_scale[i_4] + scores_sum[i_4]
      }
      copy acc_s -> acc_s_cast
      parallel (i_5, j_2) in (64, 64) {
        acc_o[i_5, j_2] = acc_o[i_5, j_2] * scores_scale[i_5]
      }
      copy V[bz, k * 64:64, by, 0:64] -> V_shared
      gemm acc_s_cast, V_shared -> acc_o policy=full_row
    }
    parallel (i_6, j_3) in (64, 64) {
      acc_o[i_6, j_3] = acc_o[i_6, j_3] / logsum[i_6]
    }
    parallel (i_7) in (64) {
      LSE[bz, by, bx * 64 + i_7] = log2(logsum[i_7]) + scores_max[i_7] * 0.18033688:f32
    }
    copy acc_o -> O_shared
    copy O_shared -> Output[bz, bx * 64:64, by, 0:64]
  }
}
)"});
  // Thread-level TIR as the frontend rewrites it (compiler/python/tilelang/language/threads.py;
  // tests/python/frontend/test_frontend_threads.py's gemv(50, 512) and simt_gemm(64, 96, 48)):
  // per-thread locals as fragments indexed by the thread, per-thread code as T.Parallel over the
  // threads (2-D threads(32, 4) for the GEMV), tvm_thread_allreduce as a reduce plus a broadcast.
  k.push_back({"gemv_threads", R"(tileir 1

func @gemv_threads(A: tensor[1, 512] f16, W: tensor[50, 512] f16, C: tensor[1, 50] f32) {
  kernel grid(13, 1) threads(32, 4) -> (bx, by) {
    alloc a_local_t: fragment[4, 32, 8] f16
    alloc w_local_t: fragment[4, 32, 8] f16
    alloc acc_t: fragment[4, 32, 1] f32
    alloc red_t: fragment[4, 32, 1] f32
    alloc allreduce_src: fragment[4, 32] f32
    alloc allreduce_dst: fragment[4] f32
    parallel (ty_1, tx_1) in (4, 32) {
      for e in serial(0, 1) {
        acc_t[ty_1, tx_1, e] = 0.0:f32
      }
      for ko in serial(0, 2) {
        for v in serial(0, 8) {
          a_local_t[ty_1, tx_1, v] = A[by, ko * 256 + tx_1 * 8 + v]
        }
        for v_1 in serial(0, 8) {
          w_local_t[ty_1, tx_1, v_1] = W[bx * 4 + ty_1, ko * 256 + tx_1 * 8 + v_1]
        }
        for ki in serial(0, 8) {
          acc_t[ty_1, tx_1, 0] = acc_t[ty_1, tx_1, 0] + cast<f32>(a_local_t[ty_1, tx_1, ki]) * cast<f32>(w_local_t[ty_1, tx_1, ki])
        }
      }
    }
    parallel (ty_2, tx_2) in (4, 32) {
      allreduce_src[ty_2, tx_2] = acc_t[ty_2, tx_2, 0]
    }
    reduce sum allreduce_src -> allreduce_dst dim=1 clear
    parallel (ty_3, tx_3) in (4, 32) {
      red_t[ty_3, tx_3, 0] = allreduce_dst[ty_3]
    }
    parallel (ty_4, tx_4) in (4, 32) {
      if tx_4 == 0 {
        C[by, bx * 4 + ty_4] = red_t[ty_4, tx_4, 0]
      }
    }
  }
}
)"});
  k.push_back({"simt_gemm_threads", R"(tileir 1

func @simt_gemm_threads(A: tensor[64, 48] f16, B: tensor[96, 48] f16, C: tensor[64, 96] f32) {
  kernel grid(3, 2) threads(64) -> (bx, by) {
    alloc A_s: shared[32, 16] f16
    alloc B_s: shared[32, 16] f16
    alloc a_l_t: fragment[64, 4, 4] f16
    alloc b_l_t: fragment[64, 4, 4] f16
    alloc c_l_t: fragment[64, 16] f32
    parallel (tx_1) in (64) {
      let warp_m = tx_1 % 8
      let warp_n = tx_1 / 8
      for e in serial(0, 16) {
        c_l_t[tx_1, e] = 0.0:f32
      }
    }
    for ko in serial(0, 3) {
      parallel (i, k) in (32, 16) {
        A_s[i, k] = A[by * 32 + i, ko * 16 + k]
      }
      parallel (j, k_1) in (32, 16) {
        B_s[j, k_1] = B[bx * 32 + j, ko * 16 + k_1]
      }
      parallel (tx_2) in (64) {
        for ki in serial(0, 4) {
          for i_1 in serial(0, 4) {
            for m in serial(0, 4) {
              a_l_t[tx_2, i_1, m] = A_s[tx_2 % 8 * 4 + i_1, ki * 4 + m]
            }
          }
          for j_1 in serial(0, 4) {
            for m_1 in serial(0, 4) {
              b_l_t[tx_2, j_1, m_1] = B_s[tx_2 / 8 * 4 + j_1, ki * 4 + m_1]
            }
          }
          for i_2 in serial(0, 4) {
            for j_2 in serial(0, 4) {
              for m_2 in serial(0, 4) {
                c_l_t[tx_2, i_2 * 4 + j_2] = c_l_t[tx_2, i_2 * 4 + j_2] + cast<f32>(a_l_t[tx_2, i_2, m_2]) * cast<f32>(b_l_t[tx_2, j_2, m_2])
              }
            }
          }
        }
      }
    }
    parallel (tx_3) in (64) {
      for i_3 in serial(0, 4) {
        for j_3 in serial(0, 4) {
          C[by * 32 + tx_3 % 8 * 4 + i_3, bx * 32 + tx_3 / 8 * 4 + j_3] = c_l_t[tx_3, i_3 * 4 + j_3]
        }
      }
    }
  }
}
)"});
  return k;
}
