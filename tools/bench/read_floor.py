#!/usr/bin/env python3
"""How fast this GPU reads a buffer of the W4A16 weights' size (issue #11's decode rows): the realistic
floor for a 32 MiB read, measured the way tools/bench/hopper_bench.py times everything (L2 flushed by a
256 MiB memset before each run, the GPU spinning ~0.3 ms before the start event, median of the runs).

  python3 tools/bench/read_floor.py [MiB ...]      (default: 16 32 64 128 1024)

Per size: torch's sum of the buffer viewed as int32 (a pure read: every byte once, one float out) and
copy_ into a second buffer (read + write), each as µs and TB/s of the bytes moved. hopper_bench's
"floor µs" column divides by the 1 GiB copy bandwidth; a 32 MiB kernel cannot reach that (launch,
ramp-up and tail are a fixed cost of a few µs), which this script puts a number on.

read_sum() below is the TileLang side of the same question, used by hopper_bench.py's W4A16 decode rows
("read floor"): a tile program that only reads the W4A16 case's own weight and scale buffers (viewed as
int32 words) and sums them, timed with the bench's own machinery and flush.
"""
import statistics
import sys


def read_sum_fits(n_w, n_s, blocks, threads, rows, cols, stages):
    """Why read_sum(n_w, n_s, cfg) cannot be built (a string), or None when it can."""
    if min(n_w, n_s, blocks, threads, rows, cols, stages) <= 0:
        return "every size must be positive"
    if cols % 4:
        return f"cols={cols} is not a whole number of 16-byte vectors (4 words)"
    if (rows * cols) % (4 * threads):
        return f"a step of {rows}x{cols} words is not one 16-byte vector per thread x {threads} threads"
    if n_w % (blocks * rows * cols):
        return f"{n_w} weight words are not {blocks} blocks of whole {rows}x{cols} steps"
    steps = n_w // (blocks * rows * cols)
    if n_s % (blocks * steps) or (n_s // (blocks * steps)) % 4:
        return f"{n_s} scale words are not {blocks} blocks x {steps} steps of whole 16-byte vectors"
    return None


def read_sum(n_w, n_s, blocks, threads, rows, cols, stages):
    """A pure read of the W4A16 weights and scales (n_w and n_s int32 words): the smallest tile program
    that moves every byte of both buffers into the SM once, with nothing else to do.

    Block b reads one contiguous chunk of each buffer: n_w / blocks words of W, as `steps` tiles of
    rows x cols words (W viewed as [n_w / cols, cols]), and n_s / blocks words of S, a slice per step
    alongside W's tile (S viewed as [blocks * steps, n_s / (blocks * steps)]: the decode kernels also
    read the scales beside the weights). Each tile goes global -> shared through T.copy (16-byte vector
    loads: ld.global.v4 at stages == 1, cp.async of 16 bytes through a T.Pipelined ring of `stages`
    tiles otherwise) and is added into a uint32 register fragment (wrapping, so the sum does not depend
    on the order or on which thread holds which word). The fragment is reduced along its columns:

      Out[b, r] = sum over steps k, columns c of W2[b * rows_per_block + k * rows + r, c]   (r < rows)
      Out[b, rows] = sum of block b's words of S

    both mod 2^32, stored as int32 (read_sum_ref computes the same from numpy arrays). The output
    (blocks x (rows + 1) words) keeps every load live and checks that each block read its own chunk.
    Signature: (W2 int32 [n_w / cols, cols], S2 int32 [blocks * steps, n_s / (blocks * steps)],
    Out int32 [blocks, rows + 1])."""
    import tilelang.language as T
    why = read_sum_fits(n_w, n_s, blocks, threads, rows, cols, stages)
    if why:
        raise ValueError(f"read_sum: {why}")
    steps = n_w // (blocks * rows * cols)
    rows_per_block = n_w // cols // blocks
    cs = n_s // (blocks * steps)  # scale words per block and step

    @T.macro
    def step(W2, S2, bx, k, ws, ss, acc, acc_s):
        T.copy(W2[bx * rows_per_block + k * rows, 0], ws)
        T.copy(S2[bx * steps + k, 0], ss)
        for i, j in T.Parallel(rows, cols):
            acc[i, j] = acc[i, j] + T.cast(ws[i, j], "uint32")
        for i, j in T.Parallel(1, cs):
            acc_s[i, j] = acc_s[i, j] + T.cast(ss[i, j], "uint32")

    @T.prim_func
    def main(W2: T.Tensor((n_w // cols, cols), "int32"), S2: T.Tensor((blocks * steps, cs), "int32"),
             Out: T.Tensor((blocks, rows + 1), "int32")):
        with T.Kernel(blocks, threads=threads) as bx:
            ws = T.alloc_shared((rows, cols), "int32")
            ss = T.alloc_shared((1, cs), "int32")
            acc = T.alloc_fragment((rows, cols), "uint32")
            acc_s = T.alloc_fragment((1, cs), "uint32")
            tot = T.alloc_fragment((rows,), "uint32")
            tot_s = T.alloc_fragment((1,), "uint32")
            T.clear(acc)
            T.clear(acc_s)
            # T.Pipelined at the kernel's top level (under a device `if` it is not pipelined)
            if stages > 1:
                for k in T.Pipelined(steps, num_stages=stages):
                    step(W2, S2, bx, k, ws, ss, acc, acc_s)
            else:
                for k in T.serial(steps):
                    step(W2, S2, bx, k, ws, ss, acc, acc_s)
            T.reduce_sum(acc, tot, dim=1)
            T.reduce_sum(acc_s, tot_s, dim=1)
            for i in T.Parallel(rows):
                Out[bx, i] = T.cast(tot[i], "int32")
            for i in T.Parallel(1):
                Out[bx, rows + i] = T.cast(tot_s[i], "int32")

    return main


def read_sum_views(w, s, cfg):
    """The W4A16 case's packed weights w (uint8 [N, K / 2]) and scales s (fp16 [N, K / group]), numpy or
    torch, viewed (no copy: the same memory) as read_sum's W2 and S2 for cfg."""
    blocks, _, rows, cols = cfg[:4]
    if hasattr(w, "cpu"):  # torch
        import torch
        w32, s32 = w.view(torch.int32).reshape(-1), s.view(torch.int32).reshape(-1)
    else:
        import numpy as np
        w32, s32 = w.view(np.int32).reshape(-1), s.view(np.int32).reshape(-1)
    steps = w32.shape[0] // (blocks * rows * cols)
    return w32.reshape(-1, cols), s32.reshape(blocks * steps, -1)


def read_sum_ref(w2, s2, cfg):
    """read_sum's Out for numpy W2 / S2 (read_sum_views), exactly: int32 [blocks, rows + 1]."""
    import numpy as np
    blocks, _, rows, cols = cfg[:4]
    w = np.asarray(w2).astype(np.int64).reshape(blocks, -1, rows, cols)  # [block, step, row, col]
    out = np.empty((blocks, rows + 1), np.int64)
    out[:, :rows] = w.sum(axis=(1, 3))
    out[:, rows] = np.asarray(s2).astype(np.int64).reshape(blocks, -1).sum(axis=1)
    return (out & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def main():
    import torch
    sizes = [int(a) for a in sys.argv[1:]] or [16, 32, 64, 128, 1024]
    dev = torch.device("cuda", 0)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    spin = getattr(torch.cuda, "_sleep", None)

    def time_us(fn, n=50):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            flush.zero_()
            if spin is not None:
                spin(600_000)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return 1e3 * statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))

    print(f"device: {torch.cuda.get_device_name(dev)}")
    print("| MiB | sum (read) µs | read TB/s | copy_ µs | copy TB/s (read + write) |")
    print("| --- | --- | --- | --- | --- |")
    for mib in sizes:
        nbytes = mib << 20
        src = torch.randint(-2**31, 2**31 - 1, (nbytes // 4,), dtype=torch.int32, device=dev)
        dst = torch.empty_like(src)
        t_sum = time_us(lambda: src.sum())
        t_copy = time_us(lambda: dst.copy_(src))
        print(f"| {mib} | {t_sum:.1f} | {nbytes / t_sum / 1e6:.2f} | {t_copy:.1f} | {2 * nbytes / t_copy / 1e6:.2f} |")
        del src, dst


if __name__ == "__main__":
    main()
