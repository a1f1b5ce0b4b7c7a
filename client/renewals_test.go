package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
)

// TestRenewalsRecorded: a holder blocked in its section (its goroutine
// only) keeps its lock by its lock's renewals, which the history now
// shows: :renew ops of the holder's renewer process (:renew-0), each
// naming the grant's token, the lease asked for and who renewed (hiatus's
// watchdog, or an adapter's library, as the adapter reported it),
// answered :ok. When the key goes (deleted here, as redis-py's renewal of a lock
// without expiry deletes it, redis/redis-py#4279), the next renewal is
// recorded refused, as the lock says it (:lost; the adapter's not-held is
// :expired), and the watchdog stops: no renewal follows. The lock's own
// renewals and hiatus's watchdog over an adapter are alike.
func TestRenewalsRecorded(t *testing.T) {
	const lease = 150 * time.Millisecond
	adapter := filepath.Join(t.TempDir(), "redsync-v4.0.4")
	if err := adaptertest.BuildGo("../adapters/go-redsync", "", adapter); err != nil {
		t.Fatal(err)
	}
	// Worker 0's renewer: after a renewal of unknown outcome (:info) the
	// watchdog renews as the next of them (:renew-0-1), as a worker takes
	// its next process: a redsync-extend renewal timed out at once once,
	// in a quiet suite, and the refusal that followed was :renew-0-1's.
	renewer := func(p history.Process) bool {
		holder, _, ok := p.Renews()
		return ok && holder == 0
	}
	self, err := filepath.Abs("testdata/self_renewing.py")
	if err != nil {
		t.Fatal(err)
	}
	semaphore, err := filepath.Abs("../adapters/node/redis-semaphore.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(semaphore), "node_modules/redis-semaphore")); err != nil {
		t.Fatalf("the redis-semaphore adapter needs its npm packages (scripts/setup --tests installs them): %v", err)
	}
	for _, tc := range []struct {
		lock    string
		refused history.Keyword
		by      history.Keyword
	}{
		{"renew", history.ErrLost, history.ByWatchdog},
		{"redsync-extend", history.ErrLost, history.ByWatchdog},
		{"exec:" + adapter, history.ErrExpired, history.ByWatchdog},
		// Renewals its library made on its own, as the adapter reported them.
		{"exec:/usr/bin/python3 " + self, history.ErrExpired, history.ByAdapter},
		{"exec:node " + semaphore, history.ErrExpired, history.ByAdapter},
	} {
		t.Run(filepath.Base(tc.lock), func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			deleted, done := make(chan struct{}), make(chan struct{})
			w, _ := r.lockWorker(t, 0, tc.lock, lease, false, func(ctx context.Context, s client.Section) {
				r.await(t, func(o history.Op) bool { return renewer(o.Process) && o.Type == history.Ok })
				// The lock's key: as hiatus names it, or as redis-semaphore does.
				if err := r.rdb.Del(ctx, "lock:"+r.name, "mutex:lock:"+r.name).Err(); err != nil {
					t.Error(err)
				}
				close(deleted)
				r.await(t, func(o history.Op) bool { return renewer(o.Process) && o.Type == history.Fail })
				// No renewal follows a refused one: the next would come
				// within lease/3, and a release waits for the last.
			})
			go func() { defer close(done); w.Section(context.Background()) }()
			<-done
			var token any
			var oks, fails, after int
			for _, o := range r.ops {
				switch {
				case o.Process == 0 && o.F == history.FAcquire && o.Type == history.Ok:
					token = o.Get(history.KeyToken)
				case !renewer(o.Process):
				case o.F != history.FRenew || o.Get(history.KeyToken) != token || o.Get(history.KeyBy) != tc.by ||
					o.Get(history.KeyLeaseMS) != lease.Milliseconds():
					t.Errorf("renewal %v: want :renew of token %v, :by %v, :lease-ms %d", o, token, tc.by, lease.Milliseconds())
				case fails > 0:
					after++
				case o.Type == history.Ok:
					oks++
				case o.Type == history.Fail:
					fails++
					if o.Error != tc.refused {
						t.Errorf("the renewal after the key went failed with %v, want %v", o.Error, tc.refused)
					}
				}
			}
			if oks == 0 || fails != 1 || after != 0 {
				t.Errorf("renewals: %d ok, %d refused, %d ops after the refusal; want some ok, one refused, none after\n%v", oks, fails, after, r.ops)
			}
			if _, err := history.Pairs(r.history(t)); err != nil {
				t.Errorf("the history does not pair: %v", err)
			}
		})
	}
}

// await waits until the rig has recorded an op that match says is the one
// awaited; the test fails if none comes within 10 s.
func (r *rig) await(t *testing.T, match func(history.Op) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		r.mu.Lock()
		for _, o := range r.ops {
			if match(o) {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Errorf("no op awaited came within 10 s: %v", r.ops)
}

// TestReportOfNoGrantHeld: a renewal an adapter reports of a grant hiatus
// does not hold (one it gave up on, released, or never had) is not
// recorded, and breaks nothing: the section goes on.
func TestReportOfNoGrantHeld(t *testing.T) {
	script := filepath.Join(t.TempDir(), "reporter.sh")
	err := os.WriteFile(script, []byte(`#!/bin/sh
read line
echo '{"type":"hello","in_reply_to":0,"name":"reporter","version":"1"}'
while read line; do
  id=$(echo "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
  case "$line" in
  *'"acquire"'*)
    echo '{"type":"renewing","renewal":1,"token":"not-this-one"}'
    echo '{"type":"renewed","renewal":1,"result":"ok"}'
    echo '{"type":"ok","in_reply_to":'$id',"token":"t"}' ;;
  *) echo '{"type":"ok","in_reply_to":'$id'}' ;;
  esac
done
`), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	w, _ := r.lockWorker(t, 0, "exec:"+script, time.Second, false, nil)
	if err := w.Section(context.Background()); err != nil {
		t.Fatal(err)
	}
	writes := 0
	for _, o := range r.ops {
		if o.Process.IsRenewer() {
			t.Errorf("recorded %s, a renewal of no grant held", history.AppendOp(nil, o))
		}
		if o.F == history.FWrite && o.Type == history.Ok {
			writes++
		}
	}
	if writes != 1 {
		t.Errorf("%d writes, want the section's one: %v", writes, r.ops)
	}
}
