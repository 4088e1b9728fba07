package bridge

import "hpusim/kernels"

// torchvision's roi_pool, ps_roi_pool, ps_roi_align and deform_conv2d's sampling kernels
// (python/habana_frameworks/torch/_ops/torchvision_ops.py).
//
//	roi_pool / ps_roi_pool                       T (out, index int32, input, rois)      I (pooled_h, pooled_w)  F (spatial_scale)
//	roi_pool_backward / ps_roi_pool_backward     T (grad_input, grad, index, rois)      the same attributes
//	ps_roi_align                                 T (out, mapping int32, input, rois)    I (pooled_h, pooled_w, sampling_ratio)  F (spatial_scale)
//	ps_roi_align_backward                        T (grad_input, grad, mapping, rois)    the same attributes
//	deform_im2col                                T (columns, input, offset, mask)       I (kh, kw, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, offset_groups, use_mask)
//	deform_col2im                                T (grad_input, grad_columns, offset, mask)  the same attributes
//	deform_col2im_coord                          T (grad_offset, grad_mask, grad_columns, input, offset, mask)  the same attributes
func init() {
	pool := func(name string, k func(a, b, c, d kernels.Tensor, p kernels.RoiPoolParams) error) {
		Register(name, 4, func(c *Call) error {
			if err := needInts(c, 2); err != nil {
				return err
			}
			if err := needFloats(c, 1); err != nil {
				return err
			}
			return k(c.T[0], c.T[1], c.T[2], c.T[3], kernels.RoiPoolParams{PooledH: int(c.I[0]), PooledW: int(c.I[1]), SpatialScale: c.F[0]})
		})
	}
	pool("roi_pool", kernels.RoiPool)
	pool("roi_pool_backward", kernels.RoiPoolBackward)
	pool("ps_roi_pool", kernels.PsRoiPool)
	pool("ps_roi_pool_backward", kernels.PsRoiPoolBackward)
	align := func(name string, k func(a, b, c, d kernels.Tensor, p kernels.RoiAlignParams) error) {
		Register(name, 4, func(c *Call) error {
			if err := needInts(c, 3); err != nil {
				return err
			}
			if err := needFloats(c, 1); err != nil {
				return err
			}
			return k(c.T[0], c.T[1], c.T[2], c.T[3], kernels.RoiAlignParams{PooledH: int(c.I[0]), PooledW: int(c.I[1]),
				SamplingRatio: int(c.I[2]), Aligned: true, SpatialScale: c.F[0]})
		})
	}
	align("ps_roi_align", kernels.PsRoiAlign)
	align("ps_roi_align_backward", kernels.PsRoiAlignBackward)
	Register("deform_im2col", 4, func(c *Call) error {
		p, err := deformParams(c)
		if err != nil {
			return err
		}
		return kernels.DeformIm2col(c.T[0], c.T[1], c.T[2], c.T[3], p)
	})
	Register("deform_col2im", 4, func(c *Call) error {
		p, err := deformParams(c)
		if err != nil {
			return err
		}
		return kernels.DeformCol2im(c.T[0], c.T[1], c.T[2], c.T[3], p)
	})
	Register("deform_col2im_coord", 6, func(c *Call) error {
		p, err := deformParams(c)
		if err != nil {
			return err
		}
		return kernels.DeformCol2imCoord(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.T[5], p)
	})
}

func deformParams(c *Call) (kernels.DeformParams, error) {
	if err := needInts(c, 10); err != nil {
		return kernels.DeformParams{}, err
	}
	i := c.I
	return kernels.DeformParams{KH: int(i[0]), KW: int(i[1]), PadH: int(i[2]), PadW: int(i[3]), StrideH: int(i[4]),
		StrideW: int(i[5]), DilH: int(i[6]), DilW: int(i[7]), OffsetGroups: int(i[8]), UseMask: i[9] != 0}, nil
}
