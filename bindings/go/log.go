package tilelang

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// LogLevel is the severity of a runtime log message.
type LogLevel int

const (
	LogError   LogLevel = 0
	LogWarning LogLevel = 1
	LogInfo    LogLevel = 2
	LogDebug   LogLevel = 3
)

func (l LogLevel) String() string {
	switch l {
	case LogError:
		return "error"
	case LogWarning:
		return "warning"
	case LogInfo:
		return "info"
	}
	return "debug"
}

// tlgoLog receives the runtime's log messages (through tlgo_log_shim, which
// adapts the C signature). `user` points at C memory holding a cgo.Handle of
// the sink.
//
//export tlgoLog
func tlgoLog(user unsafe.Pointer, level C.int, message *C.char, length C.size_t) {
	if user == nil || message == nil {
		return
	}
	h := cgo.Handle(*(*C.uintptr_t)(user))
	sink, ok := h.Value().(func(LogLevel, string))
	if !ok {
		return
	}
	defer func() { _ = recover() }() // a panicking sink must not unwind into C
	sink(LogLevel(level), C.GoStringN(message, C.int(length)))
}
