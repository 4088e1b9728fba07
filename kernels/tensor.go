// Package kernels holds the tensor kernels that run on emulated device memory.
// Tensors arrive as raw descriptors (pointer, dtype, sizes, strides in elements);
// kernels never allocate device memory themselves.
package kernels

import (
	"fmt"
	"unsafe"
)

// DType codes are PyTorch's c10::ScalarType numbers, so every layer speaks one numbering.
type DType int32

const (
	Uint8    DType = 0
	Int8     DType = 1
	Int16    DType = 2
	Int32    DType = 3
	Int64    DType = 4
	Float16  DType = 5
	Float32  DType = 6
	Float64  DType = 7
	Bool     DType = 11
	BFloat16 DType = 15
)

type dtypeEntry struct {
	name string
	size int
}

// dtypeInfo is indexed by the dtype code (dense, small): Size and Valid sit on hot
// paths (reduction and elementwise inner loops), where a map lookup cost several percent.
var dtypeInfo = [...]dtypeEntry{
	Uint8: {"uint8", 1}, Int8: {"int8", 1}, Int16: {"int16", 2}, Int32: {"int32", 4},
	Int64: {"int64", 8}, Float16: {"float16", 2}, Float32: {"float32", 4},
	Float64: {"float64", 8}, Bool: {"bool", 1}, BFloat16: {"bfloat16", 2},
	Float8E5M2: {"float8_e5m2", 1}, Float8E4M3FN: {"float8_e4m3fn", 1},
}

func (d DType) entry() (dtypeEntry, bool) {
	if uint32(d) >= uint32(len(dtypeInfo)) || dtypeInfo[d].size == 0 {
		return dtypeEntry{}, false
	}
	return dtypeInfo[d], true
}

// Valid reports whether the dtype is one the emulator stores.
func (d DType) Valid() bool { _, ok := d.entry(); return ok }

// Size is the element size in bytes (0 for an unknown code).
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case Float64, Int64:
		return 8
	case Float16, BFloat16, Int16:
		return 2
	case Uint8, Int8, Bool, Float8E5M2, Float8E4M3FN:
		return 1
	}
	return 0
}

func (d DType) String() string {
	if i, ok := d.entry(); ok {
		return i.name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// IsFloat reports floating-point dtypes.
func (d DType) IsFloat() bool {
	return d == Float16 || d == Float32 || d == Float64 || d == BFloat16
}

// Tensor is a strided view of device (or host) memory. Ptr addresses element [0,...,0].
type Tensor struct {
	Ptr     unsafe.Pointer
	DType   DType
	Sizes   []int64
	Strides []int64
}

// Numel is the number of elements.
func (t Tensor) Numel() int64 {
	n := int64(1)
	for _, s := range t.Sizes {
		n *= s
	}
	return n
}

// Dim is the number of dimensions.
func (t Tensor) Dim() int { return len(t.Sizes) }

// IsContiguous reports row-major contiguity (size-1 dims may have any stride).
func (t Tensor) IsContiguous() bool {
	expect := int64(1)
	for i := len(t.Sizes) - 1; i >= 0; i-- {
		if t.Sizes[i] == 1 {
			continue
		}
		if t.Strides[i] != expect {
			return false
		}
		expect *= t.Sizes[i]
	}
	return true
}

// Validate checks the descriptor itself (not the memory it points at).
func (t Tensor) Validate() error {
	if !t.DType.Valid() {
		return fmt.Errorf("unsupported dtype code %d", int32(t.DType))
	}
	if len(t.Sizes) != len(t.Strides) {
		return fmt.Errorf("sizes and strides differ in length")
	}
	for _, s := range t.Sizes {
		if s < 0 {
			return fmt.Errorf("negative size %d", s)
		}
	}
	if t.Ptr == nil && t.Numel() > 0 {
		return fmt.Errorf("null data pointer for a tensor of %d elements", t.Numel())
	}
	return nil
}

// at returns the address of the element with linear byte offset off.
func at(p unsafe.Pointer, off int64) unsafe.Pointer { return unsafe.Add(p, off) }
