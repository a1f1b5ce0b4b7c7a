package checker

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A mutant is the checker broken in one way that matters: each edit is an
// exact replacement in one file, so that a change to the code it mutates
// makes the mutant fail to apply rather than quietly test nothing.
type mutant struct {
	name  string
	file  string
	edits [][2]string // old, new
	// tests are the properties that must catch it (a -run pattern); ""
	// for the counter walk's: TestModelReference, then
	// TestCounterWalkAgreesWithPorcupine.
	tests string
}

// The properties of the anomaly checks: the sweep's against the
// reference, the record's against the simulation.
const (
	anomalyProperty = "^TestAnomaliesAgreeWithReference$"
	recordProperty  = "^TestRecordChecksAgreeWithSimulation$"
	listProperty    = "^TestListAppend(Cases|Generated)?$"
)

var mutants = []mutant{
	{
		name:  "an element twice in the final lists is no anomaly",
		file:  "listjudge.go",
		tests: listProperty,
		edits: [][2]string{{"		if n := ix.count[e]; n > 1 && p == (listPlace{k, int64(j)}) {", "		if n := ix.count[e]; n > 1 && p == (listPlace{k, int64(j)}) && p.key == k && false {"}},
	},
	{
		name:  "a read is held to the final list only",
		file:  "listjudge.go",
		tests: listProperty,
		edits: [][2]string{{"		if w, ok := shown[rd.key].before(rd.invTime); ok && int64(len(rd.elems)) <= w.pos {", "		if w, ok := shown[rd.key].before(rd.invTime); false && ok && int64(len(rd.elems)) <= w.pos {"}},
	},
	{
		name:  "an append of unknown outcome that a read saw may still never have landed",
		file:  "listjudge.go",
		tests: listProperty,
		edits: [][2]string{{"		case a.typ == history.Info && seen[a.elem] < 0:", "		case a.typ == history.Info:"}},
	},
	{
		name: "reads do not bound the write that made their value",
		file: "counterwalk.go",
		edits: [][2]string{{
			"		if rd.r < hi {\n			hi, hiBy = rd.r, rd.i",
			"		if false && rd.r < hi {\n			hi, hiBy = rd.r, rd.i"}},
	},
	{
		name: "writes of unknown outcome never fill a gap",
		file: "counterwalk.go",
		edits: [][2]string{{
			"		default:\n			cands = maybe.at(k)",
			"		default:\n			cands = maybe.at(k)[:0]"}},
	},
	{
		name: "fences are not checked",
		file: "counterwalk.go",
		edits: [][2]string{{
			"	if p.fence > 0 && p.fence <= s.fence {",
			"	if false && p.fence > 0 && p.fence <= s.fence {"}},
	},
	{
		name: "of the writes that may fill a gap, only the earliest is kept",
		file: "counterwalk.go",
		edits: [][2]string{{
			"		if n := len(dst); n == 0 || s.fence < dst[n-1].fence {",
			"		if n := len(dst); n == 0 {"}},
	},
	{
		// The defect of issue 9: a section's read and write are one
		// increment from the read's invocation, and the read's value is
		// thrown away.
		name: "the model before: a section is one increment, its read no evidence",
		file: "stream.go",
		edits: [][2]string{
			{
				"		i := s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime, ret: c.doneTime, value: v, process: c.process})\n		if c.final {\n			s.finalRead = i\n		} else {\n			s.sectionRead.Set(c.process, v)\n		}",
				"		if c.final {\n			s.finalRead = s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime, ret: c.doneTime, value: v, process: c.process})\n		} else {\n			s.sectionRead.Set(c.process, v)\n			s.readCall.Set(c.process, c.invTime)\n		}",
			},
			{
				"		if !read {\n			from = v - 1\n		}\n		s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime,",
				"		from = v - 1\n		call := c.invTime\n		if read {\n			call, _ = s.readCall.Get(c.process)\n		}\n		s.calls.add(lcCall{inv: c.inv, done: c.done, call: call,",
			},
			{
				"	unfinished  int                       // writes that never completed",
				"	unfinished  int\n	readCall    history.ProcessMap[int64]",
			},
		},
	},
	{
		name: "a read proves a write of unknown outcome even beside an acknowledged one",
		file: "counterwalk.go",
		edits: [][2]string{{
			"func(k walkItem) bool { return k.c <= earliest.r && k.r != w.end }",
			"func(k walkItem) bool { return k.c <= earliest.r && k.r != w.end && false }"}},
	},
	{
		name: "an acknowledged write resolved after the fact returns at its :time",
		file: "counterwalk.go",
		edits: [][2]string{{
			"	if c.write && (c.maybe || c.late) {",
			"	if c.write && c.maybe {"}},
	},
	{
		name:  "a frozen waiter is counted as refused",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{"	live := lp.waiting && lp.frozen == 0", "	live := lp.waiting"}},
	},
	{
		name:  "a fault of no process freezes no one",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{"	open := t.holders == 0 && !t.maybe && t.waiters > 0 && t.global == 0", "	open := t.holders == 0 && !t.maybe && t.waiters > 0"}},
	},
	{
		name:  "an acquire of unknown outcome could hold nothing",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{"		t.maybe, t.dirty = true, true // it may have been granted; a later grant ends that", "		t.dirty = true"}},
	},
	{
		name:  "a gap after a killed holder is held to one lease",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{"		return 2 * g.lease", "		return g.lease"}},
	},
	{
		name:  "a fence is held to the grants of its own instant",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{"		lp.waiting, lp.before = true, t.settled", "		lp.waiting, lp.before = true, maxFence(t.settled, t.atNow)"}},
	},
	{
		name:  "an acquire is answered by the first grant of its interval",
		file:  "recordmatch.go",
		tests: recordProperty,
		edits: [][2]string{{"			last[ws[k].call] = i", "			if _, ok := last[ws[k].call]; !ok {\n				last[ws[k].call] = i\n			}"}},
	},
	{
		name:  "an orphan is never the lease doing its job",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{"			o.reported = o.fault != nil && o.lease > 0 && o.end-o.start <= o.lease", "			o.reported = false"}},
	},
	{
		name:  "an orphan needs no refused acquire",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{"			if n == 0 {\n				continue\n			}", "			if n < 0 {\n				continue\n			}"}},
	},
	{
		name:  "a release of a lapsed key may answer ok",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{"	case v.before(s.end, c.inv):\n", "	case v.before(s.end, c.inv):\n		return nil\n"}},
	},
	{
		name:  "a grant's fence is held to the grant just before it only",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{"		if i == 0 || g.fence > top.fence {", "		if true {"}},
	},
	{
		name:  "a grant over a live holder's key is the server's right",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{"		if prev.status != holdKnown || v.before(prev.heldTo, s.start) {", "		if true {"}},
	},
}

// TestMutants breaks the checker in each way of mutants, in a copy of the
// module, and requires the properties checked against the brute-force
// reference (TestModelReference, then TestCounterWalkAgreesWithPorcupine) to
// catch every one; it logs how many histories the first to fail took, and
// stops there (-failfast: a mutant caught by the first property need not
// wait for the second's 100000 histories). Each mutant is a build of its
// own: -short skips them.
func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the checker once a mutant")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the mutants with")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	failedAfter := regexp.MustCompile(`\[rapid\] failed after (\d+) tests`)
	// One copy of the module for every mutant, each file put back after
	// its mutant ran: the go command caches what it built by the
	// packages' directory, so only the mutated package is built again.
	// A fresh copy each took 217 s here, one copy 193 s (go test ./checker
	// -run TestMutants -v, one run each, 7 December); most of the rest is
	// the checker's test binary, built for each mutant, and one mutant
	// that the properties catch only after thousands of histories.
	dir := t.TempDir()
	copyModule(t, root, dir)
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			path := filepath.Join(dir, "checker", m.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			orig := bytes.Clone(src)
			defer func() {
				if err := os.WriteFile(path, orig, 0o644); err != nil {
					t.Fatalf("put %s back: %v", m.file, err)
				}
			}()
			for _, e := range m.edits {
				if bytes.Count(src, []byte(e[0])) != 1 {
					t.Fatalf("the mutant no longer applies: %s does not hold exactly one\n%s", m.file, e[0])
				}
				src = bytes.Replace(src, []byte(e[0]), []byte(e[1]), 1)
			}
			if err := os.WriteFile(path, src, 0o644); err != nil {
				t.Fatal(err)
			}
			tests := m.tests
			if tests == "" {
				tests = "^(TestModelReference|TestCounterWalkAgreesWithPorcupine)$"
			}
			cmd := exec.CommandContext(context.Background(), gobin, "test", "./checker", "-count=1", "-run", tests,
				"-rapid.checks=100000", "-rapid.nofailfile", "-failfast")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the reference properties passed 100000 histories each against the mutant:\n%s", out)
			}
			if n := failedAfter.FindSubmatch(out); n != nil {
				t.Logf("caught after %s histories", n[1])
				return
			}
			// The list-append properties are tables of histories, not
			// rapid's: a test of theirs that failed caught it.
			if m.tests == listProperty && bytes.Contains(out, []byte("--- FAIL: TestListAppend")) {
				t.Logf("caught: %s", firstLine(out, "--- FAIL: TestListAppend"))
				return
			}
			t.Fatalf("the mutant did not build or run:\n%s", out)
		})
	}
}

// firstLine returns the first line of out that holds sub.
func firstLine(out []byte, sub string) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// copyModule copies the module's Go files and go.mod/go.sum from root to
// dir, leaving out what is not code (run stores, built binaries, .git)
// but the list-append histories of checker/testdata.
func copyModule(t *testing.T, root, dir string) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		// The list-append properties read their histories from testdata;
		// no other testdata is read by a property.
		lists := rel == "checker/testdata" || strings.HasPrefix(rel, "checker/testdata/listappend")
		if d.IsDir() {
			if rel != "." && !lists && (strings.HasPrefix(d.Name(), ".") || d.Name() == "store" || d.Name() == "bin" ||
				d.Name() == "testdata" || strings.HasPrefix(rel, "checker/testdata/")) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !strings.HasSuffix(path, ".go") && d.Name() != "go.mod" && d.Name() != "go.sum" && !(lists && strings.HasSuffix(path, ".edn")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the module: %v", err)
	}
}
