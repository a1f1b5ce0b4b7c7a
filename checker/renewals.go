package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hiatus-dev/hiatus/history"
)

// A Renewal is one of a lock's own renewals of a grant (a :renew of the
// holder's renewer process, history.Renewer), as the history records it:
// whose grant, when it was asked and answered, and how.
type Renewal struct {
	Holder    history.Process
	Inv, Done int64 // times of the invocation and the completion; Done -1 if it never completed
	At        int   // position of the completion in the history, or of the invocation if none
	LeaseNS   int64 // the lease it asked for; 0 if not recorded
	Type      history.Type
	Error     any // the completion's :error
}

// renewalBuilder gathers the renewals one op at a time. They are few
// beside the workers' ops (one each lease/3 of a section that outlasts
// it), and kept whole, for the explanation of the section they fell in.
type renewalBuilder struct {
	open     history.ProcessMap[Renewal] // by renewer process
	renewals []Renewal
}

func (b *renewalBuilder) add(i int, o history.Op) {
	holder, _, ok := o.Process.Renews()
	if !ok || o.F != history.FRenew {
		return
	}
	if o.Type == history.Invoke {
		ms, _ := history.Int(o.Get(history.KeyLeaseMS))
		b.open.Set(o.Process, Renewal{Holder: holder, Inv: o.Time, Done: -1, At: i, LeaseNS: ms * 1e6, Type: history.Info})
		return
	}
	r, ok := b.open.Get(o.Process)
	if !ok {
		return // a completion never invoked: the pairing check says so
	}
	b.open.Delete(o.Process)
	r.Done, r.At, r.Type, r.Error = o.Time, i, o.Type, o.Error
	b.renewals = append(b.renewals, r)
}

// finish adds the renewals that never completed: of unknown outcome.
func (b *renewalBuilder) finish() {
	for _, r := range b.open.All() {
		b.renewals = append(b.renewals, r)
	}
	b.open.Clear()
}

// in returns the renewals of sec's grant asked for from its start until
// until, in the order they were asked.
func (b *renewalBuilder) in(sec Section, until int64) []Renewal {
	var out []Renewal
	for _, r := range b.renewals {
		if r.Holder == sec.Process && r.Inv >= sec.Start && r.Inv <= until {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Renewal) int { return cmp.Compare(a.Inv, b.Inv) }) // they came by completion
	return out
}

// keepsRenewing says a pause of kind leaves the paused worker's lock
// renewing: one that blocks the worker's goroutine alone (an in-section
// sleep; a stop-waiters holder's own block), not one that stops its whole
// process.
func keepsRenewing(kind history.Keyword) bool {
	return kind == history.PauseSleep || kind == history.PauseStopWaiters
}

// renewalCause says what the lock's own renewals tell of how sec's holder
// lost its grant before its write, "" when they tell nothing: a renewal
// the lock refused (or answered unknown), with whether the lease the one
// before it gave (or the grant's) still ran; or, through a pause that
// leaves renewals running (sleep), renewals each answered ok, so that the
// lock said the grant was still the holder's when it was not. Then the
// pause does not explain the loss, the renewals do.
func (s *Stream) renewalCause(sec Section, pause *Pause) string {
	until := sec.End
	if sec.WriteInv > 0 {
		until = sec.WriteInv
	}
	rs := s.renewals.in(sec, until)
	kept, keptBy := sec.Start+sec.LeaseNS, "its grant"
	for _, r := range rs {
		if r.Type == history.Ok {
			kept, keptBy = r.Inv+cmp.Or(r.LeaseNS, sec.LeaseNS), fmt.Sprintf("its renewal %s, answered ok,", s.name(r.At))
			continue
		}
		how := fmt.Sprintf("refused (%s)", history.AppendValue(nil, r.Error))
		if r.Type == history.Info {
			how = "of unknown outcome"
		}
		msg := fmt.Sprintf("its lock's own renewal %s, %d ms after the grant, was %s", s.name(r.At), (r.Inv-sec.Start)/1e6, how)
		if sec.LeaseNS > 0 && r.Inv < kept {
			return msg + fmt.Sprintf(" while the lease %s gave still ran (%d ms more): the grant was lost then, before its lease ran out", keptBy, (kept-r.Inv)/1e6)
		}
		if sec.LeaseNS > 0 {
			return msg + fmt.Sprintf(", after the lease %s gave had run out", keptBy)
		}
		return msg
	}
	if pause == nil || !keepsRenewing(pause.Kind) {
		return ""
	}
	var oks []Renewal
	for _, r := range rs {
		if r.Inv >= pause.Start && r.Inv <= pause.End {
			oks = append(oks, r)
		}
	}
	if len(oks) == 0 {
		return ""
	}
	last := oks[len(oks)-1]
	return fmt.Sprintf("its lock's renewals run on through such a pause, and each of its %d %s in it was answered ok (the last, %s, %d ms after the grant): the lock said the grant was still its own",
		len(oks), plural(int64(len(oks)), "renewal", "renewals"), s.name(last.At), (last.Inv-sec.Start)/1e6)
}
