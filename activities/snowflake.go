package activities

import (
	"sync"
	"time"
)

// snowflake makes 64-bit ids that sort by time: 41 bits of milliseconds since 2024-01-01,
// 10 bits of node, 12 bits of sequence. Distinct workers get distinct nodes, so ids never
// collide across the fleet.
type snowflake struct {
	mu   sync.Mutex
	node int64
	last int64
	seq  int64
}

var snowflakeEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func newSnowflake(node int64) *snowflake { return &snowflake{node: node & 0x3ff} }

func (s *snowflake) next() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli() - snowflakeEpoch
	if now < s.last {
		now = s.last // clock stepped back: stay monotonic
	}
	if now == s.last {
		s.seq = (s.seq + 1) & 0xfff
		if s.seq == 0 { // 4096 ids in this millisecond: borrow the next one
			now++
		}
	} else {
		s.seq = 0
	}
	s.last = now
	return now<<22 | s.node<<12 | s.seq
}
