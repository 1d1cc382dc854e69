package serverstate

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
)

// maxHubChans is the most watch channels a read may leave for the hub to
// wait on. The questions of a sidecar (its intentions, its resolved
// service config, the chain of an upstream) watch two to five channels,
// most of them shared with every other proxy's (the proxy-defaults entry,
// the radix node under which an absent entry would appear, the store's
// AbandonCh), so at 5,000 sidecars the hub waits on a few hundred channels
// instead of holding a goroutine per question (issue 17: 10,000 of them).
// A read watching more (the health of a large service: a channel per
// iterator) would cost the hub a goroutine per channel, more than a
// goroutine of its own that memdb's WatchSet multiplexes 32 channels at a
// time in: such a read waits on its own, as before.
const maxHubChans = 8

// hub waits on memdb watch channels for the server-local queries: one
// goroutine per distinct channel, however many queries watch it, and
// none per query. When a channel fires, each query watching it is read
// again in a goroutine that lives only for that read and its delivery, so
// a slow subscriber of one query never holds up another.
type hub struct {
	// ctx ends with the sources (Close); every goroutine of the hub ends
	// with it, and wg counts them.
	ctx context.Context
	wg  sync.WaitGroup

	mu sync.Mutex
	// closed, chans and the entries' waiter sets are guarded by mu.
	closed bool
	chans  map[<-chan struct{}]*chanWatch
}

// chanWatch is one channel waited on, and the queries waiting.
type chanWatch struct {
	stop    chan struct{} // closed when the last waiter leaves
	waiters map[*waiter]struct{}
}

func newHub(ctx context.Context) *hub {
	return &hub{ctx: ctx, chans: make(map[<-chan struct{}]*chanWatch)}
}

// spawn runs f in a goroutine of the hub unless the hub is closed.
func (h *hub) spawn(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
}

// close stops every goroutine of the hub and waits for them; the caller
// cancels ctx first.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// replace makes w wait on chans instead of old: channels in both keep
// their goroutine (added before the old ones are dropped, so that a
// channel shared by the two sets never loses its last waiter in between).
func (h *hub) replace(w *waiter, old, chans []<-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range chans {
		e := h.chans[ch]
		if e == nil {
			if h.closed {
				continue
			}
			e = &chanWatch{stop: make(chan struct{}), waiters: make(map[*waiter]struct{})}
			h.chans[ch] = e
			h.wg.Add(1)
			go h.wait(ch, e)
		}
		e.waiters[w] = struct{}{}
	}
	for _, ch := range old {
		if contains(chans, ch) {
			continue
		}
		if e := h.chans[ch]; e != nil {
			delete(e.waiters, w)
			if len(e.waiters) == 0 {
				delete(h.chans, ch)
				close(e.stop)
			}
		}
	}
}

// wait is the goroutine of one channel: when it fires, every waiter reads
// again (and registers afresh, on the channels of its new read).
func (h *hub) wait(ch <-chan struct{}, e *chanWatch) {
	defer h.wg.Done()
	select {
	case <-ch:
	case <-e.stop:
		return
	case <-h.ctx.Done():
		return
	}
	h.mu.Lock()
	if h.chans[ch] == e {
		delete(h.chans, ch)
	}
	waiters := make([]*waiter, 0, len(e.waiters))
	for w := range e.waiters {
		waiters = append(waiters, w)
	}
	h.mu.Unlock()
	for _, w := range waiters {
		w.wake()
	}
}

// channels is the number of channels waited on (for tests).
func (h *hub) channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.chans)
}

func contains(chans []<-chan struct{}, ch <-chan struct{}) bool {
	for _, c := range chans {
		if c == ch {
			return true
		}
	}
	return false
}

// waiter is the read loop of one question, without a goroutine of its own
// while it waits: it reads, publishes, and leaves the WatchSet's channels
// to the hub (or, after a failure, a timer), which wakes it to read again.
type waiter struct {
	s    *Sources
	ctx  context.Context
	out  fanout.Sink
	read readFn

	mu sync.Mutex
	// armed, chans, bo and retry are guarded by mu. armed is set while
	// the waiter waits (on the hub or the timer) and cleared by the wake
	// that starts the next read, so that several channels firing start
	// one read.
	armed bool
	chans []<-chan struct{}
	bo    fanout.Backoff
	retry *time.Timer
}

// runner is the fanout runner of a question read by read: it reads once
// in the runner's goroutine and returns, leaving the waiting to the hub.
func (s *Sources) runner(read readFn) fanout.Runner {
	return func(ctx context.Context, out fanout.Sink) {
		w := &waiter{s: s, ctx: ctx, out: out, read: read, bo: fanout.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax}}
		context.AfterFunc(ctx, w.stop)
		w.run()
	}
}

// wake starts the next read, once however many channels fired.
func (w *waiter) wake() {
	w.mu.Lock()
	armed := w.armed
	w.armed = false
	w.mu.Unlock()
	if armed {
		w.s.hub.spawn(w.run)
	}
}

// run reads until a read leaves it something to wait on.
func (w *waiter) run() {
	for w.ctx.Err() == nil {
		st := w.s.cfg.Store()
		ws := memdb.NewWatchSet()
		// A restore replaces the store: its AbandonCh, shared by every
		// query, wakes them all to read the new one.
		ws.Add(st.AbandonCh())
		v, err := w.read(ws, st)
		if err != nil {
			w.out.Error(err)
			w.armRetry()
			return
		}
		w.out.Result(v)
		if len(ws) <= maxHubChans {
			w.arm(ws)
			return
		}
		w.arm(nil)
		if ws.WatchCtx(w.ctx) != nil {
			return
		}
	}
}

// arm hands the channels of ws to the hub (none: leave the hub).
func (w *waiter) arm(ws memdb.WatchSet) {
	chans := make([]<-chan struct{}, 0, len(ws))
	for ch := range ws {
		chans = append(chans, ch)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bo.Reset()
	if w.ctx.Err() != nil {
		return
	}
	// Armed before the channels are handed over: one may have fired
	// already, and its wake must find the waiter ready.
	w.armed = len(chans) > 0
	w.s.hub.replace(w, w.chans, chans)
	w.chans = chans
}

// armRetry schedules the read after a failure on a timer, leaving the
// hub: the failed read's channels say nothing.
func (w *waiter) armRetry() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		return
	}
	w.s.hub.replace(w, w.chans, nil)
	w.chans = nil
	w.armed = true
	w.retry = time.AfterFunc(w.bo.Next(), w.wake)
}

// stop leaves the hub when the question's last subscriber went.
func (w *waiter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	if w.retry != nil {
		w.retry.Stop()
	}
	w.s.hub.replace(w, w.chans, nil)
	w.chans = nil
}
