package checker

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
)

// renewalHistory is two holders' sections on a 1000 ms lease: A (process
// 0) reads 0 and is paused (kind) for 2001 ms; its lock's renewals in the
// pause end as renewals says, by op; B takes the lock at +700 ms, writes
// 1; A writes 1 at +2100 ms: an update lost. Times are in ms.
func renewalHistory(kind history.Keyword, renewals []history.Op) []history.Op {
	const ms = int64(1e6)
	at := func(t int64, o history.Op) history.Op { o.Time = t * ms; return o }
	lease := map[history.Keyword]any{history.KeyLeaseMS: int64(1000)}
	acq := func(t int64, p history.Process) history.Op {
		return at(t, history.Op{Type: history.Ok, Process: p, F: history.FAcquire, Extra: lease})
	}
	pause := map[history.Keyword]any{"kind": kind, "process": int64(0), "ms": int64(2001)}
	ops := []history.Op{
		at(0, inv(0, history.FAcquire, nil)), acq(1, 0),
		at(2, inv(0, history.FRead, nil)), at(3, ok(0, history.FRead, int64(0))),
		at(4, history.Op{Type: history.Info, Process: history.Nemesis, F: history.FPause, Value: pause}),
		at(650, inv(1, history.FAcquire, nil)), acq(700, 1),
		at(701, inv(1, history.FRead, nil)), at(702, ok(1, history.FRead, int64(0))),
		at(703, inv(1, history.FWrite, int64(1))), at(704, ok(1, history.FWrite, int64(1))),
		at(705, inv(1, history.FRelease, nil)), at(706, ok(1, history.FRelease, nil)),
		at(2005, history.Op{Type: history.Info, Process: history.Nemesis, F: history.FResume, Value: pause}),
		at(2100, inv(0, history.FWrite, int64(1))), at(2101, ok(0, history.FWrite, int64(1))),
		at(2102, inv(0, history.FRelease, nil)), at(2103, history.Op{Type: history.Fail, Process: 0, F: history.FRelease, Error: history.ErrExpired}),
		at(2200, inv(9, history.FRead, nil)), at(2201, history.Op{Type: history.Ok, Process: 9, F: history.FRead, Value: int64(1),
			Extra: map[history.Keyword]any{history.KeyFinal: true}}),
	}
	ops = append(ops, renewals...)
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// renewal is one renewal of process 0's grant, asked at inv ms and
// answered at done ms as typ, with err.
func renewal(gen int, inv, done int64, typ history.Type, err any) []history.Op {
	p, _ := history.Renewer(0, gen)
	extra := map[history.Keyword]any{history.KeyLeaseMS: int64(1000), history.KeyBy: history.ByAdapter}
	return []history.Op{
		{Time: inv * 1e6, Type: history.Invoke, Process: p, F: history.FRenew, Extra: extra},
		{Time: done * 1e6, Type: typ, Process: p, F: history.FRenew, Error: err, Extra: extra},
	}
}

// TestRenewalsExplainTheLoss: the explanation of a lost update reads the
// lock's own renewals. A holder paused by a sleep — a pause its lock's
// renewals run on through — whose renewal answered ok at +333 ms and the
// next refused at +680 ms (redis/redis-py#4279: a renewal of a lock that
// never expires deletes it, and says ok) lost its grant while its lease
// still ran: the renewals say so, and the pause is not blamed for it; with
// every renewal in the pause answered ok, the lock said the grant was
// still its own. A SIGSTOP freezes the renewals with the holder: the pause
// is the cause, as it was. The renewals change no figure.
func TestRenewalsExplainTheLoss(t *testing.T) {
	refused := append(renewal(0, 333, 346, history.Ok, nil), renewal(0, 680, 690, history.Fail, history.ErrExpired)...)
	var allOK []history.Op
	for _, at := range []int64{333, 667, 1000, 1333} {
		allOK = append(allOK, renewal(0, at, at+5, history.Ok, nil)...)
	}
	for _, tc := range []struct {
		name     string
		kind     history.Keyword
		renewals []history.Op
		want     []string
		not      string
	}{
		{"a renewal refused in a sleep", "sleep", refused,
			[]string{"but its lock's own renewal op ", ", 679 ms after the grant, was refused (:expired) while the lease its renewal op ",
				"answered ok, gave still ran (653 ms more): the grant was lost then, before its lease ran out"}, ""},
		{"renewals ok through a sleep", "sleep", allOK,
			[]string{"but its lock's renewals run on through such a pause, and each of its 4 renewals in it was answered ok", "1332 ms after the grant): the lock said the grant was still its own"}, "refused"},
		{"a sigstop, no renewal", "sigstop", nil, []string{"sigstop", "for 2001 ms while holding a 1000 ms lease"}, "renewal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := renewalHistory(tc.kind, tc.renewals)
			res, err := Check(context.Background(), ops, Options{})
			if err != nil {
				t.Fatal(err)
			}
			lc, _ := res.Check("lock-counter")
			lin, _ := res.Check("linear")
			if res.Valid != Invalid || lc.Valid != Invalid {
				t.Fatalf("valid? %v, lock-counter %v (%s)", res.Valid, lc.Valid, lc.Explanation)
			}
			for _, r := range []Result{lc, lin} {
				for _, w := range tc.want {
					if !strings.Contains(r.Explanation, w) {
						t.Errorf("%s: %q\nlacks %q", r.Name, r.Explanation, w)
					}
				}
				if tc.not != "" && strings.Contains(r.Explanation, tc.not) {
					t.Errorf("%s: %q\nsays %q", r.Name, r.Explanation, tc.not)
				}
			}
			if f, ok := lc.Get("info-ops").(int64); !ok || f != 0 {
				t.Errorf("info-ops %v: a renewal is no worker's op", lc.Get("info-ops"))
			}
		})
	}
}
