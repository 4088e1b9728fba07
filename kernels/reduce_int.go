package kernels

import "fmt"

// argReduceInt is ArgReduce for integer and bool inputs: exact int64 comparisons (the
// float loaders would round values past 2^53). The first extreme element wins ties.
func argReduceInt(isMin bool, vals, idx, in Tensor) error {
	M, N := in.Sizes[0], in.Sizes[1]
	es := int64(in.DType.Size())
	ParallelFor(M, N, func(lo, hi int64) {
		var buf [256]int64
		for m := lo; m < hi; m++ {
			var best int64
			bi := int64(-1)
			row := at(in.Ptr, m*in.Strides[0]*es)
			for n0 := int64(0); n0 < N; n0 += int64(len(buf)) {
				k := min(int64(len(buf)), N-n0)
				loadInt(buf[:k], in.DType, at(row, n0*in.Strides[1]*es), in.Strides[1]*es)
				for i, v := range buf[:k] {
					if bi < 0 || (!isMin && v > best) || (isMin && v < best) {
						best, bi = v, n0+int64(i)
					}
				}
			}
			*(*int64)(at(idx.Ptr, m*idx.Strides[0]*8)) = bi
			if vals.Ptr != nil {
				storeInt(at(vals.Ptr, m*vals.Strides[0]*int64(vals.DType.Size())), 0, vals.DType, []int64{best})
			}
		}
	})
	return nil
}

func checkIntArg(in, vals Tensor) error {
	if vals.Ptr != nil && vals.DType != in.DType {
		return fmt.Errorf("argreduce: values dtype %v, input %v", vals.DType, in.DType)
	}
	return nil
}

// SumInt sums each row of an integer or bool [M, N] input exactly in int64 (wrapping on
// overflow, as torch's integer sums do) and stores the sums in out [M] (an integer dtype).
func SumInt(out, in Tensor) error {
	if err := check2D("sum_int", in, out); err != nil {
		return err
	}
	if in.DType.IsFloat() || out.DType.IsFloat() {
		return fmt.Errorf("sum_int: integer tensors only, got %v -> %v", in.DType, out.DType)
	}
	M, N := in.Sizes[0], in.Sizes[1]
	es := int64(in.DType.Size())
	oes := int64(out.DType.Size())
	ParallelFor(M, max(N, 1), func(lo, hi int64) {
		var buf [256]int64
		for m := lo; m < hi; m++ {
			var s int64
			row := at(in.Ptr, m*in.Strides[0]*es)
			for n0 := int64(0); n0 < N; n0 += int64(len(buf)) {
				k := min(int64(len(buf)), N-n0)
				loadInt(buf[:k], in.DType, at(row, n0*in.Strides[1]*es), in.Strides[1]*es)
				for _, v := range buf[:k] {
					s += v
				}
			}
			storeInt(at(out.Ptr, m*out.Strides[0]*oes), 0, out.DType, []int64{s})
		}
	})
	return nil
}
