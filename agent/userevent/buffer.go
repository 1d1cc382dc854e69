package userevent

import (
	"sync"

	"github.com/trellis-mesh/trellis/structs"
)

// DefaultBufferSize is how many events an agent keeps, as Consul's.
const DefaultBufferSize = 256

// Buffer is the ring of the last events an agent accepted, oldest first,
// with a channel that closes on the next one for blocking lists.
type Buffer struct {
	mu sync.Mutex
	// events, next, full and changed are guarded by mu. events is the
	// ring; next is where the next event goes; full says the ring wrapped.
	events  []*structs.UserEvent
	next    int
	full    bool
	changed chan struct{}
}

// NewBuffer returns an empty ring of size events (DefaultBufferSize when
// size <= 0).
func NewBuffer(size int) *Buffer {
	if size <= 0 {
		size = DefaultBufferSize
	}
	return &Buffer{events: make([]*structs.UserEvent, size), changed: make(chan struct{})}
}

// Add keeps ev, dropping the oldest event when the ring is full, and wakes
// every waiter.
func (b *Buffer) Add(ev *structs.UserEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events[b.next] = ev
	b.next = (b.next + 1) % len(b.events)
	if b.next == 0 {
		b.full = true
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// List returns copies of the events kept, oldest first, and a channel that
// closes when the next one arrives.
func (b *Buffer) List() ([]*structs.UserEvent, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*structs.UserEvent
	if b.full {
		out = appendCopies(out, b.events[b.next:])
	}
	out = appendCopies(out, b.events[:b.next])
	return out, b.changed
}

func appendCopies(out, evs []*structs.UserEvent) []*structs.UserEvent {
	for _, ev := range evs {
		c := *ev
		c.Payload = append([]byte(nil), ev.Payload...)
		if ev.Payload == nil {
			c.Payload = nil
		}
		out = append(out, &c)
	}
	return out
}
