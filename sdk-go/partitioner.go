package aerostream

import "encoding/binary"

// Murmur2 is Kafka's Utils.murmur2: MurmurHash2, 32 bits, seed 0x9747b28c,
// over the key in little-endian 4-byte words, as a signed integer.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(data))
	n := len(data) / 4 * 4
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// PartitionForKey is the partition of a keyed record among n partitions,
// as Kafka's Java client (and the Rust SDK) chooses it:
// (murmur2(key) & 0x7fffffff) % n.
func PartitionForKey(key []byte, n uint32) uint32 {
	if n == 0 {
		n = 1
	}
	return (uint32(Murmur2(key)) & 0x7fffffff) % n
}
