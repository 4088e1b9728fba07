package kernels

import (
	"fmt"
	"unsafe"
)

// vol addresses a 5-D tensor [N, C, D, H, W] with any strides (channels_last, slices,
// expanded views) as N*C volumes numbered n*C+c. The 1-D, 2-D and 3-D spatial kernels
// (padding, resampling, pooling) all run on it: Python views 3-D and 4-D inputs as 5-D
// with size-1 axes, which costs nothing.
type vol struct {
	t Tensor
}

func checkVol(ts ...Tensor) error {
	for _, t := range ts {
		if t.Dim() != 5 {
			return fmt.Errorf("expected 5-D [N, C, D, H, W] tensors, got %v", t.Sizes)
		}
		if err := t.Validate(); err != nil {
			return err
		}
	}
	for _, t := range ts[1:] {
		if t.Sizes[0] != ts[0].Sizes[0] || t.Sizes[1] != ts[0].Sizes[1] {
			return fmt.Errorf("batch/channel mismatch: %v vs %v", t.Sizes, ts[0].Sizes)
		}
	}
	return nil
}

func (v vol) count() int64 { return v.t.Sizes[0] * v.t.Sizes[1] }
func (v vol) d() int       { return int(v.t.Sizes[2]) }
func (v vol) h() int       { return int(v.t.Sizes[3]) }
func (v vol) w() int       { return int(v.t.Sizes[4]) }
func (v vol) size() int    { return v.d() * v.h() * v.w() }

// base is the byte offset of volume pc.
func (v vol) base(pc int64) int64 {
	n, c := pc/v.t.Sizes[1], pc%v.t.Sizes[1]
	return (n*v.t.Strides[0] + c*v.t.Strides[1]) * int64(v.t.DType.Size())
}

// offsets fills off[i] with the byte offset (from the volume base) of the i-th element
// in D, H, W row-major order.
func (v vol) offsets(off []int64) {
	es := int64(v.t.DType.Size())
	sd, sh, sw := v.t.Strides[2]*es, v.t.Strides[3]*es, v.t.Strides[4]*es
	i := 0
	for d := 0; d < v.d(); d++ {
		for h := 0; h < v.h(); h++ {
			o := int64(d)*sd + int64(h)*sh
			for w := 0; w < v.w(); w++ {
				off[i] = o + int64(w)*sw
				i++
			}
		}
	}
}

// loadF reads one element of dtype dt as float64 (exact for floats and for integers up
// to 2^53).
func loadF(p unsafe.Pointer, dt DType) float64 {
	switch dt {
	case Float32:
		return float64(*(*float32)(p))
	case BFloat16:
		return float64(BF16ToF32(*(*uint16)(p)))
	case Float16:
		return float64(F16ToF32(*(*uint16)(p)))
	case Float64:
		return *(*float64)(p)
	case Int64:
		return float64(*(*int64)(p))
	case Int32:
		return float64(*(*int32)(p))
	case Int16:
		return float64(*(*int16)(p))
	case Int8:
		return float64(*(*int8)(p))
	case Uint8, Bool:
		return float64(*(*uint8)(p))
	}
	panic(fmt.Sprintf("loadF: unsupported dtype %v", dt))
}

// storeF writes v as dtype dt (round to nearest-even for reduced floats; integers truncate
// toward zero as a C cast does).
func storeF(p unsafe.Pointer, dt DType, v float64) {
	switch dt {
	case Float32:
		*(*float32)(p) = float32(v)
	case BFloat16:
		*(*uint16)(p) = F32ToBF16(float32(v))
	case Float16:
		*(*uint16)(p) = F32ToF16(float32(v))
	case Float64:
		*(*float64)(p) = v
	case Int64:
		*(*int64)(p) = int64(v)
	case Int32:
		*(*int32)(p) = int32(v)
	case Int16:
		*(*int16)(p) = int16(v)
	case Int8:
		*(*int8)(p) = int8(v)
	case Uint8:
		*(*uint8)(p) = uint8(v)
	case Bool:
		if v != 0 {
			*(*uint8)(p) = 1
		} else {
			*(*uint8)(p) = 0
		}
	default:
		panic(fmt.Sprintf("storeF: unsupported dtype %v", dt))
	}
}

// copyElem copies one element of es bytes.
func copyElem(dst, src unsafe.Pointer, es int) {
	switch es {
	case 8:
		*(*uint64)(dst) = *(*uint64)(src)
	case 4:
		*(*uint32)(dst) = *(*uint32)(src)
	case 2:
		*(*uint16)(dst) = *(*uint16)(src)
	default:
		*(*uint8)(dst) = *(*uint8)(src)
	}
}

func (v vol) load(pc int64, off []int64, dst []float64) {
	b, dt := at(v.t.Ptr, v.base(pc)), v.t.DType
	if dt == Float32 {
		for i, o := range off {
			dst[i] = float64(*(*float32)(at(b, o)))
		}
		return
	}
	for i, o := range off {
		dst[i] = loadF(at(b, o), dt)
	}
}

func (v vol) store(pc int64, off []int64, src []float64) {
	b, dt := at(v.t.Ptr, v.base(pc)), v.t.DType
	if dt == Float32 {
		for i, o := range off {
			*(*float32)(at(b, o)) = float32(src[i])
		}
		return
	}
	for i, o := range off {
		storeF(at(b, o), dt, src[i])
	}
}

func (v vol) loadIdx(pc int64, off []int64, dst []int64) {
	b := at(v.t.Ptr, v.base(pc))
	for i, o := range off {
		dst[i] = *(*int64)(at(b, o))
	}
}

func (v vol) storeIdx(pc int64, off []int64, src []int64) {
	b := at(v.t.Ptr, v.base(pc))
	for i, o := range off {
		*(*int64)(at(b, o)) = src[i]
	}
}
