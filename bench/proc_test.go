package bench

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseProc(t *testing.T) {
	const status = "Name:\ttrellis\nVmPeak:\t  900 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n"
	// Fields 14 and 15 (utime 250, stime 50 ticks) follow a name with a
	// space and a parenthesis.
	const stat = "4242 (trel lis) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 1000 12800"
	tests := []struct {
		name         string
		status, stat string
		want         ProcSample
		wantErr      bool
	}{
		{"RSS and CPU", status, stat, ProcSample{RSS: 51200 * 1024, CPU: 3 * time.Second}, false},
		{"no VmRSS", "Name:\tx\n", stat, ProcSample{}, true},
		{"malformed VmRSS", "VmRSS:\tmany kB\n", stat, ProcSample{}, true},
		{"stat without a name", status, "4242 S 1", ProcSample{}, true},
		{"stat cut short", status, "4242 (x) S 1 2 3", ProcSample{}, true},
		{"non-numeric CPU", status, "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 a 50", ProcSample{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProc([]byte(tt.status), []byte(tt.stat))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseProc = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 {
		t.Errorf("own RSS %d, want > 0", s.RSS)
	}
	if s, err := ReadProc(0); err != nil || s != (ProcSample{}) {
		t.Errorf("ReadProc(0) = %+v, %v; want a zero sample", s, err)
	}
	if _, err := ReadProc(1 << 30); err == nil || errors.Is(err, ErrInvalidParams) {
		t.Errorf("ReadProc of no process: %v, want a read error", err)
	}
}

func TestParseTargets(t *testing.T) {
	tests := []struct {
		name                    string
		http, grpc, pids, names string
		want                    []Target
		wantErr                 bool
	}{
		{"one", "127.0.0.1:8500", "127.0.0.1:8502", "42", "", []Target{{HTTPAddr: "127.0.0.1:8500", GRPCAddr: "127.0.0.1:8502", PID: 42}}, false},
		{"two with names", "http://a:1,b:2", "a:3,b:4", "5,6", "trellis,consul",
			[]Target{{Name: "trellis", HTTPAddr: "a:1", GRPCAddr: "a:3", PID: 5}, {Name: "consul", HTTPAddr: "b:2", GRPCAddr: "b:4", PID: 6}}, false},
		{"no pid", "a:1", "", "", "", []Target{{HTTPAddr: "a:1"}}, false},
		{"no http", "", "a:3", "", "", nil, true},
		{"lists of different lengths", "a:1,b:2", "a:3", "", "", nil, true},
		{"bad pid", "a:1", "", "x", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTargets(tt.http, tt.grpc, tt.pids, tt.names, "")
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidParams) {
				t.Errorf("error %v is not ErrInvalidParams", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("target %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
