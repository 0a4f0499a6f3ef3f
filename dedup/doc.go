// Package dedup will tell new, changed and unchanged items apart across all workers with
// bucketed Redis hashes: bucket = crc32(key) mod B → hash dd:<namespace>:<bucket>, field
// = a compressed integer of the key, value = a compressed integer of the content hash
// and last-seen time, checked and recorded per batch in one round trip.
//
// Nothing is implemented here yet: today every fetched item is stored, and the jsonl
// sink keeps one record per run and key.
package dedup
