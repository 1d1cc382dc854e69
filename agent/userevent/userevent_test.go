package userevent

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/structs"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ev   structs.UserEvent
		want error
	}{
		{"name only", structs.UserEvent{Name: "deploy"}, nil},
		{"all filters", structs.UserEvent{Name: "deploy", NodeFilter: "^web", ServiceFilter: "api", TagFilter: "v1"}, nil},
		{"no name", structs.UserEvent{}, ErrMissingName},
		{"tag without service", structs.UserEvent{Name: "x", TagFilter: "v1"}, ErrTagWithoutService},
		{"bad node regexp", structs.UserEvent{Name: "x", NodeFilter: "("}, ErrInvalidFilter},
		{"bad service regexp", structs.UserEvent{Name: "x", ServiceFilter: "[a"}, ErrInvalidFilter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Validate(&tt.ev); !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestAccept(t *testing.T) {
	services := map[string]*structs.NodeService{
		"web-1": {ID: "web-1", Service: "web", Tags: []string{"v1", "primary"}},
		"db":    {ID: "db", Service: "db"},
	}
	tests := []struct {
		name string
		ev   structs.UserEvent
		want bool
	}{
		{"no filter", structs.UserEvent{Name: "e"}, true},
		{"node matches", structs.UserEvent{Name: "e", NodeFilter: "^node-a$"}, true},
		{"node differs", structs.UserEvent{Name: "e", NodeFilter: "^node-b$"}, false},
		{"service by name", structs.UserEvent{Name: "e", ServiceFilter: "^web$"}, true},
		{"service by ID", structs.UserEvent{Name: "e", ServiceFilter: "^web-1$"}, true},
		{"service missing", structs.UserEvent{Name: "e", ServiceFilter: "^cache$"}, false},
		{"tag of the matched service", structs.UserEvent{Name: "e", ServiceFilter: "web", TagFilter: "^primary$"}, true},
		{"tag of another service", structs.UserEvent{Name: "e", ServiceFilter: "db", TagFilter: "^primary$"}, false},
		{"node and service both needed", structs.UserEvent{Name: "e", NodeFilter: "other", ServiceFilter: "web"}, false},
		{"newer version", structs.UserEvent{Name: "e", Version: structs.UserEventVersion + 1}, false},
		{"filter that does not compile", structs.UserEvent{Name: "e", NodeFilter: "("}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Accept(&tt.ev, "node-a", services); got != tt.want {
				t.Fatalf("Accept = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEncodeDecode(t *testing.T) {
	c := structs.NewCodec()
	in := &structs.UserEvent{ID: "b54fe110-7af5-cafc-d1fb-afc8ba432b1c", Name: "deploy", Payload: []byte("v2"),
		ServiceFilter: "web", TagFilter: "v1", Version: 1}
	name, payload, err := Encode(c, in)
	if err != nil || name != "consul:event:deploy" {
		t.Fatalf("Encode = %q, %v", name, err)
	}
	out, ok, err := Decode(c, serf.UserEvent{Name: name, Payload: payload, LTime: 7})
	if err != nil || !ok {
		t.Fatalf("Decode = %v, %v", ok, err)
	}
	want := *in
	want.LTime = 7
	if !reflect.DeepEqual(*out, want) {
		t.Fatalf("Decode = %+v, want %+v", *out, want)
	}
	if _, ok, _ := Decode(c, serf.UserEvent{Name: "other"}); ok {
		t.Fatal("a foreign Serf event was taken for a user event")
	}
	if _, ok, err := Decode(c, serf.UserEvent{Name: name, Payload: []byte{0xc1}}); !ok || err == nil {
		t.Fatalf("corrupt payload: ok=%v err=%v", ok, err)
	}
}

func TestBufferKeepsTheLastEvents(t *testing.T) {
	tests := []struct {
		size, add int
		want      []string
	}{
		{size: 3, add: 0, want: nil},
		{size: 3, add: 2, want: []string{"e0", "e1"}},
		{size: 3, add: 3, want: []string{"e0", "e1", "e2"}},
		{size: 3, add: 5, want: []string{"e2", "e3", "e4"}},
		{size: 0, add: DefaultBufferSize + 1, want: nil}, // checked by length below
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("size=%d/add=%d", tt.size, tt.add), func(t *testing.T) {
			b := NewBuffer(tt.size)
			for i := range tt.add {
				_, ch := b.List()
				b.Add(&structs.UserEvent{ID: fmt.Sprintf("e%d", i), Payload: []byte("p")})
				select {
				case <-ch:
				default:
					t.Fatal("Add did not wake the waiters")
				}
			}
			evs, _ := b.List()
			if tt.size == 0 {
				if len(evs) != DefaultBufferSize || evs[0].ID != "e1" {
					t.Fatalf("default ring kept %d events, first %s", len(evs), evs[0].ID)
				}
				return
			}
			var ids []string
			for _, ev := range evs {
				ids = append(ids, ev.ID)
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Fatalf("List = %v, want %v", ids, tt.want)
			}
			if len(evs) > 0 {
				evs[0].Payload[0] = 'x'
				if again, _ := b.List(); again[0].Payload[0] != 'p' {
					t.Fatal("List shares payloads with the ring")
				}
			}
		})
	}
}
