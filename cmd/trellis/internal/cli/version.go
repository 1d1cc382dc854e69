package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/trellis-mesh/trellis/version"
)

// Consul's RPC protocol numbers, reported as Consul reports them.
const (
	rpcProtocolDefault = 2
	rpcProtocolMin     = 2
	rpcProtocolMax     = 3
)

type rpcVersionInfo struct {
	Default int
	Min     int
	Max     int
}

// versionInfo is `version -format=json`: Consul's fields first (with the
// emulated Consul version in Version, which sdk/testutil parses to pick the
// config it writes), then Trellis's own.
type versionInfo struct {
	Version        string
	Revision       string
	Prerelease     string
	FullVersion    string
	BuildDate      time.Time
	RPC            rpcVersionInfo
	TrellisVersion string
}

// newVersionInfo is the report of build v. Revision and BuildDate are
// the VCS stamp `go build` records (empty and the zero time without one).
func newVersionInfo(v version.Info) versionInfo {
	return versionInfo{
		Version:        v.ConsulVersion,
		Revision:       v.Revision,
		Prerelease:     v.Prerelease,
		FullVersion:    v.Human(),
		BuildDate:      v.BuildDate,
		RPC:            rpcVersionInfo{Default: rpcProtocolDefault, Min: rpcProtocolMin, Max: rpcProtocolMax},
		TrellisVersion: v.Version,
	}
}

const versionHelp = `
Usage: trellis version [options]

  Prints the Trellis version and the Consul version it is compatible with.`

func runVersion(args []string, env *Env) int {
	var format string
	fs := newFlagSet("version", versionHelp, env.Stderr)
	fs.StringVar(&format, "format", "pretty", "Output format {pretty|json}")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	info := newVersionInfo(version.Get())
	switch format {
	case "pretty":
		// First line as Consul's, for scripts that parse "Consul v(\S+)".
		fmt.Fprintf(env.Stdout, "Consul v%s\n", info.Version)
		fmt.Fprintf(env.Stdout, "%s\n", info.FullVersion)
		if info.Revision != "" {
			fmt.Fprintf(env.Stdout, "Revision %s\n", info.Revision)
		}
		if !info.BuildDate.IsZero() {
			fmt.Fprintf(env.Stdout, "Build Date %s\n", info.BuildDate.Format(time.RFC3339))
		}
		fmt.Fprintf(env.Stdout, "Protocol %d spoken by default, understands %d to %d (agent will automatically use protocol >%d when speaking to compatible agents)\n",
			info.RPC.Default, info.RPC.Min, info.RPC.Max, info.RPC.Default)
	case "json":
		b, err := json.MarshalIndent(info, "", "   ")
		if err != nil {
			fmt.Fprintf(env.Stderr, "Failed to marshal version info: %v\n", err)
			return 1
		}
		fmt.Fprintln(env.Stdout, string(b))
	default:
		fmt.Fprintf(env.Stderr, "Unknown format: %s\n", format)
		return 1
	}
	return 0
}
