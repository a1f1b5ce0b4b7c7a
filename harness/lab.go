package harness

import (
	"context"
	"slices"

	"github.com/hiatus-dev/hiatus/client"
)

// A Lab runs experiments on hiatus's own locks, on lock adapters (exec:),
// and on locks of a program's own, which it declares once, here: for the
// runs, which check and place them by their Store, and for the runs'
// workers, which build them (Lab.ServeWorker). A program with none needs
// no Lab: Run, RunWatched, ServeWorker and Config.Validate are the zero
// Lab's.
type Lab struct {
	Locks []client.LockKind
}

// Run runs the experiment cfg describes, on the lab's locks and hiatus's,
// as RunWatched does, quietly.
func (l Lab) Run(ctx context.Context, cfg Config) (Result, error) {
	return l.RunWatched(ctx, cfg, Watch{})
}

// RunWatched runs the experiment cfg describes, on the lab's locks and
// hiatus's: see the package's RunWatched.
func (l Lab) RunWatched(ctx context.Context, cfg Config, watch Watch) (Result, error) {
	cfg.own = l.Locks
	return runWatched(ctx, cfg, watch)
}

// Validate says what is wrong with cfg, if anything, the lab's locks
// counted, in the words of the flags that set it.
func (l Lab) Validate(cfg Config) error {
	cfg.own = l.Locks
	return cfg.Validate()
}

// lookupLock is the kind of c's lock, among its lab's and hiatus's; one
// kept Elsewhere when there is none of that name (Validate says so). A
// plan holds it.
func (c Config) lookupLock() client.LockKind {
	if k, ok := client.LockKindOf(c.Lock, c.own); ok {
		if a, ok := adapterStoreOf(c.AdapterStore); ok && c.byAdapter() {
			k.Store, k.Failover = a.store, a.failover
		}
		return k
	}
	return client.LockKind{Name: c.Lock, Store: client.Elsewhere}
}

// onSentinel says c's lock is an adapter's on a Redis its sentinels fail
// over (AdapterOnSentinel): the run starts them, and tells the adapter.
func (c Config) onSentinel() bool {
	a, ok := adapterStoreOf(c.AdapterStore)
	return ok && a.failover && c.byAdapter()
}

// lockNames are the locks c may name: hiatus's and its lab's.
func (c Config) lockNames() []string {
	names := client.LockNames()
	for _, k := range c.own {
		if !slices.Contains(names, k.Name) {
			names = append(names, k.Name)
		}
	}
	return names
}
