package local

import (
	"strconv"
	"sync"
	"testing"
	"time"

	agentlocal "github.com/trellis-mesh/trellis/agent/local"
	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/mgrtest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// signalManager is the real manager, telling the benchmark when the
// source registered the proxy it waits for.
type signalManager struct {
	*proxycfg.Manager
	done chan struct{}

	mu sync.Mutex
	// want is guarded by mu.
	want string
}

func (m *signalManager) expect(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want = id
}

func (m *signalManager) Register(id proxycfg.ProxyID, svc *structs.NodeService, source proxycfg.ProxySource, token string, overwrite bool) error {
	err := m.Manager.Register(id, svc, source, token, overwrite)
	m.mu.Lock()
	want := m.want
	m.mu.Unlock()
	if id.ServiceID == want {
		m.done <- struct{}{}
	}
	return err
}

// BenchmarkLocalSidecars measures, with N sidecar services already in
// local state and served by a real manager, what one more change costs
// until the source has acted on it: a registration (local state, the
// source, the manager's new state machine), and a check update (its
// status flips; then a registration of a fence sidecar, so that the op
// includes whatever the update made the source do). Both should stay
// flat as N grows: the cost is the changed service's, not all N.
func BenchmarkLocalSidecars(b *testing.B) {
	for _, n := range []int{500, 2000, 5000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			store := state.NewStore()
			mgrtest.SeedCA(b, store, 1)
			real := mgrtest.Manager(b, func() *state.Store { return store }, nil)
			m := &signalManager{Manager: real, done: make(chan struct{}, 1)}
			st, err := agentlocal.NewState(agentlocal.Config{NodeName: "n1", Datacenter: "dc1", AdvertiseAddr: "127.0.0.1"})
			if err != nil {
				b.Fatal(err)
			}
			src, err := New(Config{NodeName: "n1", State: st, Manager: m, ResyncInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			src.Start()
			b.Cleanup(src.Stop)
			register := func(name string, port int) {
				def := &structs.ServiceDefinition{Name: name, Port: port,
					Check:   &structs.CheckType{TTL: structs.Duration(time.Hour)},
					Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Port: port + 30000}}}
				if _, err := st.RegisterService(def, "", false); err != nil {
					b.Fatal(err)
				}
			}
			// wait registers name's sidecar and waits until the source
			// registered it with the manager.
			wait := func(name string, port int) {
				m.expect(name + "-sidecar-proxy")
				register(name, port)
				<-m.done
			}
			for i := range n {
				register("svc"+strconv.Itoa(i), 10000+i)
			}
			wait("ready", 1)

			b.Run("register", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					wait("new"+strconv.Itoa(i), 20000+i%10000)
				}
			})
			b.Run("check-update", func(b *testing.B) {
				status := []string{structs.HealthCritical, structs.HealthPassing}
				for i := 0; b.Loop(); i++ {
					st.UpdateCheck("service:svc0", status[i%2], "")
					wait("fence", 30000+i%1000)
				}
			})
		})
	}
}
