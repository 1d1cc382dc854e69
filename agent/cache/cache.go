// Package cache is the agent's cache for Consul's ?cached reads ("background
// refresh" caching): one entry per distinct request, each kept current by a
// goroutine that repeats the request as a blocking query, so that a cached
// read is answered locally, with the servers' latest answer, and keeps
// being answered while the servers cannot be reached.
package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Consul's defaults: an entry unused for three days is dropped ("fail
// static" across a weekend's outage), a blocking read waits five minutes
// unless told otherwise and ten at most.
const (
	defaultTTL         = 72 * time.Hour
	defaultRefreshWait = 10 * time.Minute
	defaultWait        = 5 * time.Minute
	maxWait            = 10 * time.Minute
	minBackoff         = time.Second
	maxBackoff         = time.Minute
)

// Config holds every dependency of the cache.
type Config struct {
	// RPC answers the reads the cache makes. Required.
	RPC structs.Caller
	// Logger receives refresh failures. Nil discards.
	Logger *slog.Logger
	// TTL is how long an entry nobody reads is kept (and refreshed). Zero
	// means Consul's 72h.
	TTL time.Duration
	// RefreshWait is the wait of each background blocking query. Zero
	// means 10m.
	RefreshWait time.Duration
}

// Args is a read's arguments: any request that embeds structs.QueryOptions.
type Args interface {
	QueryOpts() *structs.QueryOptions
}

// Options are a cached read's Cache-Control directives.
type Options struct {
	// MaxAge, when positive, refuses a cached answer older than this (one
	// whose background refresh has failed for that long) and asks the
	// servers instead.
	MaxAge time.Duration
	// StaleIfError, when positive, still gives the cached answer if that
	// fresh read fails and the answer is no older than this.
	StaleIfError time.Duration
}

// Result says how a read was answered: Consul's X-Cache and Age headers.
type Result struct {
	// Hit is whether the answer was already in the cache.
	Hit bool
	// Age is how long the answer has not been known to be current: zero
	// while the background refresh succeeds, else the time since it last
	// did.
	Age time.Duration
}

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("cache: closed")

// Cache is the agent cache. Create it with New and stop it with Close.
type Cache struct {
	rpc         structs.Caller
	log         *slog.Logger
	codec       *structs.Codec
	ttl         time.Duration
	refreshWait time.Duration
	// now is the clock; tests keep the real one.
	now func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// entries, keyed by method, token and encoded arguments.
	entries map[string]*entry
	// closed is set by Close; no entry is added after it.
	closed bool
}

// entry is one cached request. Its fields are guarded by Cache.mu.
type entry struct {
	method string
	// args is a private copy of the request, without blocking options.
	args  Args
	value []byte // the encoded reply; nil until a read succeeded
	index uint64
	err   error // the last refresh's error, nil after a success
	// lostContact is when the refresh began failing; zero while it works.
	lostContact time.Time
	lastUsed    time.Time
	// changed is closed (and replaced) whenever a refresh attempt ends.
	changed chan struct{}
}

// New builds a cache from cfg.
func New(cfg Config) (*Cache, error) {
	if cfg.RPC == nil {
		return nil, errors.New("cache: RPC is required")
	}
	c := &Cache{
		rpc:         cfg.RPC,
		log:         cfg.Logger,
		codec:       structs.NewCodec(),
		ttl:         cfg.TTL,
		refreshWait: cfg.RefreshWait,
		now:         time.Now,
		entries:     map[string]*entry{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.ttl <= 0 {
		c.ttl = defaultTTL
	}
	if c.refreshWait <= 0 {
		c.refreshWait = defaultRefreshWait
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops every background refresh and waits for them.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Get answers the read method(args) into reply (a pointer to the method's
// reply type) from the cache, starting the entry's background refresh on
// the first request. With args' MinQueryIndex set it blocks, as a blocking
// query does, until the cached index passes it or MaxQueryTime elapses.
func (c *Cache) Get(ctx context.Context, method string, args Args, reply any, opts Options) (Result, error) {
	q := args.QueryOpts()
	minIndex, wait := q.MinQueryIndex, q.MaxQueryTime
	key, private, err := c.key(method, args)
	if err != nil {
		return Result{}, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Result{}, ErrClosed
	}
	e := c.entries[key]
	if e == nil {
		e = &entry{method: method, args: private, changed: make(chan struct{})}
		c.entries[key] = e
		c.wg.Add(1)
		go c.refresh(key, e, reflect.TypeOf(reply).Elem())
	}
	e.lastUsed = c.now()
	hit := e.value != nil
	// Without a value yet, wait for the refresh's next attempt: its answer
	// or its error is this read's.
	for e.value == nil {
		if err := c.waitLocked(ctx, e, nil); err != nil {
			c.mu.Unlock()
			return Result{}, err
		}
		if e.value == nil && e.err != nil {
			err := e.err
			c.mu.Unlock()
			return Result{}, err
		}
	}
	if minIndex > 0 && e.index <= minIndex {
		if wait <= 0 {
			wait = defaultWait
		}
		timeout := time.After(min(wait, maxWait))
		for e.index <= minIndex {
			if err := c.waitLocked(ctx, e, timeout); err != nil {
				if errors.Is(err, errTimeout) {
					break
				}
				c.mu.Unlock()
				return Result{}, err
			}
		}
		// A change the read waited for was not in the cache when it came.
		hit = hit && e.index <= minIndex
	}
	res := Result{Hit: hit}
	if !e.lostContact.IsZero() {
		res.Age = c.now().Sub(e.lostContact)
	}
	value := e.value
	c.mu.Unlock()

	if opts.MaxAge > 0 && res.Age > opts.MaxAge {
		// Too old for this client: ask the servers (without blocking),
		// falling back to the cached answer only within stale-if-error.
		q.MinQueryIndex = 0
		err := c.rpc.RPC(ctx, method, args, reply)
		if err == nil {
			return Result{}, nil
		}
		if opts.StaleIfError <= 0 || res.Age > opts.StaleIfError {
			return Result{}, err
		}
	}
	if err := c.codec.Unmarshal(value, reply); err != nil {
		return Result{}, fmt.Errorf("cache: decode %s: %w", method, err)
	}
	return res, nil
}

var errTimeout = errors.New("cache: wait elapsed")

// waitLocked waits, with c.mu released, for e's next refresh attempt, ctx,
// timeout (nil for none) or Close.
func (c *Cache) waitLocked(ctx context.Context, e *entry, timeout <-chan time.Time) error {
	changed := e.changed
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-changed:
		return nil
	case <-timeout:
		return errTimeout
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// key names a request: the method, the token (which the encoding leaves
// out) and the arguments without their blocking options. It returns the
// private copy of the arguments the refresh uses.
func (c *Cache) key(method string, args Args) (string, Args, error) {
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return "", nil, fmt.Errorf("cache: %s: arguments must be a non-nil pointer", method)
	}
	b, err := c.codec.Marshal(args)
	if err != nil {
		return "", nil, fmt.Errorf("cache: encode %s: %w", method, err)
	}
	cp := reflect.New(v.Elem().Type())
	if err := c.codec.Unmarshal(b, cp.Interface()); err != nil {
		return "", nil, fmt.Errorf("cache: copy %s: %w", method, err)
	}
	private := cp.Interface().(Args)
	q := private.QueryOpts()
	q.Token = args.QueryOpts().Token
	q.MinQueryIndex, q.MaxQueryTime = 0, 0
	if b, err = c.codec.Marshal(private); err != nil {
		return "", nil, fmt.Errorf("cache: encode %s: %w", method, err)
	}
	var k bytes.Buffer
	k.WriteString(method)
	k.WriteByte(0)
	k.WriteString(q.Token)
	k.WriteByte(0)
	k.Write(b)
	return k.String(), private, nil
}

// refresh keeps e current with blocking queries until it has gone unused
// for the TTL or the cache closes.
func (c *Cache) refresh(key string, e *entry, replyType reflect.Type) {
	defer c.wg.Done()
	backoff := minBackoff
	for {
		c.mu.Lock()
		if c.now().Sub(e.lastUsed) > c.ttl {
			delete(c.entries, key)
			c.mu.Unlock()
			return
		}
		args := e.args
		args.QueryOpts().MinQueryIndex = e.index
		args.QueryOpts().MaxQueryTime = c.refreshWait
		c.mu.Unlock()

		reply := reflect.New(replyType).Interface()
		err := c.rpc.RPC(c.ctx, e.method, args, reply)
		var value []byte
		if err == nil {
			value, err = c.codec.Marshal(reply)
		}
		if c.ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		if err != nil {
			if e.lostContact.IsZero() {
				e.lostContact = c.now()
			}
			e.err = err
		} else {
			index := uint64(0)
			if m, ok := reply.(interface{ Meta() *structs.QueryMeta }); ok {
				index = m.Meta().Index
			}
			// An index that went backwards (a restored snapshot) starts
			// the blocking over; zero would not block at all.
			e.value, e.index, e.err = value, max(index, 1), nil
			e.lostContact = time.Time{}
		}
		close(e.changed)
		e.changed = make(chan struct{})
		c.mu.Unlock()

		if err == nil {
			backoff = minBackoff
			continue
		}
		c.log.Debug("cache refresh failed", "method", e.method, "error", err)
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
