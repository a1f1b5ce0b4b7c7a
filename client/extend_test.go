package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
)

// TestExtendBeforeWrite is the paused-holder choreography (contend) with
// a careful holder: frozen whole (its renewals too) past its lease while
// B takes the lock, A asks its lock to extend the grant before it writes,
// and writes only if the lock says yes. A lock that answers truly keeps
// B's update: A's extend fails and it does not write. redsync v4.0.3's
// Extend says yes of a lock another holder took (go-redsync/redsync
// commit 5e3c32b, "Fix extend and unlock", released in v4.0.4), so A
// writes over B's update; v4.0.4, on the same choreography, does not.
// redis-semaphore 5.3.0's refresh finds the key gone (B released it) and
// SETs it again, saying refreshed (swarthy/redis-semaphore#175, fixed in
// 5.3.1 by PR #177): A writes over B's update; 5.3.1 says lost. redsync's
// WithSetNXOnExtend() does the same, as documented.
func TestExtendBeforeWrite(t *testing.T) {
	const lease = 200 * time.Millisecond
	adapters := t.TempDir()
	for _, v := range []struct{ out, modfile string }{{"redsync-v4.0.4", ""}, {"redsync-v4.0.3", "v4.0.3.mod"}} {
		if err := adaptertest.BuildGo("../adapters/go-redsync", v.modfile, filepath.Join(adapters, v.out)); err != nil {
			t.Fatal(err)
		}
	}
	semaphore := func(v string) string {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "adapters/node-redis-semaphore", v, "node_modules/redis-semaphore")); err != nil {
			t.Fatalf("the redis-semaphore %s adapter needs its npm packages (scripts/setup --tests installs them): %v", v, err)
		}
		return "exec:node " + filepath.Join(root, "adapters/node-redis-semaphore/main.js") + " " + v
	}
	kept := pausedWant{writes: 1, final: 1, overlapping: 2, bAcquire: history.Ok, releaseA: history.ErrExpired}
	lost := pausedWant{writes: 2, final: 1, lost: 1, overlapping: 2, bAcquire: history.Ok}
	for _, tc := range []struct {
		lock    string
		want    pausedWant
		extendA history.Type // how A's extend ended
	}{
		{"renew", kept, history.Fail},
		{"redsync-extend", kept, history.Fail},
		// WithSetNXOnExtend(), by design: the key B released is set again.
		{"redsync-extend-setnx", lost, history.Ok},
		{"exec:" + filepath.Join(adapters, "redsync-v4.0.4"), kept, history.Fail},
		{"exec:" + filepath.Join(adapters, "redsync-v4.0.3"), lost, history.Ok},
		{semaphore("v5.3.1"), kept, history.Fail},
		{semaphore("v5.3.0"), lost, history.Ok},
	} {
		name := strings.TrimPrefix(filepath.Base(tc.lock), "exec:")
		if strings.Contains(tc.lock, "node-redis-semaphore") {
			name = "redis-semaphore-" + name[len(name)-6:]
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			inside, resume := make(chan struct{}), make(chan struct{})
			var lockA client.Lock
			a, lockA := r.extendingWorker(t, 0, tc.lock, lease, func(context.Context, client.Section) {
				defer freeze(lockA)()
				close(inside)
				<-resume
			})
			b, _ := r.extendingWorker(t, 1, tc.lock, lease, nil)

			contend(context.Background(), a, b, inside, resume, lease, 5*time.Second)

			r.checkPaused(t, tc.want)
			extends := 0
			for _, o := range r.ops {
				if o.Process == 0 && o.F == history.FExtend && o.Type != history.Invoke {
					extends++
					if o.Type != tc.extendA {
						t.Errorf("A's extend ended %s (%v), want %s", o.Type, o.Error, tc.extendA)
					}
				}
			}
			if extends != 1 {
				t.Errorf("A extended %d times, want once", extends)
			}
		})
	}
}

// extendingWorker is lockWorker's, unfenced, extending before each write.
func (r *rig) extendingWorker(t *testing.T, p history.Process, name string, lease time.Duration, hook client.Hook) (*client.Worker, client.Lock) {
	w, l := r.lockWorker(t, p, name, lease, false, hook)
	w.ExtendBeforeWrite = true
	return w, l
}

// freeze stops l's renewals, as a stop of its holder's process would, and
// returns what resumes them.
func freeze(l client.Lock) (thaw func()) {
	f, ok := l.(client.Freezer)
	if !ok {
		panic(fmt.Sprintf("%T: no way to freeze its renewals", l))
	}
	return f.Freeze()
}
