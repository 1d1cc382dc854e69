package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/structs"
)

// faultyLog is a Raft log store whose writes a test can make fail as on a
// full disk, or slow as on a disk with a slow fsync.
type faultyLog struct {
	raft.LogStore
	mu sync.Mutex
	// full and delay are guarded by mu.
	full  bool
	delay time.Duration
}

func (f *faultyLog) set(full bool, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full, f.delay = full, delay
}

func (f *faultyLog) StoreLogs(logs []*raft.Log) error {
	f.mu.Lock()
	full, delay := f.full, f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	if full {
		return fmt.Errorf("write raft.db: %w", syscall.ENOSPC)
	}
	return f.LogStore.StoreLogs(logs)
}

func (f *faultyLog) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

// writeOutcome is what a client learned of one write.
type writeOutcome int

const (
	wroteOK writeOutcome = iota
	wroteNothing
	wroteUnknown
)

// TestDiskFaults: with one server's disk full or slow, leader or
// follower, every write acknowledged is kept, every write reported as
// not applied is absent, and writes go on through the other servers. A
// server that cannot write its log stops taking part in Raft (a full
// leader would otherwise be re-elected and step down forever); restarted
// once the disk recovers, it catches up and all servers agree.
func TestDiskFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader bool // fault the leader, else a follower
		full   bool
		delay  time.Duration
	}{
		{"follower disk full", false, true, 0},
		{"leader disk full", true, true, 0},
		{"follower slow fsync", false, false, 300 * time.Millisecond},
		{"leader slow fsync", true, false, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := map[string]*faultyLog{}
			servers := startTestCluster(t, 3, true, func(ts *testServer) {
				ts.wrapLog = func(l raft.LogStore) raft.LogStore {
					f := &faultyLog{LogStore: l}
					logs[ts.name] = f
					return f
				}
			})
			leader, follower := leaderAndFollower(t, servers)
			target := follower
			if tc.leader {
				target = leader
			}
			logs[target.name].set(tc.full, tc.delay)

			outcomes := runWriters(t, servers, 4, 5*time.Second)
			logs[target.name].set(false, 0)

			ok := 0
			for _, o := range outcomes {
				if o == wroteOK {
					ok++
				}
			}
			if ok == 0 {
				t.Fatalf("no write succeeded with one server's disk at fault: %v", outcomes)
			}
			if stopped := target.srv.raftStopped.Load(); stopped != tc.full {
				t.Fatalf("%s stopped its raft: %v, want %v", target.name, stopped, tc.full)
			}
			// A stopped server says so, once its Raft has stopped, for its
			// process to exit.
			if tc.full {
				select {
				case <-target.srv.Failed():
				case <-time.After(10 * time.Second):
					t.Fatal("Failed was not closed after raft stopped")
				}
				if err := target.srv.Failure(); !errors.Is(err, ErrLogWriteFailed) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Failure = %v, want ErrLogWriteFailed wrapping ENOSPC", err)
				}
			} else if err := target.srv.Failure(); err != nil {
				t.Fatalf("a slow disk failed the server: %v", err)
			}
			if tc.full {
				// The operator frees the disk and restarts the server.
				target.stop(t)
				var join []string
				for _, ts := range servers {
					if ts != target {
						join = append(join, net.JoinHostPort("127.0.0.1", strconv.Itoa(ts.serfPort)))
					}
				}
				startTestServer(t, target, 3, false, join)
			}
			leader = waitForLeader(t, servers, 30*time.Second)
			var out structs.IndexedDirEntries
			rpc(t, leader.srv, structs.MethodKVSList, &structs.KeyListRequest{Prefix: "w", QueryOptions: structs.QueryOptions{RequireConsistent: true}}, &out)
			stored := map[string]bool{}
			for _, e := range out.Entries {
				stored[e.Key] = true
			}
			for key, o := range outcomes {
				switch {
				case o == wroteOK && !stored[key]:
					t.Errorf("%s was acknowledged and is gone", key)
				case o == wroteNothing && stored[key]:
					t.Errorf("%s was reported as not applied and is there", key)
				}
			}
			waitForAgreement(t, servers, leader.srv.raft.AppliedIndex())
			t.Logf("%d writes: %d acknowledged", len(outcomes), ok)
		})
	}
}

// runWriters writes unique keys through every server from n writers for d
// and returns what each write's client learned.
func runWriters(t *testing.T, servers []*testServer, n int, d time.Duration) map[string]writeOutcome {
	t.Helper()
	var mu sync.Mutex
	outcomes := map[string]writeOutcome{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				key := fmt.Sprintf("w%d/%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var ok bool
				err := structs.MethodKVSApply.Call(ctx, servers[(w+i)%len(servers)].srv, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: key, Value: []byte("v")}}, &ok)
				cancel()
				o := wroteOK
				switch {
				case err == nil:
				case errors.Is(err, structs.ErrNoLeader) && !structs.MaybeApplied(err):
					o = wroteNothing
				default:
					o = wroteUnknown
				}
				mu.Lock()
				outcomes[key] = o
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return outcomes
}

// waitForAgreement waits until every server has applied index.
func waitForAgreement(t *testing.T, servers []*testServer, index uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, ts := range servers {
		for ts.srv.raft.AppliedIndex() < index {
			if time.Now().After(deadline) {
				t.Fatalf("%s applied %d, leader %d", ts.name, ts.srv.raft.AppliedIndex(), index)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
