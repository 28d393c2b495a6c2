#!/usr/bin/env python3
"""How fast this GPU reads a buffer of the W4A16 weights' size (issue #11's decode rows): the realistic
floor for a 32 MiB read, measured the way tools/bench/hopper_bench.py times everything (L2 flushed by a
256 MiB memset before each run, the GPU spinning ~0.3 ms before the start event, median of the runs).

  python3 tools/bench/read_floor.py [MiB ...]      (default: 16 32 64 128 1024)

Per size: torch's sum of the buffer viewed as int32 (a pure read: every byte once, one float out) and
copy_ into a second buffer (read + write), each as µs and TB/s of the bytes moved. hopper_bench's
"floor µs" column divides by the 1 GiB copy bandwidth; a 32 MiB kernel cannot reach that (launch,
ramp-up and tail are a fixed cost of a few µs), which this script puts a number on.
"""
import statistics
import sys


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
