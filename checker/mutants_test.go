package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A mutant is the checker broken in one way that matters. Each edit is an
// exact replacement in one file, so that a change to the code it mutates
// makes the mutant fail to apply rather than quietly test nothing. The
// replacement is the mutated code behind mutated(), which is true only
// while this mutant is the one on: every mutant is in the one build of the
// checker's tests, and each run of that build turns one on (a mutant
// schema), so the checker is built once, not once a mutant.
type mutant struct {
	name  string
	file  string
	edits [][2]string // old, new (with mutated() where it differs)
	// tests are the properties that must catch it (a -run pattern): of
	// the counter walk's two, the one that catches it sooner.
	tests string
}

// The properties the mutants must fail: the counter walk's against the
// brute-force reference on simulated runs, and against porcupine (and the
// reference) on drawn calls; the anomaly checks' sweep against the
// reference; the record's checks against the simulation; the list-append
// check's tables and generated histories.
const (
	modelProperty   = "^TestModelReference$"
	walkProperty    = "^TestCounterWalkAgreesWithPorcupine$"
	anomalyProperty = "^TestAnomaliesAgreeWithReference$"
	recordProperty  = "^TestRecordChecksAgreeWithSimulation$"
	listProperty    = "^TestListAppend(Cases|Generated)?$"
)

var mutants = []mutant{
	{
		name:  "an element twice in the final lists is no anomaly",
		file:  "listjudge.go",
		tests: listProperty,
		edits: [][2]string{{
			"		if n := ix.count[e]; n > 1 && p == (listPlace{k, int64(j)}) {",
			"		if n := ix.count[e]; n > 1 && p == (listPlace{k, int64(j)}) && !mutated() {"}},
	},
	{
		name:  "a read is held to the final list only",
		file:  "listjudge.go",
		tests: listProperty,
		edits: [][2]string{{
			"		if w, ok := shown[rd.key].before(rd.invTime); ok && int64(len(rd.elems)) <= w.pos {",
			"		if w, ok := shown[rd.key].before(rd.invTime); !mutated() && ok && int64(len(rd.elems)) <= w.pos {"}},
	},
	{
		name:  "an append of unknown outcome that a read saw may still never have landed",
		file:  "listjudge.go",
		tests: listProperty,
		edits: [][2]string{{
			"		case a.typ == history.Info && seen[a.elem] < 0:",
			"		case a.typ == history.Info && (mutated() || seen[a.elem] < 0):"}},
	},
	{
		name:  "reads do not bound the write that made their value",
		file:  "counterwalk.go",
		tests: walkProperty,
		edits: [][2]string{{
			"		if rd.r < hi {\n			hi, hiBy = rd.r, rd.i",
			"		if !mutated() && rd.r < hi {\n			hi, hiBy = rd.r, rd.i"}},
	},
	{
		name:  "writes of unknown outcome never fill a gap",
		file:  "counterwalk.go",
		tests: modelProperty,
		edits: [][2]string{{
			"		default:\n			cands = maybe.at(k)\n",
			"		default:\n			cands = maybe.at(k)\n			if mutated() {\n				cands = cands[:0]\n			}\n"}},
	},
	{
		name:  "fences are not checked",
		file:  "counterwalk.go",
		tests: modelProperty,
		edits: [][2]string{{
			"	if p.fence > 0 && p.fence <= s.fence {",
			"	if !mutated() && p.fence > 0 && p.fence <= s.fence {"}},
	},
	{
		name:  "of the writes that may fill a gap, only the earliest is kept",
		file:  "counterwalk.go",
		tests: walkProperty,
		edits: [][2]string{{
			"		if n := len(dst); n == 0 || s.fence < dst[n-1].fence {",
			"		if n := len(dst); n == 0 || !mutated() && s.fence < dst[n-1].fence {"}},
	},
	{
		// The defect of issue 9: a section's read and write are one
		// increment from the read's invocation, and the read's value is
		// thrown away.
		name:  "the model before: a section is one increment, its read no evidence",
		file:  "stream.go",
		tests: modelProperty,
		edits: [][2]string{
			{
				"		i := s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime, ret: c.doneTime, value: v, process: c.process})\n",
				"		if mutated() && !c.final {\n			s.sectionRead.Set(c.process, v)\n			s.readCall.Set(c.process, c.invTime)\n			return\n		}\n" +
					"		i := s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime, ret: c.doneTime, value: v, process: c.process})\n",
			},
			{
				"		if !read {\n			from = v - 1\n		}\n		s.calls.add(lcCall{inv: c.inv, done: c.done, call: c.invTime,",
				"		call := c.invTime\n		if mutated() {\n			from = v - 1\n			if read {\n				call, _ = s.readCall.Get(c.process)\n			}\n" +
					"		} else if !read {\n			from = v - 1\n		}\n		s.calls.add(lcCall{inv: c.inv, done: c.done, call: call,",
			},
			{
				"	unfinished  int                       // writes that never completed",
				"	unfinished  int\n	readCall    history.ProcessMap[int64]",
			},
		},
	},
	{
		name:  "a read proves a write of unknown outcome even beside an acknowledged one",
		file:  "counterwalk.go",
		tests: modelProperty,
		edits: [][2]string{{
			"func(k walkItem) bool { return k.c <= earliest.r && k.r != w.end }",
			"func(k walkItem) bool { return k.c <= earliest.r && k.r != w.end && !mutated() }"}},
	},
	{
		name:  "an acknowledged write resolved after the fact returns at its :time",
		file:  "counterwalk.go",
		tests: walkProperty,
		edits: [][2]string{{
			"	if c.write && (c.maybe || c.late) {",
			"	if c.write && (c.maybe || c.late && !mutated()) {"}},
	},
	{
		name:  "a frozen waiter is counted as refused",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{
			"	live := lp.waiting && lp.frozen == 0",
			"	live := lp.waiting && (mutated() || lp.frozen == 0)"}},
	},
	{
		name:  "a fault of no process freezes no one",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{
			"	open := t.holders == 0 && !t.maybe && t.waiters > 0 && t.global == 0",
			"	open := t.holders == 0 && !t.maybe && t.waiters > 0 && (mutated() || t.global == 0)"}},
	},
	{
		name:  "an acquire of unknown outcome could hold nothing",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{
			"		t.maybe, t.dirty = true, true // it may have been granted; a later grant ends that",
			"		t.maybe, t.dirty = t.maybe || !mutated(), true"}},
	},
	{
		name:  "a gap after a killed holder is held to one lease",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{
			"		return 2 * g.lease",
			"		if mutated() {\n			return g.lease\n		}\n		return 2 * g.lease"}},
	},
	{
		name:  "a fence is held to the grants of its own instant",
		file:  "locks.go",
		tests: anomalyProperty,
		edits: [][2]string{{
			"		lp.waiting, lp.before = true, t.settled",
			"		lp.waiting, lp.before = true, t.settled\n		if mutated() {\n			lp.before = maxFence(t.settled, t.atNow)\n		}"}},
	},
	{
		name:  "an acquire is answered by the first grant of its interval",
		file:  "recordmatch.go",
		tests: recordProperty,
		edits: [][2]string{{
			"			last[ws[k].call] = i",
			"			if _, ok := last[ws[k].call]; !ok || !mutated() {\n				last[ws[k].call] = i\n			}"}},
	},
	{
		name:  "a stop near the grant is taken for one around it",
		file:  "recordmatch.go",
		tests: "^TestPausedGrantee$",
		edits: [][2]string{{
			"		if (f.f != history.FPause || f.stops) && f.process == int64(p) && v.before(f.start, t) && v.before(t, f.end) {",
			"		if (f.f != history.FPause || f.stops) && f.process == int64(p) && (mutated() || v.before(f.start, t) && v.before(t, f.end)) {"}},
	},
	{
		name:  "a sleep is taken for a stop of the grantee",
		file:  "locks.go",
		tests: "^TestPausedGrantee$",
		edits: [][2]string{{
			"		stops := e.F == history.FPause && e.Kind != history.PauseSleep",
			"		stops := e.F == history.FPause && (mutated() || e.Kind != history.PauseSleep)"}},
	},
	{
		name:  "a grant after its worker's acquire is excused by a stop",
		file:  "recordcheck.go",
		tests: "^TestPausedGrantee$",
		edits: [][2]string{{
			"			case s.after >= 0 && s.why != whyNoCall:",
			"			case s.after >= 0 && (mutated() || s.why != whyNoCall):"}},
	},
	{
		name:  "an orphan is never the lease doing its job",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"			o.reported = o.fault != nil && o.lease > 0 && o.end-o.start <= o.lease+o.grain",
			"			o.reported = !mutated() && o.fault != nil && o.lease > 0 && o.end-o.start <= o.lease+o.grain"}},
	},
	{
		name:  "a grant the run's end gave up is undone by any delete",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"	if s.why != whyGaveUp || s.endHow != endDelete || s.endEv < 0 || v.evs[s.endEv].client != s.client {",
			"	if s.why != whyGaveUp || s.endHow != endDelete && !mutated() || s.endEv < 0 || v.evs[s.endEv].client != s.client && !mutated() {"}},
	},
	{
		name:  "an orphan the run's end undid may be of any length",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"			o.reported = o.reported || v.undoneAtEnd(*s, lastCall) && o.lease > 0 && o.end-o.start <= o.lease",
			"			o.reported = o.reported || v.undoneAtEnd(*s, lastCall) && (mutated() || o.lease > 0 && o.end-o.start <= o.lease)"}},
	},
	{
		name:  "an orphan needs no refused acquire",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"			if n == 0 {\n				continue\n			}",
			"			if n == 0 && !mutated() {\n				continue\n			}"}},
	},
	{
		name:  "a release of a lapsed key may answer ok",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"	case v.before(s.end, c.inv):\n",
			"	case v.before(s.end, c.inv):\n		if mutated() {\n			return nil\n		}\n"}},
	},
	{
		name:  "a grant's fence is held to the grant just before it only",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"		if i == 0 || g.fence > top.fence {",
			"		if mutated() || i == 0 || g.fence > top.fence {"}},
	},
	{
		name:  "a grant over a live holder's key is the server's right",
		file:  "recordcheck.go",
		tests: recordProperty,
		edits: [][2]string{{
			"		if prev.status != holdKnown || v.before(prev.heldTo, s.start) {",
			"		if mutated() || prev.status != holdKnown || v.before(prev.heldTo, s.start) {"}},
	},
}

// TestMutants builds the checker's tests once with every mutant in them
// (an overlay of the mutated files: the module is not copied), and
// requires, for each mutant turned on alone, the property its tests name to
// catch it within mutantChecks histories; it logs how many the property took.
// The properties stop at the first failure and do not shrink it: a mutant
// caught is all this asks. With no mutant on, the build must pass every
// property, so that a schema that changed the checker is not taken for a
// mutant caught. -short skips it: it builds the checker's tests.
func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the checker's tests with its mutants")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the mutants with")
	}
	bin := buildMutants(t, gobin)
	run := func(on int, tests string, checks int) ([]byte, error) {
		cmd := exec.CommandContext(context.Background(), bin, "-test.count=1", "-test.run", tests, "-test.failfast",
			"-rapid.checks="+strconv.Itoa(checks), "-rapid.nofailfile", "-rapid.shrinktime=1ms")
		cmd.Env = append(os.Environ(), mutantEnv+"="+strconv.Itoa(on))
		return cmd.CombinedOutput()
	}
	var all []string
	for _, m := range mutants {
		if !slices.Contains(all, m.tests) {
			all = append(all, m.tests)
		}
	}
	// A guard that mutates while off would make every mutant's run one of
	// a changed checker. The slowest mutants take a few thousand histories
	// to catch (-v logs how many), so this run draws more than that.
	if out, err := run(0, strings.Join(all, "|"), noMutantChecks); err != nil {
		t.Fatalf("with no mutant on, the mutants' build fails its properties: a schema changes the checker:\n%s", out)
	}
	failedAfter := regexp.MustCompile(`\[rapid\] (?:failed|panic) after (\d+) tests`)
	for i, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			out, err := run(i+1, m.tests, mutantChecks)
			if err == nil {
				t.Fatalf("%s passed %d histories against the mutant:\n%s", m.tests, mutantChecks, out)
			}
			if n := failedAfter.FindSubmatch(out); n != nil {
				t.Logf("caught after %s histories", n[1])
				return
			}
			// The list-append properties, and the tables a mutant names
			// alone (a pattern of one test), are tables of histories, not
			// rapid's: a test of theirs that failed caught it.
			if l := firstLine(out, "--- FAIL: TestListAppend"); l != "" {
				t.Logf("caught: %s", l)
				return
			}
			if l := firstLine(out, "--- FAIL: "+strings.Trim(m.tests, "^$")+" "); l != "" {
				t.Logf("caught: %s", l)
				return
			}
			t.Fatalf("the mutant did not run:\n%s", out)
		})
	}
}

// How many histories a property draws: at most, against a mutant; against
// the build with no mutant on.
const (
	mutantChecks   = 100000
	noMutantChecks = 10000
)

// mutantEnv holds the number of the mutant on: its place in mutants, from
// 1; 0 or none for none.
const mutantEnv = "HIATUS_MUTANT"

// buildMutants builds the checker's tests with every mutant in, behind
// mutated(n), and returns the binary. The mutated files are an overlay of
// the checker's own; mutated is defined in one more.
func buildMutants(t *testing.T, gobin string) string {
	dir := t.TempDir()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for i, m := range mutants {
		src, ok := files[m.file]
		if !ok {
			if src, err = os.ReadFile(m.file); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range m.edits {
			if bytes.Count(src, []byte(e[0])) != 1 {
				t.Fatalf("mutant %q no longer applies: %s does not hold exactly one\n%s", m.name, m.file, e[0])
			}
			on := strings.ReplaceAll(e[1], "mutated()", fmt.Sprintf("mutated(%d)", i+1))
			src = bytes.Replace(src, []byte(e[0]), []byte(on), 1)
		}
		files[m.file] = src
	}
	files["mutated_schema.go"] = []byte(`package checker

import (
	"os"
	"strconv"
)

var mutantOn, _ = strconv.Atoi(os.Getenv("` + mutantEnv + `"))

func mutated(n int) bool { return mutantOn == n }
`)
	overlay := map[string]map[string]string{"Replace": {}}
	for name, src := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		overlay["Replace"][filepath.Join(here, name)] = path
	}
	ov, err := json.Marshal(overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), ov, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "checker.test")
	cmd := exec.CommandContext(context.Background(), gobin, "test", "-c", "-o", bin, "-overlay", filepath.Join(dir, "overlay.json"), ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the mutants: %v\n%s", err, out)
	}
	return bin
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
