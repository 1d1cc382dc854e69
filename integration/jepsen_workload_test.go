package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// recorder collects the history of a run. Times are nanoseconds on the
// monotonic clock since the run started, so a wall-clock step cannot
// reorder operations.
type recorder struct {
	start time.Time

	mu          sync.Mutex
	ops         []jepsenOp
	nextProcess int
	problems    []string
}

// newRecorder numbers the first processes 0..clients-1, one per client.
func newRecorder(clients int) *recorder {
	return &recorder{start: time.Now(), nextProcess: clients}
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(o jepsenOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

func (r *recorder) newProcess() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextProcess++
	return r.nextProcess - 1
}

func (r *recorder) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// history returns the operations in call order, and the problems seen.
func (r *recorder) history() ([]jepsenOp, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := append([]jepsenOp(nil), r.ops...)
	sortByCall(ops)
	return ops, append([]string(nil), r.problems...)
}

// readPlan is the read mode of a run: one Consul mode for every read, or
// "mixed", which alternates default and ?consistent reads per operation.
type readPlan string

const (
	readsDefault    readPlan = "default"
	readsConsistent readPlan = "consistent"
	readsMixed      readPlan = "mixed"
	// readsStale is the self-test's: ?stale reads are not linearizable.
	readsStale readPlan = "stale"
)

// modes returns the Consul read modes the plan uses.
func (p readPlan) modes() []readMode {
	switch p {
	case readsConsistent:
		return []readMode{modeConsistent}
	case readsMixed:
		return []readMode{modeDefault, modeConsistent}
	case readsStale:
		return []readMode{modeStale}
	}
	return []readMode{modeDefault}
}

// kvOps sends the workload's requests and turns answers into operations.
type kvOps struct {
	rc  *rawClient
	rec *recorder
}

// read GETs key from srv in mode and records the read.
func (k kvOps) read(ctx context.Context, srv *harness.Agent, client, process int, key string, mode readMode, phase string) jepsenOp {
	o := jepsenOp{Process: process, Client: client, Kind: opRead, Key: key, Server: srv.Node(), Mode: mode.String(), Phase: phase}
	o.Call = k.rec.now()
	r, err := k.rc.do(ctx, http.MethodGet, srv.HTTPAddr(), kvPath(key, mode.apply(nil)), nil)
	o.Return = k.rec.now()
	var perr error
	o.Value, o.Index, o.Outcome, o.Status, o.Detail, perr = classifyRead(key, r, err)
	if perr != nil {
		k.rec.problem("%v: %s", perr, o)
	}
	k.rec.add(o)
	return o
}

// put PUTs value to key on srv, with ?cas=casIndex when o is a CAS, and
// records the outcome into o.
func (k kvOps) put(ctx context.Context, srv *harness.Agent, o jepsenOp) jepsenOp {
	o.Server = srv.Node()
	var q url.Values
	if o.Kind == opCAS {
		q = url.Values{"cas": {strconv.FormatUint(o.CASIndex, 10)}}
	}
	o.Call = k.rec.now()
	r, err := k.rc.do(ctx, http.MethodPut, srv.HTTPAddr(), kvPath(o.Key, q), []byte(o.Value))
	o.Return = k.rec.now()
	var perr error
	o.Outcome, o.Status, o.Detail, perr = classifyPut(o.Kind, r, err)
	if perr != nil {
		k.rec.problem("%v: %s", perr, o)
	}
	k.rec.add(o)
	return o
}

// classifyRead interprets a GET of one key: 200 with that key's entry, or
// 404 (absent), is an answer; anything else is a failed read, and an answer
// Consul never gives is also a protocol error.
func classifyRead(key string, r response, err error) (value string, index uint64, out outcome, status int, detail string, perr error) {
	if err != nil {
		return "", 0, outcomeError, 0, err.Error(), nil //nolint:nilerr // a failed request is an outcome in the history, not a protocol error
	}
	switch {
	case r.Status == http.StatusNotFound:
		return "", 0, outcomeOK, r.Status, "", nil
	case r.Status == http.StatusOK:
		var entries []kvEntry
		if err := json.Unmarshal(r.Body, &entries); err != nil || len(entries) != 1 || entries[0].Key != key || len(entries[0].Value) == 0 {
			return "", 0, outcomeError, r.Status, string(r.Body), fmt.Errorf("%w: GET %s answered 200 %q", errProtocol, key, r.Body)
		}
		return string(entries[0].Value), entries[0].ModifyIndex, outcomeOK, r.Status, "", nil
	case r.Status >= 500:
		return "", 0, outcomeError, r.Status, strings.TrimSpace(string(r.Body)), nil
	}
	return "", 0, outcomeError, r.Status, string(r.Body), fmt.Errorf("%w: GET %s answered %d %q", errProtocol, key, r.Status, r.Body)
}

// classifyPut interprets a PUT. Only a refused connection proves the
// request was never sent; once it was, a timeout, a reset or a 5xx leaves
// the outcome unknown, unless the body promises it was not applied.
func classifyPut(kind opKind, r response, err error) (out outcome, status int, detail string, perr error) {
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return outcomeNotSent, 0, err.Error(), nil
		}
		return outcomeUnknown, 0, err.Error(), nil
	}
	body := strings.TrimSpace(string(r.Body))
	switch {
	case r.Status == http.StatusOK && body == "true":
		return outcomeOK, r.Status, "", nil
	case r.Status == http.StatusOK && body == "false" && kind == opCAS:
		return outcomeFailed, r.Status, "", nil
	case isNoLeader(r.Status, body):
		return outcomeRefused, r.Status, body, nil
	case r.Status >= 500:
		return outcomeUnknown, r.Status, body, nil
	}
	return outcomeUnknown, r.Status, body, fmt.Errorf("%w: PUT answered %d %q", errProtocol, r.Status, body)
}

// keySpace names the workload's keys: n live keys, renamed every epoch,
// as Jepsen's independent keys are. A key's history then stays short, and
// porcupine's search, exponential in the unknown outcomes open on one key,
// stays fast however long the run; the final reads still cover every key.
type keySpace struct {
	start time.Time
	epoch time.Duration
	n     int
}

func (k keySpace) key(epoch, i int) string { return fmt.Sprintf("jepsen/e%02d/k%d", epoch, i) }

// pick returns a random live key.
func (k keySpace) pick(rng *rand.Rand) string {
	return k.key(int(time.Since(k.start)/k.epoch), rng.IntN(k.n))
}

// all returns every key a workload of length d uses.
func (k keySpace) all(d time.Duration) []string {
	var out []string
	for e := range int((d + k.epoch - 1) / k.epoch) {
		for i := range k.n {
			out = append(out, k.key(e, i))
		}
	}
	return out
}

// jepsenClient is one workload client: it sends every request to its own
// server, one at a time, choosing read, write or CAS on a random key.
type jepsenClient struct {
	id      int
	process int
	srv     *harness.Agent
	kv      kvOps
	keys    keySpace
	reads   []readMode
	rng     *rand.Rand
}

// Bounds of one client's loop besides its deadline.
const (
	clientMaxOps = 200000
	// clientBackoff is the pause after a request that did not get through,
	// so a client of a dead server does not spin.
	clientBackoff = 50 * time.Millisecond
)

func (c *jepsenClient) run(ctx context.Context, until time.Time) {
	for seq := 0; seq < clientMaxOps && ctx.Err() == nil && time.Now().Before(until); seq++ {
		key := c.keys.pick(c.rng)
		mode := c.reads[seq%len(c.reads)]
		var last jepsenOp
		switch c.rng.IntN(3) {
		case 0:
			last = c.kv.read(ctx, c.srv, c.id, c.process, key, mode, "")
		case 1:
			last = c.kv.put(ctx, c.srv, c.newOp(opWrite, key, seq))
		default:
			rd := c.kv.read(ctx, c.srv, c.id, c.process, key, mode, "")
			if last = rd; rd.Outcome != outcomeOK {
				break
			}
			o := c.newOp(opCAS, key, seq)
			o.Expect, o.CASIndex = rd.Value, rd.Index
			last = c.kv.put(ctx, c.srv, o)
		}
		if last.mayHaveApplied() {
			c.process = c.kv.rec.newProcess()
		}
		if last.Outcome != outcomeOK && last.Outcome != outcomeFailed {
			select {
			case <-ctx.Done():
			case <-time.After(clientBackoff):
			}
		}
	}
}

// newOp starts a write or CAS with a value no other operation writes.
func (c *jepsenClient) newOp(kind opKind, key string, seq int) jepsenOp {
	return jepsenOp{Process: c.process, Client: c.id, Kind: kind, Key: key, Value: fmt.Sprintf("c%d-%d", c.id, seq)}
}

// runClients runs n clients, client i on servers[i%len(servers)], until
// keys.start+d, and returns when all have finished.
func runClients(ctx context.Context, kv kvOps, servers []*harness.Agent, n int, keys keySpace, plan readPlan, d time.Duration, seed uint64) {
	until := keys.start.Add(d)
	var wg sync.WaitGroup
	for i := range n {
		c := &jepsenClient{
			id: i, process: i, srv: servers[i%len(servers)], kv: kv, keys: keys,
			reads: plan.modes(), rng: newRand(seed + uint64(i) + 1),
		}
		wg.Go(func() { c.run(ctx, until) })
	}
	wg.Wait()
}

func sortByCall(ops []jepsenOp) {
	slices.SortStableFunc(ops, func(a, b jepsenOp) int { return cmp.Compare(a.Call, b.Call) })
}

// newRand returns a generator of its own for one goroutine; the seed is
// logged so a run's choice of operations can be told apart.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed>>32)) }
