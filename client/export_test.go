package client

import "syscall"

// FreezeRenewal stops l's watchdogs from renewing until thaw is called: what
// a stopped process does to them, without stopping the test's own process.
func (l *Renew) FreezeRenewal() (thaw func()) { return l.dogs.freeze() }

// FreezeRenewal is Renew's, for redsync's Extend.
func (l *RedsyncExtend) FreezeRenewal() (thaw func()) { return l.dogs.freeze() }

func (d *watchdogs) freeze() (thaw func()) {
	d.frozen.Lock()
	return d.frozen.Unlock
}

// Thaw resumes an adapter Freeze stopped, as the end of a pause of its
// worker's process group would.
func (l *Exec) Thaw() { _ = l.p.Signal(syscall.SIGCONT) }
