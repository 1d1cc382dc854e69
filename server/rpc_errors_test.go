package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/trellis-mesh/trellis/structs"
)

// TestSentinelsCrossTheWire: every sentinel a server may return keeps its
// identity through the wire encoding, as itself or wrapped with more
// text, and an error of no sentinel keeps its message.
func TestSentinelsCrossTheWire(t *testing.T) {
	for _, e := range structs.Sentinels() {
		for _, err := range []error{e, fmt.Errorf("%w: more", e), fmt.Errorf("context: %w", e)} {
			st, _ := status.FromError(statusOf(err))
			got := errorOf(st)
			if !errors.Is(got, e) || got.Error() != err.Error() || structs.CodeOf(got) != e.Code() {
				t.Errorf("%q arrived as %v (%T), code %s", err, got, got, structs.CodeOf(got))
			}
		}
	}
	st, _ := status.FromError(statusOf(errors.New("Must provide node")))
	if got := errorOf(st); got == nil || got.Error() != "Must provide node" || structs.SentinelOf(got) != nil {
		t.Errorf("a plain error arrived as %v", got)
	}
}

// TestServerErrorsOverLoopback: sentinels a real server returns over a
// real loopback call satisfy errors.Is on the caller's side.
func TestServerErrorsOverLoopback(t *testing.T) {
	ts := startTestCluster(t, 1, false)[0]
	pool := NewConnPool(ConnPoolConfig{})
	defer pool.Close()
	addr := ts.srv.cfg.Advertise.String()
	call := func(method string, args, reply any) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return pool.Call(ctx, addr, method, args, reply)
	}
	waitForCA(t, ts.srv)
	for _, tc := range []struct {
		name        string
		method      string
		args, reply any
		want        error
	}{
		{"intention not found", structs.MethodIntentionGet.Name(),
			&structs.IntentionQueryRequest{IntentionID: "8f246b77-f3e1-ff88-5b48-8ec93abf3e05"}, new(structs.IndexedIntentions), structs.ErrIntentionNotFound},
		{"no path to datacenter", structs.MethodKVSGet.Name(),
			&structs.KeyRequest{Key: "k", QueryOptions: structs.QueryOptions{Datacenter: "elsewhere"}}, new(structs.IndexedDirEntries), structs.ErrNoDCPath},
		{"filter not supported", structs.MethodKVSGet.Name(),
			&structs.KeyRequest{Key: "k", QueryOptions: structs.QueryOptions{Filter: "Key == k"}}, new(structs.IndexedDirEntries), structs.ErrFilterNotSupported},
		{"CA state read-only", structs.MethodConnectCAConfigurationSet.Name(),
			&structs.CARequest{Config: &structs.CAConfiguration{Provider: structs.ConsulCAProvider, State: map[string]string{"x": "y"}}}, new(struct{}), structs.ErrCAStateReadOnly},
		{"unknown method", "Nope.Nothing", &structs.DCSpecificRequest{}, new(struct{}), structs.ErrUnknownMethod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := call(tc.method, tc.args, tc.reply)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v (%T), want errors.Is %v", err, err, tc.want)
			}
		})
	}
}
