package bridge

import (
	"fmt"

	"hpusim/kernels"
)

// hpex ops: the fused optimizers' multi-tensor updates (one call per parameter group),
// norms, RMS norm, rotary embedding and attention. Attribute layouts (n = tensors per list;
// lists are laid out one after the other):
//
//	optim.adamw     T (neg_step, wd_factor, w[n], g[n], m[n], v[n][, m_scale[n], v_scale[n]])
//	                I (n, has_wd[, scaled]) F (beta1, beta2, eps)
//	optim.sgd       T (lr, w[n], g[n]) or (lr, mom, epoch, w[n], g[n], buf[n])  I (n, has_momentum)
//	                F (wd, dampening, nesterov)
//	optim.adagrad   T (w[n], g[n], sum[n])               I (n) F (clr, wd, eps)
//	optim.lamb      T (clip, w[n], g[n], m[n], v[n])     I (n, use_lamb) F (lr, b1, b2, b3, eps, wd, bc1, bc2)
//	optim.lamb_phase1 T (clip, bc1, bc2, w[n], g[n], m[n], v[n], w_norm[n], u_norm[n], u[n])
//	                I (n, grad_averaging) F (b1, b2, eps, wd)
//	optim.lamb_phase2 T (neg_step, w[n], u_norm[n], w_norm[n], u[n]) I (n, use_lamb) F (wd)
//	optim.lars      T (lr, w[n], g[n])                   I (n, skip[n]) F (eeta, wd, eps)
//	optim.resource_apply_momentum T (w[n], buf[n], d[n]) I (n) F (momentum)
//	optim.ema       T (decay, ema[n], model[n])          I (n)
//	optim.lamb_norm T (clip, g...)                       F (max_norm)
//	optim.clip_norm T (total_norm, max_norm, g...)
func init() {
	Register("optim.adamw", -1, func(c *Call) error {
		if err := needFloats(c, 3); err != nil {
			return err
		}
		if err := needInts(c, 2); err != nil {
			return err
		}
		p := kernels.AdamWParams{Beta1: c.F[0], Beta2: c.F[1], Eps: c.F[2], HasWeightDecay: c.I[1] != 0}
		if len(c.I) > 2 && c.I[2] != 0 { // fp8 moments with their scales
			l, err := splitLists(c, 6, 2)
			if err != nil {
				return err
			}
			return kernels.AdamWScaled(c.T[0], c.T[1], l[0], l[1], l[2], l[3], l[4], l[5], p)
		}
		l, err := splitLists(c, 4, 2)
		if err != nil {
			return err
		}
		return kernels.AdamW(c.T[0], c.T[1], l[0], l[1], l[2], l[3], p)
	})
	Register("optim.sgd", -1, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		if err := needFloats(c, 3); err != nil {
			return err
		}
		p := kernels.SGDParams{WeightDecay: c.F[0], Dampening: c.F[1], Nesterov: c.F[2] != 0}
		if c.I[1] == 0 {
			l, err := splitLists(c, 2, 1)
			if err != nil {
				return err
			}
			return kernels.SGD(c.T[0], nil, nil, l[0], l[1], nil, p)
		}
		l, err := splitLists(c, 3, 3)
		if err != nil {
			return err
		}
		return kernels.SGD(c.T[0], &c.T[1], &c.T[2], l[0], l[1], l[2], p)
	})
	Register("optim.adagrad", -1, func(c *Call) error {
		l, err := splitLists(c, 3, 0)
		if err != nil {
			return err
		}
		if err := needFloats(c, 3); err != nil {
			return err
		}
		return kernels.Adagrad(l[0], l[1], l[2], c.F[0], c.F[1], c.F[2])
	})
	Register("optim.lamb", -1, func(c *Call) error {
		l, err := splitLists(c, 4, 1)
		if err != nil {
			return err
		}
		if err := needFloats(c, 8); err != nil {
			return err
		}
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.Lamb(c.T[0], l[0], l[1], l[2], l[3], kernels.LambParams{LR: c.F[0], Beta1: c.F[1],
			Beta2: c.F[2], Beta3: c.F[3], Eps: c.F[4], WeightDecay: c.F[5], BiasCorr1: c.F[6],
			BiasCorr2: c.F[7], UseLamb: c.I[1] != 0})
	})
	Register("optim.lamb_phase1", -1, func(c *Call) error {
		l, err := splitLists(c, 7, 3)
		if err != nil {
			return err
		}
		if err := needFloats(c, 4); err != nil {
			return err
		}
		if err := needInts(c, 2); err != nil {
			return err
		}
		b1 := c.F[0]
		b3 := 1.0
		if c.I[1] != 0 {
			b3 = 1 - b1
		}
		return kernels.LambPhase1(c.T[0], c.T[1], c.T[2], l[1], l[0], l[2], l[3], l[4], l[5], l[6],
			kernels.LambParams{Beta1: b1, Beta2: c.F[1], Beta3: b3, Eps: c.F[2], WeightDecay: c.F[3]})
	})
	Register("optim.lamb_phase2", -1, func(c *Call) error {
		l, err := splitLists(c, 4, 1)
		if err != nil {
			return err
		}
		if err := needFloats(c, 1); err != nil {
			return err
		}
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.LambPhase2(c.T[0], l[0], l[1], l[2], l[3], c.F[0], c.I[1] != 0)
	})
	Register("optim.lars", -1, func(c *Call) error {
		l, err := splitLists(c, 2, 1)
		if err != nil {
			return err
		}
		n := len(l[0])
		if err := needInts(c, 1+n); err != nil {
			return err
		}
		if err := needFloats(c, 3); err != nil {
			return err
		}
		return kernels.Lars(c.T[0], l[0], l[1], c.I[1:1+n], c.F[0], c.F[1], c.F[2])
	})
	Register("optim.resource_apply_momentum", -1, func(c *Call) error {
		l, err := splitLists(c, 3, 0)
		if err != nil {
			return err
		}
		if err := needFloats(c, 1); err != nil {
			return err
		}
		return kernels.ResourceApplyMomentum(l[0], l[1], l[2], c.F[0])
	})
	Register("optim.ema", -1, func(c *Call) error {
		l, err := splitLists(c, 2, 1)
		if err != nil {
			return err
		}
		return kernels.EMA(c.T[0], l[0], l[1])
	})
	Register("optim.lamb_norm", -1, func(c *Call) error {
		if len(c.T) < 1 {
			return fmt.Errorf("expected an output tensor")
		}
		if err := needFloats(c, 1); err != nil {
			return err
		}
		return kernels.LambNorm(c.T[0], c.T[1:], c.F[0])
	})
	Register("optim.clip_norm", -1, func(c *Call) error {
		if len(c.T) < 2 {
			return fmt.Errorf("expected tensors (out, max_norm, grads...)")
		}
		return kernels.ClipNorm(c.T[0], c.T[1], c.T[2:])
	})
}

// splitLists cuts the tensors after the first `head` into k lists of I[0] tensors each.
func splitLists(c *Call, k, head int) ([][]kernels.Tensor, error) {
	if err := needInts(c, 1); err != nil {
		return nil, err
	}
	n := int(c.I[0])
	if n < 0 || len(c.T) != head+k*n {
		return nil, fmt.Errorf("expected %d tensors (%d lists of %d), got %d", head+k*n, k, n, len(c.T))
	}
	out := make([][]kernels.Tensor, k)
	for i := range out {
		out[i] = c.T[head+i*n : head+(i+1)*n]
	}
	return out, nil
}

// RMS norm (hpex FusedRMSNorm):
//
//	rms_norm      T (y, inv_rms [M] f32, x, gamma [D]) F (eps)
//	rms_norm_bwd  T (dx, dgamma [D] f32, dy, x, gamma, inv_rms)
func init() {
	Register("rms_norm", 4, func(c *Call) error {
		if err := needFloats(c, 1); err != nil {
			return err
		}
		return kernels.RMSNormForward(c.T[0], c.T[1], c.T[2], c.T[3], c.F[0])
	})
	Register("rms_norm_bwd", 6, func(c *Call) error {
		return kernels.RMSNormBackward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.T[5])
	})
}

// Attention (hpex FusedSDPA, F.scaled_dot_product_attention on hpu), flash-style tiles:
//
//	attention_fwd  T (out, m, linv [B,Hq,L] f32, q, k, v[, mask [B,Hq,L,S]])  I (causal, seed, offset[, fast]) F (scale, dropout_p)
//	attention_bwd  T (dq, dk, dv, dout, q, k, v, out, m, linv[, mask])       I (causal, seed, offset) F (scale, dropout_p)
//	attention_dropout_mask T (dm bool [B,Hq,L,S])                            I (causal, seed, offset) F (scale, dropout_p)
func init() {
	params := func(c *Call) (kernels.AttnParams, error) {
		if err := needInts(c, 3); err != nil {
			return kernels.AttnParams{}, err
		}
		if err := needFloats(c, 2); err != nil {
			return kernels.AttnParams{}, err
		}
		return kernels.AttnParams{Scale: c.F[0], DropoutP: c.F[1], Causal: c.I[0] != 0,
			Drop: kernels.Stream{Seed: uint64(c.I[1]), Offset: uint64(c.I[2])}, Fast: len(c.I) > 3 && c.I[3] != 0}, nil
	}
	// withMask runs an attention kernel over its fixed operands and the optional trailing mask.
	withMask := func(fixed int, run func(c *Call, mask *kernels.Tensor, p kernels.AttnParams) error) func(c *Call) error {
		return func(c *Call) error {
			if len(c.T) != fixed && len(c.T) != fixed+1 {
				return fmt.Errorf("expected %d or %d tensors, got %d", fixed, fixed+1, len(c.T))
			}
			p, err := params(c)
			if err != nil {
				return err
			}
			var mask *kernels.Tensor
			if len(c.T) == fixed+1 {
				mask = &c.T[fixed]
			}
			return run(c, mask, p)
		}
	}
	Register("attention_fwd", -1, withMask(6, func(c *Call, mask *kernels.Tensor, p kernels.AttnParams) error {
		return kernels.AttentionForward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.T[5], mask, p)
	}))
	Register("attention_bwd", -1, withMask(10, func(c *Call, mask *kernels.Tensor, p kernels.AttnParams) error {
		return kernels.AttentionBackward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.T[5], c.T[6], c.T[7], c.T[8], c.T[9], mask, p)
	}))
	Register("attention_dropout_mask", 1, func(c *Call) error {
		p, err := params(c)
		if err != nil {
			return err
		}
		return kernels.AttentionDropoutMask(c.T[0], p)
	})
}

// Rotary position embedding:
//
//	rope  T (out, x|grad, cos, sin; all [A,B,C,D], cos/sin broadcast by strides)  I (mode, backward)
func init() {
	Register("rope", 4, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.RotaryEmbedding(c.T[0], c.T[1], c.T[2], c.T[3], int(c.I[0]), c.I[1] != 0)
	})
}

// CTC loss (hpex CTCLoss):
//
//	ctc_loss      T (nll [N] f32, log_alpha [N,T,2S+1] f32, log_probs [T,N,C] f32, targets [N,S] i64, in_len, tgt_len)  I (blank)
//	ctc_loss_bwd  T (grad [T,N,C] f32, scale [N] f32, log_probs, targets, in_len, tgt_len, log_alpha)  I (blank, zero_infinity)
func init() {
	Register("ctc_loss", 6, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.CTCForward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.T[5], int(c.I[0]))
	})
	Register("ctc_loss_bwd", 7, func(c *Call) error {
		if err := needInts(c, 2); err != nil {
			return err
		}
		return kernels.CTCBackward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.T[5], c.T[6], int(c.I[0]), c.I[1] != 0)
	})
}

// EmbeddingBag (aten::_embedding_bag and its backwards; the hpex EmbeddingBag helpers):
//
//	embedding_bag_fwd  T (out, bag_size[, max_indices][, offset2bag], weight, indices, offsets[, psw])
//	                   I (mode, padding_idx, include_last_offset, has_max_indices, has_offset2bag, has_psw)
//	embedding_bag_bwd  T (grad_weight, grad, indices, offsets, bag_size[, max_indices (max mode)][, psw])
//	                   I (mode, padding_idx, scale_grad_by_freq, has_psw)
//	embedding_bag_psw_bwd T (out [n], grad, weight, indices, offsets)  I (padding_idx)
//	embedding_bag_sum  T (out, table, indices, offsets, valid_count)  I (kernel_mode)
//	                   kernel_mode 0: valid_count[0] = valid indices; else valid_count[0] = valid offsets
func init() {
	Register("embedding_bag_fwd", -1, func(c *Call) error {
		if err := needInts(c, 6); err != nil {
			return err
		}
		p := kernels.EmbeddingBagParams{Mode: int(c.I[0]), PaddingIdx: c.I[1], IncludeLast: c.I[2] != 0}
		want := 5 + int(c.I[3]) + int(c.I[4]) + int(c.I[5])
		if len(c.T) != want {
			return fmt.Errorf("embedding_bag_fwd: expected %d tensors, got %d", want, len(c.T))
		}
		i := 2
		var maxIdx, o2b, psw *kernels.Tensor
		if c.I[3] != 0 {
			maxIdx = &c.T[i]
			i++
		}
		if c.I[4] != 0 {
			o2b = &c.T[i]
			i++
		}
		if c.I[5] != 0 {
			psw = &c.T[i+3]
		}
		return kernels.EmbeddingBagForward(c.T[0], c.T[1], maxIdx, o2b, c.T[i], c.T[i+1], c.T[i+2], psw, p)
	})
	Register("embedding_bag_bwd", -1, func(c *Call) error {
		if err := needInts(c, 4); err != nil {
			return err
		}
		p := kernels.EmbeddingBagParams{Mode: int(c.I[0]), PaddingIdx: c.I[1], ScaleByFreq: c.I[2] != 0}
		isMax := p.Mode == kernels.BagMax
		want := 5
		if isMax {
			want++
		}
		if c.I[3] != 0 {
			want++
		}
		if len(c.T) != want {
			return fmt.Errorf("embedding_bag_bwd: expected %d tensors, got %d", want, len(c.T))
		}
		var maxIdx, psw *kernels.Tensor
		i := 5
		if isMax {
			maxIdx = &c.T[i]
			i++
		}
		if c.I[3] != 0 {
			psw = &c.T[i]
		}
		return kernels.EmbeddingBagBackward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], maxIdx, psw, p)
	})
	Register("embedding_bag_psw_bwd", 5, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.EmbeddingBagPerSampleWeightsBackward(c.T[0], c.T[1], c.T[2], c.T[3], c.T[4], c.I[0])
	})
	Register("embedding_bag_sum", 5, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		vc, err := kernels.LoadIndexValues(c.T[4])
		if err != nil {
			return fmt.Errorf("embedding_bag_sum: valid_count: %v", err)
		}
		if len(vc) == 0 {
			return fmt.Errorf("embedding_bag_sum: valid_count is empty")
		}
		bags, nIdx := c.T[0].Sizes[0], c.T[2].Numel()
		if c.I[0] == 0 {
			nIdx = vc[0]
		} else {
			bags = vc[0] - 1
		}
		return kernels.EmbeddingBagSumValid(c.T[0], c.T[1], c.T[2], c.T[3], bags, nIdx)
	})
}
