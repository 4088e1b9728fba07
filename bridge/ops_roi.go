package bridge

import "hpusim/kernels"

// torchvision's detection ops (python/habana_frameworks/torch/_ops/torchvision_ops.py).
//
//	nms_keep            T (keep, boxes sorted by score)  F (iou_threshold)
//	roi_align           T (out, input, rois)             I (pooled_h, pooled_w, sampling_ratio, aligned)  F (spatial_scale)
//	roi_align_backward  T (grad_input, grad, rois)       the same attributes
func init() {
	Register("nms_keep", 2, func(c *Call) error {
		if err := needFloats(c, 1); err != nil {
			return err
		}
		return kernels.NmsKeep(c.T[0], c.T[1], c.F[0])
	})
	Register("roi_align", 3, func(c *Call) error {
		p, err := roiAlignParams(c)
		if err != nil {
			return err
		}
		return kernels.RoiAlign(c.T[0], c.T[1], c.T[2], p)
	})
	Register("roi_align_backward", 3, func(c *Call) error {
		p, err := roiAlignParams(c)
		if err != nil {
			return err
		}
		return kernels.RoiAlignBackward(c.T[0], c.T[1], c.T[2], p)
	})
}

func roiAlignParams(c *Call) (kernels.RoiAlignParams, error) {
	if err := needInts(c, 4); err != nil {
		return kernels.RoiAlignParams{}, err
	}
	if err := needFloats(c, 1); err != nil {
		return kernels.RoiAlignParams{}, err
	}
	return kernels.RoiAlignParams{PooledH: int(c.I[0]), PooledW: int(c.I[1]), SamplingRatio: int(c.I[2]),
		Aligned: c.I[3] != 0, SpatialScale: c.F[0]}, nil
}
