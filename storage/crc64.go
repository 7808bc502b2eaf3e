package storage

import (
	"hash"
	"strconv"
)

// CRC-64/ECMA-182 as JRaft computes it (com.alipay.sofa.jraft.util.CRC64,
// which Nacos uses for its snapshot archives): polynomial
// 0x42F0E1EBA9EA3693 processed most significant bit first, initial value 0,
// no reflection, no final XOR. The check value of "123456789" is
// 0x6c40df5f0b497347. Go's hash/crc64 implements the reflected variant of
// the same polynomial and gives different values, so it cannot be used.
const crc64Poly = 0x42F0E1EBA9EA3693

var crc64Table = func() *[256]uint64 {
	var t [256]uint64
	for i := range t {
		crc := uint64(i) << 56
		for range 8 {
			if crc&(1<<63) != 0 {
				crc = crc<<1 ^ crc64Poly
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return &t
}()

// CRC64 is a running CRC-64/ECMA-182 (MSB first), Nacos's snapshot checksum.
// The zero value is ready to use.
type CRC64 struct{ crc uint64 }

var _ hash.Hash64 = (*CRC64)(nil)

// Write adds p to the checksum. It never fails.
func (c *CRC64) Write(p []byte) (int, error) {
	crc := c.crc
	for _, b := range p {
		crc = crc64Table[byte(crc>>56)^b] ^ crc<<8
	}
	c.crc = crc
	return len(p), nil
}

// Sum64 returns the checksum so far.
func (c *CRC64) Sum64() uint64 { return c.crc }

// Sum appends the big-endian checksum to b.
func (c *CRC64) Sum(b []byte) []byte {
	v := c.crc
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// Reset restarts the checksum.
func (c *CRC64) Reset() { c.crc = 0 }

// Size is 8 bytes.
func (c *CRC64) Size() int { return 8 }

// BlockSize is 1: the checksum takes bytes one at a time.
func (c *CRC64) BlockSize() int { return 1 }

// ChecksumCRC64 returns the CRC-64/ECMA-182 (MSB first) of b.
func ChecksumCRC64(b []byte) uint64 {
	var c CRC64
	_, _ = c.Write(b)
	return c.Sum64()
}

// FormatChecksum renders a checksum as Nacos records it, with Java's
// Long.toHexString: lowercase hex, no leading zeros, the bits read as
// unsigned. Nacos compares the recorded and computed strings, so this
// exact form matters.
func FormatChecksum(v uint64) string { return strconv.FormatUint(v, 16) }
