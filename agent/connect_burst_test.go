package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// TestSidecarBurstFirstConfig: 200 sidecars registered together on a -dev
// agent, with the CSR limit at its default (50/s, burst 1), all get their
// certificate and a first snapshot within a bound set by the limit (200
// signings at 50/s take 4 s; the bound adds a margin for a loaded
// machine), not by a retry timer: a refused signing must not wait tens of
// seconds for its retry, nor a proxy for a backoff after its leaf exists.
func TestSidecarBurstFirstConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("signs 200 leaves at the default CSR rate")
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const (
		sidecars = 200
		bound    = 10 * time.Second
	)
	a, _, stopAgent := devAgent(t)
	defer stopAgent()
	p := startTestProxycfg(t, a)
	// Once the API serves roots, no signing may fail for want of them.
	waitFor(t, "CA roots", func() bool {
		var roots structs.IndexedCARoots
		err := structs.MethodConnectCARoots.Call(context.Background(), a, &structs.DCSpecificRequest{}, &roots)
		return err == nil && roots.ActiveRootID != ""
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		last  time.Duration
		errs  []error
		times []time.Duration
	)
	for i := range sidecars {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("svc%03d", i)
			err := func() error {
				ch, err := p.Source().Watch(ctx, proxycfg.ProxyID{ServiceID: name + "-sidecar-proxy"})
				if err != nil {
					return err
				}
				def := &structs.ServiceDefinition{ID: name, Name: name, Port: 10000 + i,
					Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}
				if err := a.local.RegisterService(def, "", false); err != nil {
					return fmt.Errorf("register %s: %w", name, err)
				}
				deadline := time.NewTimer(time.Until(start.Add(bound)))
				defer deadline.Stop()
				for {
					select {
					case s := <-ch:
						if s.Leaf() != nil && s.Roots != nil {
							mu.Lock()
							last = max(last, time.Since(start))
							times = append(times, time.Since(start))
							mu.Unlock()
							return nil
						}
					case <-deadline.C:
						return fmt.Errorf("%s: no snapshot with a leaf within %s", name, bound)
					}
				}
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d sidecars without a first config within %s; first: %v", len(errs), sidecars, bound, errs[0])
	}
	slices.Sort(times)
	t.Logf("first config of %d sidecars: p50 %s, last %s", sidecars, times[len(times)/2].Round(time.Millisecond), last.Round(time.Millisecond))
}
