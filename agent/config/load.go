package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
)

// LoadOptions carries what Load needs. Only Args is required; the rest
// default to the real process environment and exist so tests can pin them.
type LoadOptions struct {
	// Args are the agent command's arguments (without "agent").
	Args []string
	// Logger receives debug notes about the files read. Warnings meant for
	// the operator are returned instead, for the caller to log once its
	// logger is configured from the result.
	Logger *slog.Logger
	// FlagOutput receives flag errors and -h usage (default io.Discard).
	FlagOutput io.Writer
	// Hostname gives the default node name (default os.Hostname).
	Hostname func() (string, error)
	// InterfaceAddrs lists the host's addresses, used to pick the
	// advertise address when binding 0.0.0.0 (default net.InterfaceAddrs).
	InterfaceAddrs func() ([]net.Addr, error)
	// ReadOnly leaves the node ID unresolved, so that nothing is written
	// to the data dir (trellis validate).
	ReadOnly bool
}

// Load builds the agent's configuration from Consul-style flags, JSON and
// HCL config files and -hcl fragments: defaults < -dev overlay < config
// files in order < flags < -hcl fragments in order (Consul's order).
//
// It returns operator warnings (keys Trellis accepts but does not
// implement, named once on a single line; deprecated keys; risky settings)
// for the caller to log. A key that is not a Consul key at all, a malformed
// file or an invalid setting is an error wrapping one of the package's
// sentinel errors. When the node ID is neither configured nor already in
// the data dir, Load generates one and writes it to <data-dir>/node-id.
func Load(opts LoadOptions) (*RuntimeConfig, []string, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.FlagOutput == nil {
		opts.FlagOutput = io.Discard
	}
	if opts.Hostname == nil {
		opts.Hostname = os.Hostname
	}
	if opts.InterfaceAddrs == nil {
		opts.InterfaceAddrs = net.InterfaceAddrs
	}

	fv, err := parseFlags(opts.Args, opts.FlagOutput)
	if err != nil {
		return nil, nil, err
	}
	files, err := loadConfigPaths(fv.configPaths, fv.configFormat, opts.Logger)
	if err != nil {
		return nil, nil, err
	}
	var fragments []fileSource
	for i, h := range fv.hcl {
		fs, err := parseSource(fmt.Sprintf("-hcl fragment %d", i+1), []byte(h), formatHCL)
		if err != nil {
			return nil, nil, err
		}
		fragments = append(fragments, fs)
	}

	var invalid, refusedErrs []error
	for _, r := range fv.refused {
		refusedErrs = append(refusedErrs, r.err("the command line"))
	}
	ignored := map[string]bool{}
	for _, name := range fv.ignored {
		ignored[name] = true
	}
	warnings := append([]string(nil), fv.deprecated...)
	merged := defaultSource()
	if fv.dev {
		merge(merged, devSource())
	}
	for _, list := range [][]fileSource{files, fragments} {
		for i := range list {
			warnings = append(warnings, foldDeprecatedACL(list[i].path, &list[i].src)...)
		}
	}
	// The flags sit between the files and the -hcl fragments.
	layers := append(append(append([]*source(nil), sourcesOf(files)...), &fv.src), sourcesOf(fragments)...)
	reports := append(append([]fileSource(nil), files...), fragments...)
	for i := range reports {
		f := &reports[i]
		opts.Logger.Debug("read config source", "source", f.path)
		for _, k := range f.keys.invalid {
			invalid = append(invalid, fmt.Errorf("%w %s in %s", ErrInvalidConfigKey, k, f.path))
		}
		for _, r := range f.keys.refused {
			refusedErrs = append(refusedErrs, r.err(f.path))
		}
		for _, k := range f.keys.ignored {
			ignored[k] = true
		}
		if len(f.src.StartJoin) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: the start_join key is deprecated: use retry_join instead", f.path))
		}
	}
	if len(invalid) > 0 {
		return nil, nil, errors.Join(invalid...)
	}
	if len(refusedErrs) > 0 {
		return nil, nil, errors.Join(refusedErrs...)
	}
	for _, l := range layers {
		merge(merged, l)
	}

	if len(ignored) > 0 {
		names := make([]string, 0, len(ignored))
		for k := range ignored {
			names = append(names, k)
		}
		sort.Strings(names)
		// One line, so that an operator sees at a glance everything that
		// has no effect (brief and issue: named once, never silently).
		warnings = append(warnings, "these Consul settings are accepted but not implemented by Trellis and have no effect: "+strings.Join(names, ", "))
	}

	rc, buildWarnings, err := build(merged, fv.dev, opts)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, buildWarnings...)
	for _, f := range files {
		rc.ConfigFiles = append(rc.ConfigFiles, f.path)
	}

	if opts.ReadOnly {
		return rc, warnings, nil
	}
	rc.NodeID, err = resolveNodeID(rc.NodeID, rc.DataDir)
	if err != nil {
		return nil, nil, err
	}
	return rc, warnings, nil
}

// sourcesOf returns the layers of parsed files, in order.
func sourcesOf(files []fileSource) []*source {
	out := make([]*source, len(files))
	for i := range files {
		out[i] = &files[i].src
	}
	return out
}

// err is the start-up error for r, found in where (a file's path).
func (r refusal) err(where string) error {
	return fmt.Errorf("%w: %s (in %s) asks for %s, which Trellis does not provide yet; "+
		"refusing to start rather than run unprotected (remove the setting to run without it)",
		ErrProtectionNotProvided, r.path, where, r.feature)
}
