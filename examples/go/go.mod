module tilelang.org/go/examples

go 1.19

require tilelang.org/go/tilelang v0.0.0

replace tilelang.org/go/tilelang => ../../bindings/go
