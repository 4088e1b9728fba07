package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Copy writes src into dst elementwise, converting dtypes the way PyTorch's copy_ does.
// Shapes must match exactly (broadcasting is the caller's job: pass src with 0 strides).
func Copy(dst, src Tensor) error {
	if err := dst.Validate(); err != nil {
		return fmt.Errorf("copy: destination: %v", err)
	}
	if err := src.Validate(); err != nil {
		return fmt.Errorf("copy: source: %v", err)
	}
	if len(dst.Sizes) != len(src.Sizes) {
		return fmt.Errorf("copy: shape mismatch %v vs %v", dst.Sizes, src.Sizes)
	}
	for i := range dst.Sizes {
		if dst.Sizes[i] != src.Sizes[i] {
			return fmt.Errorf("copy: shape mismatch %v vs %v", dst.Sizes, src.Sizes)
		}
	}
	l := newLayout(dst.Sizes, [][]int64{dst.Strides, src.Strides}, []int{dst.DType.Size(), src.DType.Size()})
	if dst.DType == src.DType && copyShortRows(l, dst.Ptr, src.Ptr, int64(dst.DType.Size())) {
		return nil
	}
	l.run([]unsafe.Pointer{dst.Ptr, src.Ptr}, 1, convertRow(dst.DType, src.DType))
	return nil
}

func convertRow(dt, st DType) rowFunc {
	if dt == st {
		es := int64(dt.Size())
		return func(p []unsafe.Pointer, s []int64, n int64) {
			if s[0] == es && s[1] == es {
				copy(unsafe.Slice((*byte)(p[0]), n*es), unsafe.Slice((*byte)(p[1]), n*es))
				return
			}
			switch es {
			case 1:
				stridedCopy[uint8](p, s, n)
			case 2:
				stridedCopy[uint16](p, s, n)
			case 4:
				stridedCopy[uint32](p, s, n)
			default:
				stridedCopy[uint64](p, s, n)
			}
		}
	}
	if dt == BFloat16 && st == Float32 {
		return func(p []unsafe.Pointer, s []int64, n int64) {
			if s[0] == 2 && s[1] == 4 {
				f32ToBF16s(unsafe.Slice((*uint16)(p[0]), n), unsafe.Slice((*float32)(p[1]), n))
				return
			}
			for i := int64(0); i < n; i++ {
				*(*uint16)(at(p[0], i*s[0])) = F32ToBF16(*(*float32)(at(p[1], i*s[1])))
			}
		}
	}
	if dt == Float32 && st == BFloat16 {
		return func(p []unsafe.Pointer, s []int64, n int64) {
			if s[0] == 4 && s[1] == 2 {
				bf16ToF32s(unsafe.Slice((*float32)(p[0]), n), unsafe.Slice((*uint16)(p[1]), n))
				return
			}
			for i := int64(0); i < n; i++ {
				*(*float32)(at(p[0], i*s[0])) = BF16ToF32(*(*uint16)(at(p[1], i*s[1])))
			}
		}
	}
	integral := !dt.IsFloat() && !st.IsFloat() && !dt.IsFloat8() && !st.IsFloat8()
	return func(p []unsafe.Pointer, s []int64, n int64) {
		const chunk = 512
		if integral {
			var buf [chunk]int64
			for lo := int64(0); lo < n; lo += chunk {
				m := min(chunk, n-lo)
				loadInt(buf[:m], st, at(p[1], lo*s[1]), s[1])
				storeInt(at(p[0], lo*s[0]), s[0], dt, buf[:m])
			}
			return
		}
		var buf [chunk]float64
		for lo := int64(0); lo < n; lo += chunk {
			m := min(chunk, n-lo)
			loadFloat(buf[:m], st, at(p[1], lo*s[1]), s[1])
			storeFloat(at(p[0], lo*s[0]), s[0], dt, buf[:m])
		}
	}
}

// copyShortRows copies a same-dtype layout whose inner rows are short and contiguous on
// both sides (a permute that keeps the last dim, e.g. splitting attention heads) without
// the generic per-row call: the row loop steps the offsets itself and moves each row
// with one fixed-size load and store. Reports false for layouts it does not handle.
func copyShortRows(l layout, dp, sp unsafe.Pointer, es int64) bool {
	d := len(l.sizes)
	if d < 2 || d > 16 {
		return false
	}
	ds, ss, sz := l.strides[0], l.strides[1], l.sizes
	rb := sz[d-1] * es
	if ds[d-1] != es || ss[d-1] != es || rb > 256 {
		return false
	}
	rows := int64(1)
	for _, n := range sz[:d-1] {
		rows *= n
	}
	ParallelFor(rows, sz[d-1], func(lo, hi int64) {
		var idx [16]int64
		var do, so int64
		rem := lo
		for k := d - 2; k >= 0; k-- {
			idx[k] = rem % sz[k]
			rem /= sz[k]
			do += idx[k] * ds[k]
			so += idx[k] * ss[k]
		}
		m, dm, sm := sz[d-2], ds[d-2], ss[d-2]
		for r := lo; r < hi; {
			// the rows left along dim d-2, then the odometer over the outer dims
			jn := min(m-idx[d-2], hi-r)
			q, p := at(dp, do), at(sp, so)
			switch rb {
			case 64:
				for j := int64(0); j < jn; j++ {
					*(*[64]byte)(at(q, j*dm)) = *(*[64]byte)(at(p, j*sm))
				}
			case 32:
				for j := int64(0); j < jn; j++ {
					*(*[32]byte)(at(q, j*dm)) = *(*[32]byte)(at(p, j*sm))
				}
			default:
				for j := int64(0); j < jn; j++ {
					copy(unsafe.Slice((*byte)(at(q, j*dm)), rb), unsafe.Slice((*byte)(at(p, j*sm)), rb))
				}
			}
			r += jn
			idx[d-2] += jn
			do += jn * dm
			so += jn * sm
			for k := d - 2; k > 0 && idx[k] == sz[k]; k-- {
				do += ds[k-1] - idx[k]*ds[k]
				so += ss[k-1] - idx[k]*ss[k]
				idx[k] = 0
				idx[k-1]++
			}
		}
	})
	return true
}

func stridedCopy[T any](p []unsafe.Pointer, s []int64, n int64) {
	for i := int64(0); i < n; i++ {
		*(*T)(at(p[0], i*s[0])) = *(*T)(at(p[1], i*s[1]))
	}
}

func loadFloat(buf []float64, dt DType, p unsafe.Pointer, s int64) {
	for i := range buf {
		q := at(p, int64(i)*s)
		switch dt {
		case Float32:
			buf[i] = float64(*(*float32)(q))
		case Float64:
			buf[i] = *(*float64)(q)
		case BFloat16:
			buf[i] = float64(BF16ToF32(*(*uint16)(q)))
		case Float16:
			buf[i] = float64(F16ToF32(*(*uint16)(q)))
		case Int8:
			buf[i] = float64(*(*int8)(q))
		case Uint8:
			buf[i] = float64(*(*uint8)(q))
		case Int16:
			buf[i] = float64(*(*int16)(q))
		case Int32:
			buf[i] = float64(*(*int32)(q))
		case Int64:
			buf[i] = float64(*(*int64)(q))
		case Bool:
			buf[i] = float64(*(*uint8)(q) & 1)
		case Float8E5M2, Float8E4M3FN:
			buf[i] = float64(Float8ToF32(dt, *(*uint8)(q)))
		}
	}
}

func storeFloat(p unsafe.Pointer, s int64, dt DType, buf []float64) {
	for i, v := range buf {
		q := at(p, int64(i)*s)
		switch dt {
		case Float32:
			*(*float32)(q) = float32(v)
		case Float64:
			*(*float64)(q) = v
		case BFloat16:
			*(*uint16)(q) = F32ToBF16(float32(v))
		case Float16:
			*(*uint16)(q) = F32ToF16(float32(v))
		case Bool:
			*(*uint8)(q) = b2u(v != 0)
		case Float8E5M2, Float8E4M3FN:
			// Through float32 first, as PyTorch's 8-bit float types are built from a float.
			*(*uint8)(q) = F32ToFloat8(dt, float32(v))
		default:
			storeOneInt(q, dt, floatToInt64(v))
		}
	}
}

// floatToInt64 truncates toward zero as a C cast does; NaN and out-of-range give
// math.MinInt64, which is what x86's cvttsd2si produces.
func floatToInt64(v float64) int64 {
	if math.IsNaN(v) || v >= 9.223372036854775807e18 || v < -9.223372036854775808e18 {
		return math.MinInt64
	}
	return int64(v)
}

func loadInt(buf []int64, dt DType, p unsafe.Pointer, s int64) {
	for i := range buf {
		q := at(p, int64(i)*s)
		switch dt {
		case Int8:
			buf[i] = int64(*(*int8)(q))
		case Uint8:
			buf[i] = int64(*(*uint8)(q))
		case Int16:
			buf[i] = int64(*(*int16)(q))
		case Int32:
			buf[i] = int64(*(*int32)(q))
		case Int64:
			buf[i] = *(*int64)(q)
		case Bool:
			buf[i] = int64(*(*uint8)(q) & 1)
		}
	}
}

func storeInt(p unsafe.Pointer, s int64, dt DType, buf []int64) {
	for i, v := range buf {
		q := at(p, int64(i)*s)
		if dt == Bool {
			*(*uint8)(q) = b2u(v != 0)
			continue
		}
		storeOneInt(q, dt, v)
	}
}

func storeOneInt(q unsafe.Pointer, dt DType, v int64) {
	switch dt {
	case Int8:
		*(*int8)(q) = int8(v)
	case Uint8:
		*(*uint8)(q) = uint8(v)
	case Int16:
		*(*int16)(q) = int16(v)
	case Int32:
		*(*int32)(q) = int32(v)
	case Int64:
		*(*int64)(q) = v
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Fill writes one value into every element of dst. The value arrives as float64 for
// floating dtypes and as int64 for integral ones, so large integers stay exact.
func Fill(dst Tensor, f float64, i int64, isInt bool) error {
	if err := dst.Validate(); err != nil {
		return fmt.Errorf("fill: %v", err)
	}
	// Build the element once, then replicate its bytes.
	var elem [8]byte
	e := unsafe.Pointer(&elem[0])
	switch {
	case (dst.DType.IsFloat() || dst.DType.IsFloat8()) && isInt:
		storeFloat(e, 0, dst.DType, []float64{float64(i)})
	case dst.DType.IsFloat() || dst.DType.IsFloat8():
		storeFloat(e, 0, dst.DType, []float64{f})
	case isInt:
		storeInt(e, 0, dst.DType, []int64{i})
	default:
		storeFloat(e, 0, dst.DType, []float64{f})
	}
	es := int64(dst.DType.Size())
	pat := elem[:es]
	n, st := int64(1), int64(1)
	contiguous := true
	for d := len(dst.Sizes) - 1; d >= 0; d-- {
		if dst.Sizes[d] != 1 && dst.Strides[d] != st {
			contiguous = false
		}
		st *= dst.Sizes[d]
		n *= dst.Sizes[d]
	}
	if n == 0 {
		return nil
	}
	if contiguous {
		fillBytes(unsafe.Slice((*byte)(dst.Ptr), n*es), pat)
		return nil
	}
	l := newLayout(dst.Sizes, [][]int64{dst.Strides}, []int{int(es)})
	l.run([]unsafe.Pointer{dst.Ptr}, 1, func(p []unsafe.Pointer, s []int64, n int64) {
		if s[0] == es {
			fillBytes(unsafe.Slice((*byte)(p[0]), n*es), pat)
			return
		}
		for k := int64(0); k < n; k++ {
			copy(unsafe.Slice((*byte)(at(p[0], k*s[0])), es), pat)
		}
	})
	return nil
}

// fillBytes repeats pat (one element's bytes) over b: memclr for zero, else the pattern
// doubled with memmove.
func fillBytes(b, pat []byte) {
	zero := true
	for _, x := range pat {
		zero = zero && x == 0
	}
	if zero {
		clear(b)
		return
	}
	k := copy(b, pat)
	for k < len(b) {
		k += copy(b[k:], b[:k])
	}
}
