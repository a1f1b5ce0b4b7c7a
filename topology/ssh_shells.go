package topology

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Every session hiatus opens on a node runs warmScript, which waits for
// the script it is to run on its standard input. A session's shell reads
// the user's start-up files before its command (sshd has bash read
// .bashrc), and on a node with a pyenv or a conda set-up that takes a
// second or more: so a node keeps a few shells that have read theirs
// (warmShells), and a command takes one at once, where a new session
// would wait that long (a 1 s run over SSH took 17 s against a 1 s
// .bashrc, 2.2 s on this machine; scripts/bench-hosts --bashrc-sleep 1).

// scriptEnd ends the script a shell of warmScript is sent; what follows
// it on its standard input is the script's.
const scriptEnd = "hiatus-ssh-script-end"

// warmScript reads lines until scriptEnd and then runs them, in the
// shell itself (exec in them replaces it), and exits with their status;
// input that ends before scriptEnd runs nothing. read takes a pipe's bytes
// one at a time, so none past the line is taken from the script's input.
// bash's read waits a year, not TMOUT (a hardened node's /etc/profile.d
// sets it readonly, to 600 s or so): a shell kept ready waits a run long.
const warmScript = `s=
while IFS= read ${BASH_VERSION:+-t 31536000} -r l; do
  if [ "$l" = ` + scriptEnd + ` ]; then eval "$s"; exit; fi
  s="$s$l
"
done
exit 125`

// A shell is a session whose shell is running warmScript.
type shell struct {
	c      *ssh.Client // its connection
	s      *ssh.Session
	in     io.WriteCloser
	out    io.Reader
	stderr *heldWriter
}

// openShell opens a session on c running warmScript.
func openShell(c *ssh.Client) (*shell, error) {
	s, err := c.NewSession()
	if err != nil {
		return nil, err
	}
	sh := &shell{c: c, s: s, stderr: &heldWriter{}}
	if sh.in, err = s.StdinPipe(); err == nil {
		sh.out, err = s.StdoutPipe()
	}
	if err == nil {
		s.Stderr = sh.stderr
		err = s.Start(warmScript)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return sh, nil
}

// run sends the shell script, its standard error to go to stderr (nil:
// dropped) from now on, what the start-up files wrote there first.
func (sh *shell) run(script string, stderr io.Writer) error {
	sh.stderr.send(stderr)
	_, err := io.WriteString(sh.in, script+"\n"+scriptEnd+"\n")
	return err
}

// maxHeld bounds what a heldWriter holds: the start-up files' standard
// error of a shell kept ready, which nothing reads until it is taken.
const maxHeld = 64 << 10

// heldWriter holds what is written to it until it is told where it goes.
type heldWriter struct {
	mu   sync.Mutex
	held bytes.Buffer
	to   io.Writer
	sent bool
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.sent:
		// A start-up file that says much is kept to its first words.
		w.held.Write(p[:min(len(p), max(0, maxHeld-w.held.Len()))])
		return len(p), nil
	case w.to != nil:
		return w.to.Write(p)
	}
	return len(p), nil
}

// send writes what it held to to (nil: drops it), and what comes after.
func (w *heldWriter) send(to io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent, w.to = true, to
	if to != nil {
		_, _ = to.Write(w.held.Bytes())
	}
	w.held.Reset()
}

// warmShells is how many shells a node keeps ready: a PostgreSQL started
// on a node runs five commands one after another, then stops with more.
const warmShells = 6

// A shells keeps a node's warm shells, on its connections: sshd's
// MaxSessions (10 by default) bounds one connection's sessions, those of
// the processes a run started among them, so a connection that refuses a
// session is followed by another.
type shells struct {
	node  Node
	ready chan warmed
	mu    sync.Mutex
	conns []*ssh.Client // the first is the host's own
	done  bool
}

// A warmed is a shell made ready, or why it could not be.
type warmed struct {
	sh  *shell
	err error
}

// newShells keeps warmShells shells ready on c, a connection to node.
func newShells(node Node, c *ssh.Client) *shells {
	p := &shells{node: node, ready: make(chan warmed, warmShells), conns: []*ssh.Client{c}}
	for range warmShells {
		go p.warm()
	}
	return p
}

// warm makes a shell ready.
func (p *shells) warm() {
	sh, err := p.open()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		if sh != nil {
			sh.s.Close()
		}
		return
	}
	p.ready <- warmed{sh, err} // never blocks: each warm follows a take
}

// open opens a shell on the newest connection, or on a new one when that
// one holds as many sessions as its sshd allows.
func (p *shells) open() (*shell, error) {
	p.mu.Lock()
	c := p.conns[len(p.conns)-1]
	p.mu.Unlock()
	sh, err := openShell(c)
	// OpenSSH refuses a session past MaxSessions as a failed connect
	// ("open failed"); another server may say prohibited.
	var oc *ssh.OpenChannelError
	if !errors.As(err, &oc) {
		return sh, err
	}
	c2, err := dial(context.Background(), p.node)
	if err != nil {
		return nil, fmt.Errorf("a connection beside one whose sessions are all taken: %w", err)
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		c2.Close()
		return nil, errors.New("closed")
	}
	p.conns = append(p.conns, c2)
	p.mu.Unlock()
	return openShell(c2)
}

// take returns a ready shell, waiting for one unless ctx ends first, and
// has another made ready.
func (p *shells) take(ctx context.Context) (*shell, error) {
	select {
	case w, ok := <-p.ready:
		if !ok {
			return nil, errors.New("closed")
		}
		go p.warm()
		return w.sh, w.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close closes the shells not taken, and the connections it added, once
// the watchdog (on the host's own or on one added) has ended the processes
// on them.
func (p *shells) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done = true
	extra := p.conns[1:]
	close(p.ready) // warm sends under mu, and not once done
	p.mu.Unlock()
	for w := range p.ready {
		if w.sh != nil {
			w.sh.s.Close()
		}
	}
	for _, c := range extra {
		c.Close()
	}
}
