package bridge

import (
	"hpusim/kernels"
)

// Scans, selections, searches and counting ops (python/.../_ops/scan_ops.py). Layouts:
//
//	scan        T (out [M,N], in [M,N])                 I (kind: kernels.ScanSum/ScanProd/ScanLogSumExp)
//	cummaxmin   T (values [M,N], indices [M,N], in)     I (is_min)
func init() {
	Register("scan", 2, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.Scan(int(c.I[0]), c.T[0], c.T[1])
	})
	Register("cummaxmin", 3, func(c *Call) error {
		if err := needInts(c, 1); err != nil {
			return err
		}
		return kernels.CumMaxMin(c.I[0] != 0, c.T[0], c.T[1], c.T[2])
	})
}
