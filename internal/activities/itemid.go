package activities

import "hash/fnv"

// itemID is an item's id: a 63-bit hash of its run and key. Every attempt at an input
// gives its items the same ids, so a store that keeps every copy it is sent (Kafka)
// holds repeats that consumers drop by id, even when a worker died after writing and
// before it could tell Temporal what it wrote. Within one run of a million items, two
// keys share an id with a probability of about 5·10⁻⁸.
func itemID(runID, key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(runID))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(h.Sum64() &^ (1 << 63))
}
