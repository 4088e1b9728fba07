package device

import "unsafe"

func unsafeAddr(p *int) unsafe.Pointer { return unsafe.Pointer(p) }
