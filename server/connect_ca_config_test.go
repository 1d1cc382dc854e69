package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestConnectCAFromAgentConfig: the agent's connect block seeds the first
// CA (cluster ID, TTLs, CSR limits), and connect.enabled = false leaves the cluster
// without one, every CA method answering Consul's "Connect must be
// enabled" error.
func TestConnectCAFromAgentConfig(t *testing.T) {
	t.Run("cluster id and ttls", func(t *testing.T) {
		s := startTestCluster(t, 1, false, func(ts *testServer) {
			ts.connect = ConnectConfig{ClusterID: "11111111-2222-3333-4444-555555555555", LeafCertTTL: 24 * time.Hour}
		})[0].srv
		roots := waitForCA(t, s)
		if roots.TrustDomain != "11111111-2222-3333-4444-555555555555.consul" {
			t.Fatalf("trust domain %q", roots.TrustDomain)
		}
		var cfg structs.CAConfiguration
		rpc(t, s, structs.MethodConnectCAConfigurationGet, &structs.DCSpecificRequest{}, &cfg)
		if cfg.ClusterID != "11111111-2222-3333-4444-555555555555" || cfg.Config["LeafCertTTL"] != "24h0m0s" || cfg.Config["RootCertTTL"] != "87600h" {
			t.Fatalf("config %+v", cfg)
		}
	})

	t.Run("csr limits", func(t *testing.T) {
		rate := 7.5
		s := startTestCluster(t, 1, false, func(ts *testServer) {
			ts.connect = ConnectConfig{CSRMaxPerSecond: &rate, CSRMaxConcurrent: 3}
		})[0].srv
		waitForCA(t, s)
		var cfg structs.CAConfiguration
		rpc(t, s, structs.MethodConnectCAConfigurationGet, &structs.DCSpecificRequest{}, &cfg)
		// Numbers come back as the codec decodes them: compare as printed.
		if fmt.Sprint(cfg.Config["CSRMaxPerSecond"]) != "7.5" || fmt.Sprint(cfg.Config["CSRMaxConcurrent"]) != "3" {
			t.Fatalf("config %+v", cfg.Config)
		}
	})

	t.Run("disabled", func(t *testing.T) {
		s := startTestCluster(t, 1, false, func(ts *testServer) { ts.connect.Disabled = true })[0].srv
		ctx := context.Background()
		calls := map[string]func() error{
			"roots": func() error {
				return structs.MethodConnectCARoots.Call(ctx, s, &structs.DCSpecificRequest{}, &structs.IndexedCARoots{})
			},
			"config get": func() error {
				return structs.MethodConnectCAConfigurationGet.Call(ctx, s, &structs.DCSpecificRequest{}, &structs.CAConfiguration{})
			},
			"config set": func() error { return setCAConfig(t, s, map[string]interface{}{}) },
			"sign": func() error {
				return structs.MethodConnectCASign.Call(ctx, s, &structs.CASignRequest{CSR: "x"}, &structs.IssuedCert{})
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, structs.ErrConnectNotEnabled) {
				t.Errorf("%s: err %v, want ErrConnectNotEnabled", name, err)
			}
		}
		if _, cfg, err := s.fsm.State().CAConfig(nil); err != nil || cfg != nil {
			t.Fatalf("a CA configuration was written: %+v %v", cfg, err)
		}
	})
}

// TestConnectCAProviderStatePassThrough: as Consul's built-in provider, a
// test_state map in the provider configuration becomes the configuration's
// State, which a later read returns.
func TestConnectCAProviderStatePassThrough(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	waitForCA(t, s)
	var cfg structs.CAConfiguration
	rpc(t, s, structs.MethodConnectCAConfigurationGet, &structs.DCSpecificRequest{}, &cfg)
	cfg.Config["test_state"] = map[string]interface{}{"foo": "bar"}
	cfg.Config["IntermediateCertTTL"] = "7200h"
	if err := setCAConfig(t, s, cfg.Config); err != nil {
		t.Fatal(err)
	}
	var got structs.CAConfiguration
	rpc(t, s, structs.MethodConnectCAConfigurationGet, &structs.DCSpecificRequest{}, &got)
	if got.State["foo"] != "bar" || got.Config["IntermediateCertTTL"] != "7200h" {
		t.Fatalf("config after set: %+v", got)
	}
}
