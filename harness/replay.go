package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	osuser "os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// MaxRunFile is the most of a run directory's test.edn, schedule.edn or
// results.edn that a replay reads, and of a --schedule file. hiatus writes
// them in kilobytes (test.edn about 1 KB, results.edn 2, schedule.edn 80
// bytes a fault: 1 MiB holds some 13,000 faults, hours of them), and a
// directory from a bug report may hold anything under those names. The
// EDN reader recurses once a level of nesting: 4 MiB of "[" overflows its
// stack, which ends the program (2 MiB does not), so the limit is kept
// well below that.
const MaxRunFile = 1 << 20

// ReplayConfig reads a run directory back into the Config that made it
// (test.edn) with the faults its nemesis injected as Plan (schedule.edn):
// a replay of the run, into the same store, under the name NAME-replay.
// Server URLs are not taken (test.edn hides their passwords): a replay
// starts throwaway servers unless the caller sets them. Each file is
// checked as a stranger's: a value of the wrong type or out of range, a
// key of a fault that is none, a fault of an unknown kind is refused with
// the file, the fault and the key.
// CheckReplay checks the two against each other and the whole as
// Validate does. The directory may come from anyone: test.edn may name a
// command to run (an exec: lock) or machines to reach (--hosts ssh:FILE),
// which the caller must not use unless its user asked for them (Allowed).
func ReplayConfig(dir string) (Config, error) {
	d, err := files.OpenDir(dir)
	if err != nil {
		return Config{}, &SetupError{Err: fmt.Errorf("%s is no run directory: %w", dir, err)}
	}
	defer d.Close()
	b, err := d.ReadFile(store.Test, MaxRunFile)
	if err != nil {
		return Config{}, &SetupError{Err: fmt.Errorf("%s is no run directory: %w", dir, err)}
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return Config{}, setupErrorf("%s: %v", d.Join(store.Test), err)
	}
	cfg.Name = strings.TrimSuffix(cfg.Name, "-replay") + "-replay"
	real, err := filepath.EvalSymlinks(dir) // store/latest is a link to STORE/NAME/START
	if err != nil {
		return Config{}, &SetupError{Err: err}
	}
	cfg.Store = filepath.Dir(filepath.Dir(real))
	sched, err := d.ReadFile(store.Schedule, MaxRunFile)
	if err != nil {
		return Config{}, setupErrorf("%s: %v", dir, missingSchedule(d, err))
	}
	if cfg.Plan, err = ParseSchedule(sched); err != nil {
		return Config{}, setupErrorf("%s: %v", d.Join(store.Schedule), err)
	}
	return cfg, nil // CheckReplay and Run validate it, with the caller's Locks
}

// CheckReplay says what is wrong, if anything, with cfg, which
// ReplayConfig read from the run directory dir, as Validate does (with
// hiatus's own locks), but in the words of the run's files: test.edn's
// settings alone first, then schedule.edn's faults against them. A caller
// that starts anything before Run (servers it shares) calls it first.
func CheckReplay(cfg Config, dir string) error {
	alone := cfg
	alone.Plan = nil // Validate's only use of it is what checkSchedule checks
	if err := alone.validate(); err != nil {
		// test.edn keeps --FLAG as :FLAG, a duration as :FLAG-ms.
		return setupErrorf("%s, read as hiatus run's flags: %v", filepath.Join(dir, store.Test), err)
	}
	if err := cfg.checkSchedule(); err != nil {
		return setupErrorf("%s: %v", filepath.Join(dir, store.Schedule), err)
	}
	return cfg.Validate()
}

// missingSchedule says why the run in d has no schedule to replay: err
// is what reading it said.
func missingSchedule(d *files.Dir, err error) error {
	_, herr := d.Lstat(store.History)
	_, jerr := d.Lstat(store.Journal)
	switch {
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case herr != nil && jerr == nil:
		return fmt.Errorf("no %s: the run ended before it wrote one (killed?), leaving only its %s, which hiatus check %s reads; its faults cannot be replayed",
			store.Schedule, store.Journal, d.Path())
	}
	return fmt.Errorf("no %s: a run made before schedules were kept", store.Schedule)
}

// Violated names the checks a run directory's results.edn found invalid:
// the violation a replay must show again.
func Violated(dir string) ([]string, error) {
	d, err := files.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b, err := d.ReadFile(store.Results, MaxRunFile)
	if err != nil {
		return nil, err
	}
	v, err := history.ParseValue(string(b))
	m, ok := v.(map[history.Keyword]any)
	if err != nil || !ok {
		return nil, fmt.Errorf("%s: not a map of results: %v", d.Join(store.Results), err)
	}
	var names []string
	for k, x := range m {
		if c, ok := x.(map[history.Keyword]any); ok && c["valid?"] == false {
			names = append(names, string(k))
		}
	}
	slices.Sort(names)
	return names, nil
}

// Recurs reports whether a replay's results show one of the violations
// named: a check invalid again.
func Recurs(violated []string, replay checker.Results) bool {
	for _, r := range replay.Checks {
		if r.Valid == checker.Invalid && slices.Contains(violated, r.Name) {
			return true
		}
	}
	return false
}

// maxMS is the most milliseconds a time.Duration holds: about 292 years.
const maxMS = math.MaxInt64 / int64(time.Millisecond)

// scheduleKeys are the keys a fault of schedule.edn may have
// (nemesis.Plan.AppendEDN): any other is a mistake, which would otherwise
// be read as nothing (a misspelt :worker as a fault drawn at random).
var scheduleKeys = []history.Keyword{"kind", "at-ms", "ms", "worker", "node", "nodes", "holder?", "in-flight?", "call"}

// ParseSchedule reads a schedule (schedule.edn, a --schedule file) as
// nemesis.ParsePlan does, but refuses what ParsePlan would read as
// something else or what no run could have written: a fault of an unknown
// kind, a key that is none of a fault's, a worker or node that is not a
// whole number from 0 (a string, a negative one: ParsePlan would read it
// as none, a target drawn at random), times that are not whole
// milliseconds or overflow a time.Duration. Its errors name the fault (from
// 1) and the key.
func ParseSchedule(b []byte) (nemesis.Plan, error) {
	v, err := history.ParseValue(string(b))
	if err != nil {
		return nil, fmt.Errorf("not EDN: %w", err)
	}
	m, ok := v.(map[history.Keyword]any)
	fs, okFaults := m["faults"].([]any)
	if !ok || !okFaults || len(m) != 1 {
		return nil, errors.New("want a map of one key, :faults, a vector of faults: {:faults [{:kind :sigstop, :at-ms 500, :ms 800, :worker 1}]}")
	}
	for i, x := range fs {
		if err := checkFault(x); err != nil {
			return nil, fmt.Errorf("fault %d of %d: %w", i+1, len(fs), err)
		}
	}
	return nemesis.ParsePlan(string(b))
}

// checkFault checks one fault of a schedule, x.
func checkFault(x any) error {
	f, ok := x.(map[history.Keyword]any)
	if !ok {
		return fmt.Errorf("%s: want a map of :kind, :at-ms, :ms and its target", history.AppendValue(nil, x))
	}
	for k := range f {
		if !slices.Contains(scheduleKeys, k) {
			return fmt.Errorf("unknown key :%s: a fault has %s", k, keywords(scheduleKeys))
		}
	}
	kind, ok := f["kind"].(history.Keyword)
	if !ok {
		return fmt.Errorf(":kind %s: want the kind of fault, a keyword such as :sigstop", ednOr(f["kind"], "missing"))
	}
	for _, p := range strings.Split(string(kind), "+") {
		if _, ok := faultKindOf(p); !ok {
			return fmt.Errorf(":kind :%s: an unknown kind of fault; hiatus knows %s (or a sequence of them joined by +)",
				kind, strings.Join(NemesisNames(), ", "))
		}
	}
	at, err := milliseconds(f, "at-ms", 0)
	if err != nil {
		return err
	}
	ms, err := milliseconds(f, "ms", 1)
	if err != nil {
		return err
	}
	if at > maxMS-ms {
		return fmt.Errorf(":at-ms %d and :ms %d: the fault would end past what a time.Duration holds (%d ms, about 292 years)", at, ms, maxMS)
	}
	for _, k := range []history.Keyword{"worker", "node"} {
		if x, ok := f[k]; ok && !isIndex(x) {
			return fmt.Errorf(":%s %s: want a %s's index, a whole number from 0", k, history.AppendValue(nil, x), k)
		}
	}
	if x, ok := f["nodes"]; ok {
		xs, ok := x.([]any)
		if !ok || slices.ContainsFunc(xs, func(n any) bool { return !isIndex(n) }) {
			return fmt.Errorf(":nodes %s: want a vector of node indexes, whole numbers from 0", history.AppendValue(nil, x))
		}
	}
	for _, k := range []history.Keyword{"holder?", "in-flight?"} {
		if x, ok := f[k]; ok && x != true && x != false {
			return fmt.Errorf(":%s %s: want true or false", k, history.AppendValue(nil, x))
		}
	}
	if x, ok := f["call"]; ok && !slices.Contains(nemesis.LockCalls(), ednKeyword(x)) {
		return fmt.Errorf(":call %s: want the lock call the fault caught in flight, one of %s", history.AppendValue(nil, x), keywords(nemesis.LockCalls()))
	}
	return nil
}

// milliseconds is the fault f's key k, whole milliseconds from least to
// what a time.Duration holds.
func milliseconds(f map[history.Keyword]any, k history.Keyword, least int64) (int64, error) {
	n, ok := history.Int(f[k])
	switch {
	case !ok:
		return 0, fmt.Errorf(":%s %s: want whole milliseconds", k, ednOr(f[k], "missing"))
	case n < least || n > maxMS:
		return 0, fmt.Errorf(":%s %d: want %d to %d milliseconds (what a time.Duration holds, about 292 years)", k, n, least, maxMS)
	}
	return n, nil
}

// isIndex reports whether x is a whole number from 0 that an int holds.
func isIndex(x any) bool {
	n, ok := history.Int(x)
	return ok && n >= 0 && n <= math.MaxInt32
}

// ednOr is x as EDN, or missing when x is nil (the key is absent).
func ednOr(x any, missing string) string {
	if x == nil {
		return missing
	}
	return string(history.AppendValue(nil, x))
}

// keywordNames is ks as words: sleep, stop, stop-waiters.
func keywordNames(ks []history.Keyword) string { return joinKeywords(ks, "") }

// keywords is ks as EDN keywords: :sleep, :stop.
func keywords(ks []history.Keyword) string { return joinKeywords(ks, ":") }

func joinKeywords(ks []history.Keyword, prefix string) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = prefix + string(k)
	}
	return strings.Join(s, ", ")
}

// checkSchedule checks c's Plan, read from schedule.edn, against the rest
// of c, read from test.edn, in the words of the two files: each fault's
// kind must be among those test.edn's :nemesis names, each worker among
// its :workers. A fault is named by its kind and time: the plan is in the
// order the faults begin, which a schedule written by hand need not be.
func (c Config) checkSchedule() error {
	names := c.FaultNames() // random's are drawn by validating each kind: once
	for _, f := range c.Plan {
		what := fmt.Sprintf("the fault of :kind :%s at :at-ms %d", f.Kind, f.At.Milliseconds())
		if !slices.Contains(names, string(f.Kind)) {
			return fmt.Errorf("%s: test.edn's :nemesis %q does not name :%s", what, c.Nemesis, f.Kind)
		}
		if w, ok := f.Worker.Index(); ok && w >= c.Workers {
			return fmt.Errorf("%s: :worker %d, but test.edn's :workers is %d (workers 0 to %d)", what, w, c.Workers, c.Workers-1)
		}
	}
	return nil
}

// ErrNotAllowed is the error of a run directory that asks hiatus to run a
// command, or to reach machines, that its user did not name (Allowed).
var ErrNotAllowed = errors.New("a run directory asks for what its user did not allow")

// Allowed is what the user of a replay named, on its command line, of what
// a run directory's test.edn may have hiatus run or reach. A run directory
// (a reproducer from a bug report) may come from anyone, and two of its
// settings are not data: an exec: lock's command, which hiatus runs by
// /bin/sh -c as its own user on every worker's machine; and --hosts
// ssh:FILE, an inventory of machines that hiatus logs in to over SSH with
// the keys it names, to run workers, servers, the adapter and firewall
// rules there. Everything else test.edn holds is data that ReplayConfig
// checks, which hiatus hands no shell and uses as no path: the store a
// replay writes to is the run directory's own, or --store; the servers'
// URLs and PIDs are not read; --hosts netns runs hiatus's own commands.
type Allowed struct {
	Lock  string // the exec: lock, as --lock names it: test.edn's :lock, exactly
	Hosts Hosts  // the ssh:FILE hosts, as --hosts names them: test.edn's :hosts, exactly
}

// Check returns an error (a SetupError, ErrNotAllowed) unless a names the
// command and the inventory, if any, that cfg, read from the test.edn at
// file, would use; and if a names another than cfg's.
func (a Allowed) Check(cfg Config, file string) error {
	switch {
	case a.Lock != "" && a.Lock != cfg.Lock:
		return notAllowed("--lock %s is not %s's :lock %s: --lock allows the run's own lock adapter, and must be it exactly",
			shown(a.Lock), file, shown(cfg.Lock))
	case a.Hosts != "" && a.Hosts != cfg.Hosts:
		return notAllowed("--hosts %s is not %s's :hosts %s: --hosts allows the run's own inventory, and must be it exactly",
			shown(string(a.Hosts)), file, shown(string(cfg.Hosts)))
	case cfg.byAdapter() && a.Lock != cfg.Lock:
		return notAllowed("%s asks to run the lock adapter command %s (by /bin/sh -c, as %s, on each worker's machine). "+
			"A run directory may come from anyone, and hiatus runs a command it names only when you name it too: "+
			"read the command, and add %s to run it", file, shown(strings.TrimPrefix(cfg.Lock, client.ExecPrefix)), user(), flag("lock", cfg.Lock))
	case cfg.inventory() != "" && a.Hosts != cfg.Hosts:
		return notAllowed("%s asks to run on the machines that the inventory %s names: to log in to them over SSH with the keys it names "+
			"and run workers, servers and firewall rules there as their user. A run directory may come from anyone, and hiatus reaches "+
			"the machines it names only when you name them too: read the inventory, and add %s to run there",
			file, shown(cfg.inventory()), flag("hosts", string(cfg.Hosts)))
	}
	return nil
}

func notAllowed(format string, args ...any) error {
	return &SetupError{Err: notAllowedError(fmt.Sprintf(format, args...))}
}

// A notAllowedError says what a run directory asked for and how to allow
// it; it is ErrNotAllowed.
type notAllowedError string

func (e notAllowedError) Error() string        { return string(e) }
func (e notAllowedError) Is(target error) bool { return target == ErrNotAllowed }

// shown is s for a message: as a shell word, or in Go's quotes when it
// holds what a terminal would not show as it is (an escape sequence could
// hide the rest of a command).
func shown(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return shellquote.Quote(s)
}

// flag is the flag --name value as a shell reads it, or words on it when
// value holds what a terminal would not show.
func flag(name, value string) string {
	if strings.ContainsFunc(value, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return fmt.Sprintf("--%s with that value (it holds characters a terminal does not show: %s)", name, strconv.Quote(value))
	}
	return "--" + name + " " + shellquote.Quote(value)
}

// user names the user hiatus runs as, for messages.
func user() string {
	if u, err := osuser.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprintf("user %d", os.Geteuid())
}

// ednKeyword is x when it is a keyword; "" otherwise.
func ednKeyword(x any) history.Keyword {
	k, _ := x.(history.Keyword)
	return k
}
