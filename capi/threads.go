package main

import "C"

import "hpusim/kernels"

// hpusim_set_threads caps the kernel workers at n (n <= 0: one a core). The glue passes
// torch's intra-op thread count (torch.set_num_threads, OMP_NUM_THREADS) whenever it
// changes, so hpu kernels use the host threads the user gave torch.
//
//export hpusim_set_threads
func hpusim_set_threads(n C.int) C.int {
	kernels.SetThreads(int(n))
	return statusOK
}

// hpusim_kernel_workers is how many workers a large kernel uses now (kernels.Workers).
//
//export hpusim_kernel_workers
func hpusim_kernel_workers() C.int { return C.int(kernels.Workers()) }
