package checks

import "fmt"

// tailBuffer keeps the last max bytes written to it, like the circular
// buffer Consul reads HTTP check bodies into: a long body is reported by
// its end, which is where error details usually are.
type tailBuffer struct {
	max   int
	buf   []byte
	total int // bytes ever written
}

func newTailBuffer(max int) *tailBuffer {
	if max < 1 {
		max = DefaultOutputMaxSize
	}
	return &tailBuffer{max: max}
}

// Write never fails; bytes beyond the cap push out the oldest ones.
func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	t.total += n
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

// truncateOutput caps a TTL check's output the way Consul does: the first
// max bytes, then a note of how much was kept.
func truncateOutput(output string, max int) string {
	if total := len(output); total > max {
		return fmt.Sprintf("%s ... (captured %d of %d bytes)", output[:max], max, total)
	}
	return output
}
