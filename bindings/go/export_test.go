package tilelang

// LaunchStaged launches with Go slices copied through device buffers, the
// path GPUs take, so that CPU-only machines test it too.
func LaunchStaged(p *Prepared, args ...Arg) error { return p.launch(nil, args, hostStage) }
