package client_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

var redisURL, postgresURL string

// TestMain starts a throwaway redis-server and PostgreSQL for the package:
// these tests claim things about locks and counters, so they run on real ones.
func TestMain(m *testing.M) {
	ctx := context.Background()
	r, err := servers.StartRedis(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests need redis-server:", err)
		os.Exit(1)
	}
	p, err := servers.StartPostgres(ctx)
	if err != nil {
		r.Stop()
		fmt.Fprintln(os.Stderr, "client tests need PostgreSQL:", err)
		os.Exit(1)
	}
	redisURL, postgresURL = r.URL, p.URL
	code := m.Run()
	r.Stop()
	p.Stop()
	os.Exit(code)
}

// A rig is one test's lock and counter, on keys and a row of its own.
type rig struct {
	rdb   *redis.Client
	db    *pgxpool.Pool
	clock client.Clock
	name  string
	id    int64

	mu  sync.Mutex
	ops []history.Op
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	r := &rig{rdb: redis.NewClient(opt), name: fmt.Sprintf("%s-%d", t.Name(), rand.Int63()), id: rand.Int63()}
	t.Cleanup(func() { r.rdb.Close() })
	if r.db, err = pgxpool.New(ctx, postgresURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.db.Close)
	start, err := client.ServerTime(ctx, r.rdb)
	if err != nil {
		t.Fatal(err)
	}
	r.clock = client.NewRedisClock(r.rdb, start)
	if err := (&client.Counter{DB: r.db, ID: r.id}).Setup(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) record(o history.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

func (r *rig) worker(p history.Process, lease time.Duration, fenced bool, hook client.Hook) *client.Worker {
	return &client.Worker{
		Lock: &client.SetNX{Redis: r.rdb, Key: "lock:" + r.name, FenceKey: "fence:" + r.name,
			Lease: lease, Retry: time.Millisecond, Fenced: fenced},
		Workload: &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardOf(fenced)},
		Clock:    r.clock, Record: r.record, Process: p, Stride: 10, Hook: hook,
	}
}

// history closes the rig's history with a final read and returns it sorted
// and indexed, as a run writes it.
func (r *rig) history(t *testing.T) []history.Op {
	t.Helper()
	ctx := context.Background()
	extra := map[history.Keyword]any{history.KeyFinal: true}
	r.record(history.Op{Time: r.clock.Now(ctx), Type: history.Invoke, Process: 99, F: "read", Extra: extra})
	v, _, err := (&client.Counter{DB: r.db, ID: r.id}).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.record(history.Op{Time: r.clock.Now(ctx), Type: history.Ok, Process: 99, F: "read", Value: v, Extra: extra})
	ops := append([]history.Op(nil), r.ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Time < ops[j].Time })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// TestPausedHolder is the deterministic pause test: holder A acquires with a
// 200 ms lease and reads, then waits inside its section; holder B acquires
// as soon as A's lease lapses, reads and writes; then A goes on and writes. Unfenced,
// A's write overwrites B's: two successful writes, a counter of 1, one update
// lost. Fenced, A's write is rejected and nothing is lost.
func TestPausedHolder(t *testing.T) {
	const lease = 200 * time.Millisecond
	for _, tc := range []struct {
		fenced                        bool
		writes, final, lost, rejected int64
		releaseA                      history.Keyword
	}{
		{fenced: false, writes: 2, final: 1, lost: 1, rejected: 0, releaseA: "expired"},
		{fenced: true, writes: 1, final: 1, lost: 0, rejected: 1, releaseA: "expired"},
	} {
		t.Run(fmt.Sprintf("fenced=%v", tc.fenced), func(t *testing.T) {
			ctx := context.Background()
			r := newRig(t)
			inside, resume := make(chan struct{}), make(chan struct{})
			a := r.worker(0, lease, tc.fenced, func(context.Context, client.Section) {
				close(inside)
				<-resume
			})
			// Only A's lease is to lapse: B's outlasts its section however
			// slowly a loaded machine runs it, so that B's release finds
			// its own key.
			b := r.worker(1, time.Minute, tc.fenced, nil)

			done := make(chan struct{})
			go func() { a.Section(ctx); close(done) }()
			<-inside
			// B's acquire retries until A's lease lapses on Redis's clock,
			// however long the machine takes: no sleep guesses at it.
			b.Section(ctx)
			close(resume)
			<-done

			res := checker.LockCounter(r.history(t), 0)
			for key, want := range map[string]int64{"writes": tc.writes, "final": tc.final,
				"lost-min": tc.lost, "lost-max": tc.lost, "stale-rejected": tc.rejected} {
				if got, _ := history.Int(res.Get(key)); got != want {
					t.Errorf("%s = %v, want %d", key, res.Get(key), want)
				}
			}
			wantValid := checker.Valid
			if tc.lost > 0 {
				wantValid = checker.Invalid
			}
			if res.Valid != wantValid {
				t.Errorf("valid? %v, want %v (%s)", res.Valid, wantValid, res.Explanation)
			}
			if n, _ := history.Int(res.Get("lock-overlapping-sections")); n != 2 {
				t.Errorf("lock-overlapping-sections = %d, want 2: A's and B's sections overlap", n)
			}
			var releases []any
			for _, o := range r.ops {
				if o.F == "release" && o.Type != history.Invoke {
					releases = append(releases, o.Error)
				}
			}
			// B released first (ok, nil); A found the key gone.
			if len(releases) != 2 || releases[0] != nil || releases[1] != tc.releaseA {
				t.Errorf("release errors = %v, want [<nil> %s]", releases, tc.releaseA)
			}
		})
	}
}

// TestMutualExclusion runs three workers with a lease far longer than a
// section: no section overlaps another and no update is lost.
func TestMutualExclusion(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for p := range 3 {
		w := r.worker(history.Process(p), 5*time.Second, false, nil)
		w.Work = 2 * time.Millisecond
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	wg.Wait()
	res := checker.LockCounter(r.history(t), 0)
	writes, _ := history.Int(res.Get("writes"))
	// Only a floor: how many sections a loaded machine runs is its own.
	if writes < 1 {
		t.Errorf("no write in 700 ms: nothing was checked")
	}
	if res.Valid != checker.Valid {
		t.Errorf("valid? %v: %s", res.Valid, res.Explanation)
	}
	if n, _ := history.Int(res.Get("lock-overlapping-sections")); n != 0 {
		t.Errorf("%d sections overlap under a working lock", n)
	}
}

// TestResolve: :info writes asked about become :ok when the audit table has
// them and :fail when it does not; nothing else changes.
func TestResolve(t *testing.T) {
	sec := map[history.Keyword]any{"section": int64(4)}
	ops := []history.Op{
		{Type: history.Info, Process: 1, F: "write", Value: int64(7), Extra: sec},
		{Type: history.Info, Process: 2, F: "write", Value: int64(7), Extra: sec},
		{Type: history.Info, Process: 3, F: "read"},
		{Type: history.Ok, Process: 1, F: "write", Value: int64(8), Extra: sec},
		{Type: history.Info, Process: 4, F: "write", Value: int64(9)},             // no :section: left alone
		{Type: history.Info, Process: 5, F: "write", Value: int64(9), Extra: sec}, // not asked about
	}
	asked := map[client.WriteID]bool{}
	for _, o := range ops[:5] {
		if id, ok := client.InfoWrite(o); ok {
			asked[id] = true
		}
	}
	want := []history.Type{history.Ok, history.Fail, history.Info, history.Ok, history.Info, history.Info}
	n := 0
	for i, o := range ops {
		got, ok := client.Resolve(o, asked, map[client.WriteID]bool{{Process: 1, Section: 4}: true})
		if ok {
			n++
		}
		if got.Type != want[i] {
			t.Errorf("op %d: %v, want %v", i, got.Type, want[i])
		}
		if i == 0 && got.Get("resolved") != history.Keyword("audit") {
			t.Errorf("op 0 %v; want :resolved :audit", got)
		}
	}
	if n != 2 {
		t.Errorf("resolved %d ops, want 2", n)
	}
}

// TestAudit: a write that takes effect leaves its audit row, a fenced write
// that is rejected leaves none.
func TestAudit(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	c := &client.Counter{DB: r.db, ID: r.id, Guard: client.GuardFence}
	if err := c.Write(ctx, 1, 0, 5, client.WriteID{Process: 0, Section: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, 1, 0, 4, client.WriteID{Process: 1, Section: 1}); err != client.ErrStale {
		t.Fatalf("stale write: %v, want ErrStale", err)
	}
	got, err := c.Audited(ctx, []client.WriteID{{Process: 0, Section: 1}, {Process: 1, Section: 1}, {Process: 2, Section: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !got[client.WriteID{Process: 0, Section: 1}] || got[client.WriteID{Process: 1, Section: 1}] || len(got) != 1 {
		t.Errorf("audit rows %v, want only {0 1}", got)
	}
}
