package kernels

import "math/bits"

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator, so element i of a random tensor depends only on (key,
// counter) and any split of the work across goroutines yields the same values.

const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// Philox4x32 returns the 4 words for counter ctr under key.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c, k := ctr, key
	for r := 0; r < 10; r++ {
		if r > 0 {
			k[0] += philoxW0
			k[1] += philoxW1
		}
		hi0, lo0 := bits.Mul32(philoxM0, c[0])
		hi1, lo1 := bits.Mul32(philoxM1, c[2])
		c = [4]uint32{hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0}
	}
	return c
}

// Stream is one random op's generator: the key is the seed, the counter's high half the
// offset, both drawn from the hpu generator per call; block b of the tensor is counter
// (b, offset).
type Stream struct {
	Seed, Offset uint64
}

// Block returns the 4 words of block b.
func (s Stream) Block(b uint64) [4]uint32 {
	return Philox4x32([4]uint32{uint32(b), uint32(b >> 32), uint32(s.Offset), uint32(s.Offset >> 32)},
		[2]uint32{uint32(s.Seed), uint32(s.Seed >> 32)})
}
