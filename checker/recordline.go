package checker

import (
	"fmt"
	"strings"

	"github.com/hiatus-dev/hiatus/history"
)

// This file tells, from a record of a lock whose waiters queue their own
// keys (etcd's: each waiter puts a key behind the holder's and is granted
// when the keys before it are gone), how an acquire answered ok whose key
// the server never granted lost its place: the record says when a waiter
// put its key (a :refuse whose command puts it) but not when a waiter's key
// went, only what the server granted when the key before it did.

// lineWords says, of acquire c answered ok though no grant of the record
// answered it, how its key left the lock's line ungranted: its put, and the
// end of the key that held the lock after which the server granted no one
// or a key put after c's. ok is false when the record does not show that
// much, or shows more of the lock between the answer and that end: then
// that end is not known to be what c was answered on.
func (v *recordView) lineWords(c lockCall) (string, bool) {
	put, ok := v.putOf(c)
	if !ok {
		return "", false
	}
	p := v.evs[put]
	for k := put + 1; k < len(v.evs); k++ {
		e := v.evs[k]
		if e.key != p.key {
			continue
		}
		end, concludes := "", false
		switch e.act {
		case history.SGap:
			return "", false
		case history.SGrant:
			if e.token == c.token {
				return "", false
			}
			// A key put before c's has its turn first; one put after it
			// is granted only once c's is gone.
			end, concludes = fmt.Sprintf("the server granted %s's key, put after it, at %s (%s)", clientName(e.client), secs(e.time), e.command), !v.putBefore(e.token, put)
		case history.SDelete, history.SExpire:
			how := "was deleted"
			if e.act == history.SExpire {
				how = "expired"
			}
			end = fmt.Sprintf("when %s key, which held the lock, %s at %s (%s), the server granted no one", v.ownerOf(e.token), how, secs(e.time), e.command)
			concludes = !v.grantAt(k) // else the grant that follows is judged next
		}
		if concludes {
			if e.time > c.done {
				end += " (the record's time is when its watch delivered it)"
			}
			return v.lineWordsOf(c, p, end), true
		}
		if v.before(c.done, e.time) && !v.sameInstant(k) {
			return "", false // the server did more after the answer: what it was answered on is not known
		}
	}
	return "", false
}

// lineWordsOf writes lineWords' words, the end of the line's key in end.
func (v *recordView) lineWordsOf(c lockCall, put serverEvent, end string) string {
	return fmt.Sprintf("%s was answered ok (granted) at %s, but the server never granted its key: %s put it in line at %s (%s), and %s: its key had left the line ungranted, and its grant came after its key was gone",
		v.callName(c), secs(c.done), clientName(put.client), secs(put.time), put.command, end)
}

// putOf is the record's :refuse that put acquire c's key in the line: by
// c's slot, while c was under way, its command putting c's token.
func (v *recordView) putOf(c lockCall) (int, bool) {
	if c.token == "" {
		return 0, false
	}
	for i, e := range v.evs {
		if e.act != history.SRefuse || putKey(e.command) != c.token || !v.within(e.time, c.inv, c.done) {
			continue
		}
		if n, ok := v.clientSlot(e.client); ok && n == v.slot(c.process) {
			return i, true
		}
	}
	return 0, false
}

// putBefore reports whether the record has key token put in the line
// before event put.
func (v *recordView) putBefore(token string, put int) bool {
	for _, e := range v.evs[:put] {
		if putKey(e.command) == token && (e.act == history.SRefuse || e.act == history.SGrant) {
			return true
		}
	}
	return false
}

// grantAt reports whether a grant follows event k at its instant: the
// server gave the lock on at once.
func (v *recordView) grantAt(k int) bool {
	for _, e := range v.evs[k+1:] {
		if e.time != v.evs[k].time {
			return false
		}
		if e.act == history.SGrant && e.key == v.evs[k].key {
			return true
		}
	}
	return false
}

// sameInstant reports whether event k came at the instant of the one
// before it: one step of the server's, recorded as several events.
func (v *recordView) sameInstant(k int) bool {
	return k > 0 && v.evs[k-1].time == v.evs[k].time
}

// ownerOf names whose a key was: "worker 0's", by its grant.
func (v *recordView) ownerOf(token string) string {
	if j, ok := v.byToken[token]; ok && v.spans[j].client != "" {
		return clientName(v.spans[j].client) + "'s"
	}
	return "the"
}

// putKey is the key an etcd record's command puts ("put KEY lease …");
// "" for another command.
func putKey(command string) string {
	w := strings.Fields(command)
	if len(w) < 2 || w[0] != "put" {
		return ""
	}
	return w[1]
}
