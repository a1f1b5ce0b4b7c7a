package client

// FreezeRenewal stops l's watchdogs from renewing until thaw is called: what
// a stopped process does to them, without stopping the test's own process.
func (l *Renew) FreezeRenewal() (thaw func()) {
	l.frozen.Lock()
	return l.frozen.Unlock
}
