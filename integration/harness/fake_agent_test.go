package harness

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// Child modes and their environment knobs.
const (
	// childFakeAgent parses trellis's agent flags and serves
	// /v1/status/leader from a file, like a server that follows whatever
	// leader the test writes there.
	childFakeAgent = "fake-agent"
	// fakeLeaderFileEnv names the file holding the leader address; a
	// missing file means "no leader".
	fakeLeaderFileEnv = "TRELLIS_FAKE_LEADER_FILE"
	// fakeIgnoreSIGINTEnv makes the child ignore SIGINT (tests Stop's
	// fallback to SIGKILL).
	fakeIgnoreSIGINTEnv = "TRELLIS_FAKE_IGNORE_SIGINT"
	// fakeCrashNodeEnv makes the agent whose -node matches exit with status
	// 3 right after start (tests crash detection).
	fakeCrashNodeEnv = "TRELLIS_FAKE_CRASH_NODE"
	// fakeTLSCertEnv, fakeTLSKeyEnv and fakeTLSCAEnv name the PEM files
	// the fake agent serves -https-port with; it demands a client
	// certificate of the CA, as verify_incoming does.
	fakeTLSCertEnv = "TRELLIS_FAKE_TLS_CERT"
	fakeTLSKeyEnv  = "TRELLIS_FAKE_TLS_KEY"
	fakeTLSCAEnv   = "TRELLIS_FAKE_TLS_CA"
	// fakeConfigPrefix starts the log line with the parsed flags.
	fakeConfigPrefix = "fake-agent config: "
	// fakeInterruptLine is logged when SIGINT arrives.
	fakeInterruptLine = "fake-agent: caught interrupt, exiting"
)

// fakeConfig is what the fake agent understood from its command line.
type fakeConfig struct {
	Command         string
	Server          bool
	Dev             bool
	BootstrapExpect int
	DataDir         string
	Node            string
	Bind            string
	Client          string
	HTTPPort        int
	HTTPSPort       int
	GRPCPort        int
	ServerPort      int
	SerfLANPort     int
	DNSPort         int
	SerfWANPort     int
	RetryJoin       []string
	LogLevel        string
	ConfigFiles     []string
	Rest            []string
}

// repeated collects a repeatable flag such as -retry-join.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func parseFakeAgent(args []string) (fakeConfig, error) {
	var c fakeConfig
	if len(args) == 0 || args[0] != "agent" {
		return c, errors.New("first argument must be agent")
	}
	c.Command = args[0]
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.BoolVar(&c.Server, "server", false, "")
	fs.BoolVar(&c.Dev, "dev", false, "")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "")
	fs.StringVar(&c.DataDir, "data-dir", "", "")
	fs.StringVar(&c.Node, "node", "", "")
	fs.StringVar(&c.Bind, "bind", "", "")
	fs.StringVar(&c.Client, "client", "", "")
	fs.IntVar(&c.HTTPPort, "http-port", 0, "")
	fs.IntVar(&c.HTTPSPort, "https-port", 0, "")
	fs.IntVar(&c.GRPCPort, "grpc-port", 0, "")
	fs.IntVar(&c.ServerPort, "server-port", 0, "")
	fs.IntVar(&c.SerfLANPort, "serf-lan-port", 0, "")
	fs.IntVar(&c.DNSPort, "dns-port", 0, "")
	fs.IntVar(&c.SerfWANPort, "serf-wan-port", 0, "")
	fs.Var((*repeated)(&c.RetryJoin), "retry-join", "")
	fs.StringVar(&c.LogLevel, "log-level", "", "")
	fs.Var((*repeated)(&c.ConfigFiles), "config-file", "")
	if err := fs.Parse(args[1:]); err != nil {
		return c, err
	}
	c.Rest = fs.Args()
	return c, nil
}

func runChild(mode string, args []string) int {
	if mode != childFakeAgent {
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		return 2
	}
	cfg, err := parseFakeAgent(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake-agent: %v\n", err)
		return 2
	}
	if os.Getenv(fakeIgnoreSIGINTEnv) != "" {
		signal.Ignore(os.Interrupt)
	} else {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		go func() {
			<-sig
			fmt.Println(fakeInterruptLine)
			os.Exit(0)
		}()
	}

	// Printed after the signal disposition is set, so a test that waits for
	// this line can send SIGINT safely.
	b, _ := json.Marshal(cfg)
	fmt.Printf("%s%s\n", fakeConfigPrefix, b)
	if cfg.Node != "" && os.Getenv(fakeCrashNodeEnv) == cfg.Node {
		fmt.Println("fake-agent: crashing as asked")
		return 3
	}

	ln, err := fakeListener(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake-agent: %v\n", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status/leader", func(w http.ResponseWriter, _ *http.Request) {
		leader := ""
		if b, err := os.ReadFile(os.Getenv(fakeLeaderFileEnv)); err == nil {
			leader = strings.TrimSpace(string(b))
		}
		_ = json.NewEncoder(w).Encode(leader)
	})
	mux.HandleFunc("GET /v1/status/peers", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode([]string{net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.ServerPort))})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	err = srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "fake-agent: %v\n", err)
	return 1
}

// fakeListener listens on -http-port, or with TLS on -https-port when
// -http-port is -1, as the real agent does.
func fakeListener(cfg fakeConfig) (net.Listener, error) {
	if cfg.HTTPPort != -1 {
		return net.Listen("tcp", net.JoinHostPort(cfg.Client, strconv.Itoa(cfg.HTTPPort)))
	}
	cert, err := tls.LoadX509KeyPair(os.Getenv(fakeTLSCertEnv), os.Getenv(fakeTLSKeyEnv))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(os.Getenv(fakeTLSCAEnv))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return tls.Listen("tcp", net.JoinHostPort(cfg.Client, strconv.Itoa(cfg.HTTPSPort)), &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
}
