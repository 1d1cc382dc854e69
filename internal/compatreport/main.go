// Command compatreport summarises a `go test -json` run of another
// module's test suite (make compat runs consul/api's against trellis): it
// prints how many top-level tests passed, failed and were skipped, per
// package and in all, and writes the failing tests with their first
// failure line to a file, one a line, so that two runs can be diffed.
//
// Usage: compatreport -in results.json|dir -failures failures.txt
//
// With a directory, every *.json file in it is one test binary's run.
//
// A test that started but never ended (its package hit -timeout, or the
// binary crashed) counts as failed, with the reason the package's output
// gives ("panic: test timed out ..."), so a hang shows up in the list
// instead of vanishing from the counts.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json output (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// test is what the report keeps of one top-level test.
type test struct {
	pkg, name string
	// result is "pass", "fail", "skip", or "" while the test has not ended.
	result string
	// unfinished says why a test that never ended did not.
	unfinished string
	// output is the test's output and its subtests', in order.
	output []string
}

// pkgRun is what the report keeps of one package.
type pkgRun struct {
	result string
	// output is the package-level output (no test named): build errors,
	// a timeout's panic.
	output []string
}

func main() {
	in := flag.String("in", "", "go test -json output to read, or a directory of them, one a run (default standard input)")
	failures := flag.String("failures", "", "file to write the failing tests to (default: none)")
	flag.Parse()
	if err := run(*in, *failures, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compatreport:", err)
		os.Exit(2)
	}
}

func run(in, failuresPath string, out io.Writer) error {
	var inputs []io.Reader
	switch info, err := os.Stat(in); {
	case in == "":
		inputs = append(inputs, os.Stdin)
	case err != nil:
		return err
	case info.IsDir():
		// One file a test binary run: a run's package output (a timeout's
		// panic) belongs to the tests of that run only.
		paths, err := filepath.Glob(filepath.Join(in, "*.json"))
		if err != nil {
			return err
		}
		sort.Strings(paths)
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			inputs = append(inputs, f)
		}
	default:
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		inputs = append(inputs, f)
	}
	var all results
	for _, r := range inputs {
		if err := all.parse(r); err != nil {
			return err
		}
	}
	lines := report(all, out)
	if failuresPath == "" {
		return nil
	}
	return os.WriteFile(failuresPath, []byte(strings.Join(lines, "")), 0o600)
}

// results is what the report keeps of every run read.
type results struct {
	tests map[string]*test
	// order is the tests' keys in the order they started.
	order []string
	// pkgs are the packages' results, merged over runs (a failure wins).
	pkgs map[string]*pkgRun
}

// parse reads one run's test2json events; lines that are not JSON (go
// test's own messages) are skipped. A test of this run that never ended
// is given this run's package output as its own.
func (a *results) parse(r io.Reader) error {
	if a.tests == nil {
		a.tests, a.pkgs = map[string]*test{}, map[string]*pkgRun{}
	}
	local := map[string]*pkgRun{}
	var started []*test
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			continue
		}
		if ev.Test == "" {
			p := local[ev.Package]
			if p == nil {
				p = &pkgRun{}
				local[ev.Package] = p
			}
			switch ev.Action {
			case "output":
				p.output = append(p.output, ev.Output)
			case "pass", "fail", "skip":
				p.result = ev.Action
			}
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		key := ev.Package + " " + top
		t := a.tests[key]
		if t == nil {
			t = &test{pkg: ev.Package, name: top}
			a.tests[key] = t
			a.order = append(a.order, key)
			started = append(started, t)
		}
		switch ev.Action {
		case "output":
			t.output = append(t.output, ev.Output)
		case "pass", "fail", "skip":
			if !sub {
				t.result = ev.Action
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, t := range started {
		if t.result == "" {
			// A test's panic is in its own output, a timeout's in the run's.
			reason := firstOf(t.output, panicLine, "")
			if reason == "" {
				reason = firstOf(local[t.pkg].outputOrNil(), panicLine, "its test binary ended before it did")
			}
			t.unfinished = "did not finish: " + reason
		}
	}
	for name, p := range local {
		merged := a.pkgs[name]
		if merged == nil {
			merged = &pkgRun{}
			a.pkgs[name] = merged
		}
		if merged.result != "fail" {
			merged.result = p.result
		}
		merged.output = append(merged.output, p.output...)
	}
	return nil
}

func (p *pkgRun) outputOrNil() []string {
	if p == nil {
		return nil
	}
	return p.output
}

// report prints the counts and returns the failure lines, sorted.
func report(a results, out io.Writer) []string {
	tests, pkgs, order := a.tests, a.pkgs, a.order
	type counts struct{ pass, fail, skip int }
	per := map[string]*counts{}
	var total counts
	var failed []string
	for _, key := range order {
		t := tests[key]
		c := per[t.pkg]
		if c == nil {
			c = &counts{}
			per[t.pkg] = c
		}
		switch t.result {
		case "pass":
			c.pass++
			total.pass++
		case "skip":
			c.skip++
			total.skip++
		default:
			c.fail++
			total.fail++
			reason := firstFailure(t.output)
			if t.result == "" {
				reason = t.unfinished
			}
			failed = append(failed, fmt.Sprintf("%s %s: %s\n", t.pkg, t.name, reason))
		}
	}
	// A package that failed without running a test (a build error) would
	// otherwise not show at all.
	var names []string
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if pkgs[name].result == "fail" && per[name] == nil && name != "" {
			failed = append(failed, fmt.Sprintf("%s (package): %s\n", name, firstOf(pkgs[name].output, anyLine, "failed")))
			per[name] = &counts{fail: 1}
			total.fail++
		}
	}
	for _, name := range names {
		if c := per[name]; c != nil {
			fmt.Fprintf(out, "%-45s passed %4d  failed %4d  skipped %4d\n", name, c.pass, c.fail, c.skip)
		}
	}
	fmt.Fprintf(out, "compat: %d passed, %d failed, %d skipped of %d top-level tests\n",
		total.pass, total.fail, total.skip, total.pass+total.fail+total.skip)
	sort.Strings(failed)
	return failed
}

var (
	// fileLine is a t.Error/t.Fatal line: "    kv_test.go:52: message".
	// sdk/testutil's retry nests them: "retry.go:219: retry.go:39: ...".
	fileLine = regexp.MustCompile(`^\s*([A-Za-z0-9_]+\.go:\d+: ?)+`)
	testFile = regexp.MustCompile(`^\s*([A-Za-z0-9_]+\.go:\d+: ?)*[A-Za-z0-9_]+_test\.go:\d+: ?`)
	// sdkNoise are sdk/testutil's lines about the agent it starts, logged
	// before the reason it could not: the config it wrote, its command.
	sdkNoise = regexp.MustCompile(`CONFIG JSON:|test cmd args:|server stop failed with:`)
	// agentError is the line an agent that refused to start prints.
	agentError = regexp.MustCompile(`^==> `)

	errorLine    = regexp.MustCompile(`^\s*Error:\s*(.*)$`)
	testifyField = regexp.MustCompile(`^\s*(Test|Diff|Messages):`)
	panicLine    = regexp.MustCompile(`^panic: `)
	anyLine      = regexp.MustCompile(`\S`)
)

// firstFailure picks the line that says why a test failed: the first
// message logged from a _test.go file, else from any file, else the first
// line that is not go test's own bookkeeping. testify puts its message on
// the following "Error:" line and leaves the file:line one empty.
func firstFailure(output []string) string {
	reason := firstLogged(output)
	// The agent's own words when it refused to start (its stderr follows
	// sdk/testutil's "Failed to start server").
	for i, line := range output {
		if agentError.MatchString(line) && i+1 < len(output) {
			reason += " | consul: " + strings.TrimSpace(output[i+1])
			break
		}
	}
	return clip(reason)
}

func firstLogged(output []string) string {
	for _, re := range []*regexp.Regexp{testFile, fileLine} {
		for i, line := range output {
			if !re.MatchString(line) || sdkNoise.MatchString(line) {
				continue
			}
			msg := strings.TrimSpace(line)
			if strings.TrimSpace(re.ReplaceAllString(line, "")) == "" {
				msg += testifyMessage(output[i+1:])
			}
			return msg
		}
	}
	for _, line := range output {
		s := strings.TrimSpace(line)
		if s != "" && !strings.HasPrefix(s, "=== ") && !strings.HasPrefix(s, "--- ") {
			return s
		}
	}
	return "failed with no output"
}

// testifyMessage is testify's "Error:" field with the two lines after it
// (expected and actual, for an inequality), stopping at its next field.
func testifyMessage(output []string) string {
	var msg string
	for i, line := range output[:min(len(output), 8)] {
		m := errorLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		msg = " " + strings.TrimSpace(m[1])
		for _, more := range output[i+1 : min(len(output), i+3)] {
			if testifyField.MatchString(more) {
				break
			}
			msg += " " + strings.TrimSpace(more)
		}
		break
	}
	return msg
}

func firstOf(output []string, re *regexp.Regexp, fallback string) string {
	for _, line := range output {
		if re.MatchString(line) {
			return clip(strings.TrimSpace(line))
		}
	}
	return fallback
}

// clip keeps a reason to one readable line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
