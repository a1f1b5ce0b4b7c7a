package history

import (
	"strconv"
	"strings"
)

// A lock's own calls that no worker op makes — the renewals of a grant by a
// watchdog, or by an adapter's library on its own — run beside the worker's
// ops, while a process has one op open at a time. So each is recorded
// under a process of its own: the renewer of the grants its holder process
// acquired, written :renew-P (P the holder's process), as Jepsen names the
// processes that are not clients of the workload (:nemesis). A holder has
// more renewers when it needs them, :renew-P-1, :renew-P-2 and so on (the
// generation): when two renewals run at once (hiatus's watchdog and an
// adapter's library), and after a renewal of unknown outcome, since, as a
// worker's, a renewer whose call completed :info never invokes again. A
// Reader reads
// these names back as the renewer processes they are, not as numbers of
// its own, so that the holder of every renewal is known after any number
// of readings and writings (a journal sorted into a history, a history
// filtered). Jepsen's own checkers leave them out, as every process whose
// name is not an integer: a renewal is no op of the workload.
const (
	renewerName = "renew-"
	// renewerBase is the top of the band of Process values renewers take:
	// far below the numbers a Reader gives other names (from -2 down, one
	// per name) and above Nemesis.
	renewerBase  Process = -(1 << 62)
	renewerHold          = 40 // bits of the holder's process
	maxRenewGen          = 1 << 21
	maxRenewHold Process = 1 << renewerHold
)

// Renewer returns the process of generation gen (0 first) of the renewer
// of the grants holder acquired; false when holder is no worker's process
// (negative, or past 2^40) or gen is out of range.
func Renewer(holder Process, gen int) (Process, bool) {
	if holder < 0 || holder >= maxRenewHold || gen < 0 || gen >= maxRenewGen {
		return 0, false
	}
	return renewerBase - Process(gen)<<renewerHold - holder, true
}

// Renews says whose renewer p is, and its generation, when p is one.
func (p Process) Renews() (holder Process, gen int, ok bool) {
	if p > renewerBase || p == Nemesis {
		return 0, 0, false
	}
	d := renewerBase - p
	gen = int(d >> renewerHold)
	if gen >= maxRenewGen {
		return 0, 0, false
	}
	return d & (maxRenewHold - 1), gen, true
}

// IsRenewer reports whether p is a renewer (Renewer).
func (p Process) IsRenewer() bool {
	_, _, ok := p.Renews()
	return ok
}

// appendRenewer appends a renewer's name, without its colon.
func appendRenewer(dst []byte, holder Process, gen int) []byte {
	dst = append(dst, renewerName...)
	dst = strconv.AppendInt(dst, int64(holder), 10)
	if gen > 0 {
		dst = append(dst, '-')
		dst = strconv.AppendInt(dst, int64(gen), 10)
	}
	return dst
}

// parseRenewer reads a keyword's name (no colon) as a renewer's, as
// appendRenewer writes it, and only so: no sign, no leading zero.
func parseRenewer(name string) (Process, bool) {
	rest, ok := strings.CutPrefix(name, renewerName)
	if !ok {
		return 0, false
	}
	h, g, two := strings.Cut(rest, "-")
	holder, ok := digits(h)
	if !ok {
		return 0, false
	}
	gen := int64(0)
	if two {
		if gen, ok = digits(g); !ok || gen == 0 {
			return 0, false
		}
	}
	if gen >= maxRenewGen {
		return 0, false
	}
	return Renewer(Process(holder), int(gen))
}

// digits reads a non-negative decimal integer written without sign or
// leading zero, of at most 18 digits.
func digits(s string) (int64, bool) {
	if s == "" || len(s) > 18 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}
