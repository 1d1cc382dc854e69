package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/userevent"
	"github.com/trellis-mesh/trellis/structs"
)

// loopbackEvents is an agent whose gossip delivers each fired event back
// to itself only: what it fires lands in its own ring, as Serf does.
type loopbackEvents struct {
	buf   *userevent.Buffer
	fired []*structs.UserEvent
}

func (l *loopbackEvents) FireEvent(ev *structs.UserEvent) error {
	if err := userevent.Validate(ev); err != nil {
		return err
	}
	c := *ev
	c.LTime = uint64(len(l.fired) + 1)
	l.fired = append(l.fired, &c)
	l.buf.Add(&c)
	return nil
}

func (l *loopbackEvents) UserEvents() ([]*structs.UserEvent, <-chan struct{}) { return l.buf.List() }

func newEventServer(t *testing.T) (*Server, *loopbackEvents) {
	t.Helper()
	ev := &loopbackEvents{buf: userevent.NewBuffer(0)}
	s, _, _ := newTestServer(t, func(_ *fakeRPC, c *Config) { c.Events = ev })
	return s, ev
}

func TestEventFire(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		body     string
		wantCode int
		wantBody string
		check    func(t *testing.T, ev *structs.UserEvent)
	}{
		{name: "payload and filters", path: "/v1/event/fire/deploy?node=^web&service=api&tag=v1", body: "v2", wantCode: 200,
			check: func(t *testing.T, ev *structs.UserEvent) {
				if ev.Name != "deploy" || string(ev.Payload) != "v2" || ev.NodeFilter != "^web" || ev.ServiceFilter != "api" ||
					ev.TagFilter != "v1" || ev.Version != 1 || len(ev.ID) != 36 {
					t.Fatalf("fired %+v", ev)
				}
			}},
		{name: "no body is a null payload", path: "/v1/event/fire/ping", wantCode: 200,
			check: func(t *testing.T, ev *structs.UserEvent) {
				if ev.Payload != nil {
					t.Fatalf("payload = %q, want nil", ev.Payload)
				}
			}},
		{name: "missing name", path: "/v1/event/fire/", wantCode: 400, wantBody: "Missing name"},
		{name: "tag without service", path: "/v1/event/fire/x?tag=v1", wantCode: 500, wantBody: "Cannot provide tag filter without service filter"},
		{name: "bad regexp", path: "/v1/event/fire/x?node=(", wantCode: 500,
			wantBody: "invalid event filter: Invalid node filter: error parsing regexp: missing closing ): `(`"},
		{name: "another datacenter", path: "/v1/event/fire/x?dc=dc2", wantCode: 500, wantBody: "No path to datacenter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, evs := newEventServer(t)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if tt.check == nil {
				if rec.Body.String() != tt.wantBody || len(evs.fired) != 0 {
					t.Fatalf("body %q (want %q), fired %d", rec.Body, tt.wantBody, len(evs.fired))
				}
				return
			}
			if len(evs.fired) != 1 {
				t.Fatalf("fired %d events", len(evs.fired))
			}
			tt.check(t, evs.fired[0])
			// The answer is the event as fired, with Consul's fields and
			// LTime 0.
			want := `{"ID":"` + evs.fired[0].ID + `","Name":"` + evs.fired[0].Name + `","Payload":` + dump(evs.fired[0].Payload) +
				`,"NodeFilter":"` + evs.fired[0].NodeFilter + `","ServiceFilter":"` + evs.fired[0].ServiceFilter +
				`","TagFilter":"` + evs.fired[0].TagFilter + `","Version":1,"LTime":0}`
			assertJSONEqual(t, rec.Body.Bytes(), want)
		})
	}
}

// TestEventListWithConsulClient: the official client fires, lists by name
// and blocks on the event index, which it computes from the ID itself.
func TestEventListWithConsulClient(t *testing.T) {
	s, _ := newEventServer(t)
	c, _ := officialClient(t, s)
	events := c.Event()

	list, qm, err := events.List("", nil)
	if err != nil || len(list) != 0 || qm.LastIndex != 1 {
		t.Fatalf("empty list = %v, index %d, %v", list, qm.LastIndex, err)
	}
	id, _, err := events.Fire(&api.UserEvent{Name: "deploy", Payload: []byte("v1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := events.Fire(&api.UserEvent{Name: "other"}, nil); err != nil {
		t.Fatal(err)
	}
	list, qm, err = events.List("deploy", nil)
	if err != nil || len(list) != 1 || list[0].ID != id || string(list[0].Payload) != "v1" || list[0].LTime != 1 {
		t.Fatalf("list deploy = %+v, %v", list, err)
	}
	if qm.LastIndex != events.IDToIndex(id) {
		t.Fatalf("X-Consul-Index %d, want the client's IDToIndex %d", qm.LastIndex, events.IDToIndex(id))
	}

	// Blocking on the current index returns when a matching event comes
	// in, not for one of another name.
	type result struct {
		list []*api.UserEvent
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, _, err := events.List("deploy", &api.QueryOptions{WaitIndex: qm.LastIndex, WaitTime: time.Minute})
		done <- result{l, err}
	}()
	if _, _, err := events.Fire(&api.UserEvent{Name: "other"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("a blocking list returned for an event of another name: %+v %v", r.list, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	id2, _, err := events.Fire(&api.UserEvent{Name: "deploy", Payload: []byte("v2")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.list) != 2 || r.list[1].ID != id2 {
		t.Fatalf("blocking list = %+v, %v", r.list, r.err)
	}
	// A short wait with nothing new answers the same list.
	l, qm2, err := events.List("deploy", &api.QueryOptions{WaitIndex: events.IDToIndex(id2), WaitTime: 50 * time.Millisecond})
	if err != nil || len(l) != 2 || qm2.LastIndex != events.IDToIndex(id2) {
		t.Fatalf("timed-out list = %d events, index %d, %v", len(l), qm2.LastIndex, err)
	}
}

func TestEventIndex(t *testing.T) {
	c, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b54fe110-7af5-cafc-d1fb-afc8ba432b1c", "ffffffff-ffff-ffff-0000-000000000001"} {
		if got, want := eventIndex(id), c.Event().IDToIndex(id); got != want {
			t.Errorf("eventIndex(%s) = %d, want %d", id, got, want)
		}
	}
	for _, id := range []string{"", "not-a-uuid", "zzzzzzzz-7af5-cafc-d1fb-afc8ba432b1c", "00000000-0000-0000-0000-000000000000"} {
		if got := eventIndex(id); got != 1 {
			t.Errorf("eventIndex(%q) = %d, want 1", id, got)
		}
	}
}

func TestEventsUnavailable(t *testing.T) {
	s, _, _ := newTestServer(t, nil)
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodPut, "/v1/event/fire/x", nil),
		httptest.NewRequest(http.MethodGet, "/v1/event/list", nil),
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		if rec.Code != http.StatusNotImplemented {
			t.Errorf("%s %s = %d", r.Method, r.URL, rec.Code)
		}
	}
}
