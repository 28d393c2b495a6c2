module tilelang.org/go/tilelang

go 1.19
