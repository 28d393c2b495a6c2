"""A tiny tile program for the `tl-pack build` CLI tests."""
import tilelang.language as T


def scale(N, factor=2.0, block=64, broken=False):
    if broken:
        raise ValueError("broken on purpose")
    N = T.dynamic(N) if isinstance(N, str) else N

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            x = T.alloc_fragment((block,), "float32")
            T.copy(X[bx * block], x)
            for i in T.Parallel(block):
                x[i] = x[i] * factor
            T.copy(x, Y[bx * block])

    return main
