package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/watches"
	"github.com/trellis-mesh/trellis/structs"
)

// Services and checks defined in the config files. They are registered
// into local state at start, through the same path as the HTTP API's
// registrations, but not persisted: the files are their record. A reload
// registers them again (a changed definition replaces the old one),
// removes the ones the files no longer define, and leaves what the HTTP
// API registered alone. Consul reaches the same state by unloading every
// service and loading the config and the data dir again.

// configDefinitions is the decoded service and check definitions of a
// configuration, with where each came from.
type configDefinitions struct {
	services []*structs.ServiceDefinition
	checks   []*structs.CheckDefinition
	// sources name, per service and per check, the config source it was
	// read from, for error messages.
	serviceSources, checkSources []string
}

// decodeConfigDefinitions decodes rc's definitions as the HTTP API decodes
// a registration's body. An error names the source, the definition and
// the field.
func decodeConfigDefinitions(rc *config.RuntimeConfig) (*configDefinitions, error) {
	out := &configDefinitions{}
	var errs []error
	for i, d := range rc.Services {
		def := &structs.ServiceDefinition{}
		if err := structs.DecodeAgentDefinition(serviceCheckIDs(d.JSON), def); err != nil {
			errs = append(errs, fmt.Errorf("agent: %s: service %d: %w", d.Source, i+1, describeDecodeError(err)))
			continue
		}
		out.services = append(out.services, def)
		out.serviceSources = append(out.serviceSources, d.Source)
	}
	for i, d := range rc.Checks {
		def := &structs.CheckDefinition{}
		if err := structs.DecodeAgentDefinition(d.JSON, def); err != nil {
			errs = append(errs, fmt.Errorf("agent: %s: check %d: %w", d.Source, i+1, describeDecodeError(err)))
			continue
		}
		out.checks = append(out.checks, def)
		out.checkSources = append(out.checkSources, d.Source)
	}
	return out, errors.Join(errs...)
}

// ValidateDefinitions decodes the service and check definitions of rc, as
// the agent does before registering them, and parses its watches
// (trellis validate).
func ValidateDefinitions(rc *config.RuntimeConfig) error {
	if _, err := decodeConfigDefinitions(rc); err != nil {
		return err
	}
	return watches.Validate(rc.Watches)
}

// serviceCheckIDs renames "id" to "CheckID" in the checks of a service
// definition and of its sidecar: a config file names a service's check
// with id (Consul's config CheckDefinition), the HTTP API with CheckID.
// A document it cannot read is returned unchanged, for the decoder to
// report.
func serviceCheckIDs(data []byte) []byte {
	var svc map[string]any
	if err := json.Unmarshal(data, &svc); err != nil {
		return data
	}
	renameCheckIDs(svc)
	if out, err := json.Marshal(svc); err == nil {
		return out
	}
	return data
}

func renameCheckIDs(svc map[string]any) {
	rename := func(v any) {
		c, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, id := range c {
			if strings.EqualFold(k, "id") {
				delete(c, k)
				if _, set := c["CheckID"]; !set {
					c["CheckID"] = id
				}
			}
		}
	}
	for k, v := range svc {
		switch strings.ToLower(strings.ReplaceAll(k, "_", "")) {
		case "check":
			rename(v)
		case "checks":
			if list, ok := v.([]any); ok {
				for _, c := range list {
					rename(c)
				}
			}
		case "connect":
			if conn, ok := v.(map[string]any); ok {
				for ck, cv := range conn {
					if sc, ok := cv.(map[string]any); ok && strings.EqualFold(strings.ReplaceAll(ck, "_", ""), "sidecarservice") {
						renameCheckIDs(sc)
					}
				}
			}
		}
	}
}

// describeDecodeError names the field and the expected type of a type
// error, in the terms of a config file.
func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: expected %s, got %s", strings.ToLower(te.Field), te.Type, te.Value)
	}
	return err
}

// applyConfig makes the config-defined services and checks of local state
// those of defs: every definition is registered (replacing the service's
// checks), and what an earlier configuration defined and defs does not is
// removed. It stops at the first definition local state refuses.
func (l *localServices) applyConfig(defs *configDefinitions) error {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	wantServices := map[string]bool{}
	for _, d := range defs.services {
		wantServices[cmp.Or(d.ID, d.Name)] = true
	}
	wantChecks := map[string]bool{}
	for _, d := range defs.checks {
		wantChecks[cmp.Or(d.ID, d.CheckID, d.Name)] = true
	}
	for _, id := range sortedKeys(l.configChecks) {
		if !wantChecks[id] {
			if err := l.state.RemoveCheck(id); err == nil {
				l.checks.Remove(id)
			}
			delete(l.configChecks, id)
		}
	}
	for _, id := range sortedKeys(l.configServices) {
		if !wantServices[id] {
			removed, err := l.state.RemoveService(id)
			if err == nil {
				for _, c := range removed {
					l.checks.Remove(c)
				}
			}
			delete(l.configServices, id)
		}
	}
	for i, def := range defs.services {
		res, err := l.state.RegisterConfigService(def, cmp.Or(def.Token, l.tokens.ConfigFileRegistrationToken()))
		if err == nil {
			err = l.startRunnersLocked(res)
		}
		if err != nil {
			return fmt.Errorf("agent: %s: service %q: %w", defs.serviceSources[i], cmp.Or(def.ID, def.Name), err)
		}
		l.configServices[res.Service.ID] = true
	}
	for i, def := range defs.checks {
		cs, err := l.state.RegisterConfigCheck(def, cmp.Or(def.Token, l.tokens.ConfigFileRegistrationToken()))
		if err == nil && cs.Type != nil {
			err = l.checks.Add(cs.Check.CheckID, cs.Type, cs.Check.ServiceID)
		}
		if err != nil {
			return fmt.Errorf("agent: %s: check %q: %w", defs.checkSources[i], cmp.Or(def.ID, def.CheckID, def.Name), err)
		}
		l.configChecks[cs.Check.CheckID] = true
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ReloadConfig applies a re-read configuration: the services, checks and
// watches of its config files replace those of the previous one. Other
// settings keep the values the agent started with (the log level is the
// caller's: it owns the logger). An error from a definition that cannot
// be decoded leaves everything as it was. The TLS certificates and CAs are
// read again (tls.go); connections already established keep theirs.
func (a *Agent) ReloadConfig(rc *config.RuntimeConfig) error {
	if a.local == nil {
		return errors.New("agent: reload before start")
	}
	defs, err := decodeConfigDefinitions(rc)
	if err != nil {
		return err
	}
	if err := watches.Validate(rc.Watches); err != nil {
		return err
	}
	if err := a.reloadTLS(rc); err != nil {
		return err
	}
	if err := a.local.applyConfig(defs); err != nil {
		return err
	}
	return a.startWatches(rc)
}

// Reload serves PUT /v1/agent/reload through the reload function the
// agent was given.
func (a *Agent) Reload() error {
	return a.reload()
}
