package topology_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/topology"
)

const (
	// quiet is how long a test watches for bytes that must not come. It can
	// only make a test pass wrongly, never fail wrongly.
	quiet = 20 * time.Millisecond
	// patience bounds every wait for something that must happen.
	patience = 5 * time.Second
)

// TestListenBadTarget: a target that is no "host:port" is refused, naming it.
func TestListenBadTarget(t *testing.T) {
	_, err := topology.Listen("nonsense")
	var addrErr *net.AddrError
	if !errors.As(err, &addrErr) || !strings.HasPrefix(err.Error(), "topology: link to nonsense: ") {
		t.Fatalf("Listen(nonsense) = %v, want a *net.AddrError naming the target", err)
	}
}

// TestForward: bytes cross both ways, in order and whole, many chunks at a
// time; each side's EOF reaches the other after its bytes; Stats count them.
func TestForward(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"one byte", 1},
		{"many chunks", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			l := listen(t, tg.addr())
			client, server := pair(t, l, tg)
			up, down := payload(tc.size, 1), payload(tc.size, 2)
			sent := make(chan error, 2)
			go func() { sent <- sendAndClose(client, up) }()
			go func() { sent <- sendAndClose(server, down) }()
			readAll(t, server, up)
			readAll(t, client, down)
			for range 2 {
				if err := <-sent; err != nil {
					t.Fatal(err)
				}
			}
			all := topology.Flow{Read: int64(tc.size), Written: int64(tc.size)}
			want := topology.Stats{Accepted: 1, Open: 0, Up: all, Down: all}
			waitFor(t, "the connection to end", func() bool { return l.Stats().Open == 0 })
			if got := l.Stats(); got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
		})
	}
}

// TestCut: a cut link delivers nothing either way, not even a new
// connection, and delivers what it held, in order, after Heal.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing bool // the connection is opened before the cut
		cuts     int
	}{
		{"existing connection", true, 1},
		{"opened while cut", false, 1},
		{"cut twice, healed once", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			l := listen(t, tg.addr())
			var client, server net.Conn
			if tc.existing {
				client, server = pair(t, l, tg)
			}
			for range tc.cuts {
				l.Cut()
			}
			if !tc.existing {
				client = dial(t, l.Addr())
			}
			for _, s := range []string{"1", "2", "3"} {
				send(t, client, s)
			}
			waitFor(t, "the link to hold 3 bytes", func() bool { return l.Stats().Up.Read == 3 })
			if tc.existing {
				silent(t, server)
				send(t, server, "abc")
				waitFor(t, "the link to hold 3 more", func() bool { return l.Stats().Down.Read == 3 })
				silent(t, client)
			} else {
				tg.none(t)
			}
			l.Heal()
			if !tc.existing {
				server = tg.next(t)
				send(t, server, "abc")
			}
			expect(t, server, "123")
			expect(t, client, "abc")
		})
	}
}

// TestCutThenClose: when a side closes during a cut, the bytes held for the
// other are lost, and the other side learns nothing until Heal resets it.
func TestCutThenClose(t *testing.T) {
	for _, tc := range []struct {
		name         string
		clientCloses bool
	}{
		{"client closes", true},
		{"target closes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			l := listen(t, tg.addr())
			client, server := pair(t, l, tg)
			l.Cut()
			send(t, client, "lost")
			send(t, server, "lost")
			closer, other := server, client
			if tc.clientCloses {
				closer, other = client, server
			}
			closer.Close()
			waitFor(t, "the link to see the close", func() bool { return l.Stats().Open == 0 })
			silent(t, other)
			l.Heal()
			expectReset(t, other)
		})
	}
}

// TestSlow: a slowed link delays every chunk by at least d each way and
// keeps their order, even when the delay ends with chunks held; Slow(0)
// ends the delay for what comes next.
func TestSlow(t *testing.T) {
	const d = 50 * time.Millisecond
	for _, tc := range []struct {
		name          string
		before        time.Duration // a delay set and replaced before any write
		first, second time.Duration // the delay for each half of the writes
		atLeast       time.Duration // the least the round trips may take
	}{
		{"slowed", 0, d, d, 2 * d},
		{"ended with chunks held", 0, d, 0, d},
		{"ended before", time.Hour, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := listen(t, echo(t))
			c := dial(t, l.Addr())
			send(t, c, "warm") // the link has dialed the target
			expect(t, c, "warm")
			l.Slow(tc.before)
			l.Slow(tc.first)
			start := time.Now()
			var want strings.Builder
			for i := range 100 {
				if i == 50 {
					// The delay is set as chunks enter the link, not as they are sent.
					waitFor(t, "the first half to enter the link", func() bool { return l.Stats().Up.Read == 4+200 })
					l.Slow(tc.second)
				}
				s := fmt.Sprintf("%03d,", i)
				want.WriteString(s)
				send(t, c, s)
			}
			expect(t, c, want.String())
			if took := time.Since(start); took < tc.atLeast {
				t.Errorf("the round trips took %v, want at least %v", took, tc.atLeast)
			}
		})
	}
}

// TestAwaiting: a link has a request in flight from when its bytes enter
// the link until the answer is given to the client: while a cut holds it,
// and while the target has it and has not answered; not when idle.
func TestAwaiting(t *testing.T) {
	t.Run("held by a cut", func(t *testing.T) {
		l := listen(t, echo(t))
		c := dial(t, l.Addr())
		send(t, c, "warm")
		expect(t, c, "warm")
		if l.Awaiting() {
			t.Fatal("awaiting with nothing sent")
		}
		l.Cut()
		send(t, c, "held")
		waitFor(t, "the request to enter the link", l.Awaiting)
		l.Heal()
		expect(t, c, "held")
		if l.Awaiting() {
			t.Error("awaiting a request delivered and answered")
		}
	})
	t.Run("at the target", func(t *testing.T) {
		tg := newTarget(t)
		l := listen(t, tg.addr())
		client, server := pair(t, l, tg)
		send(t, client, "request")
		expect(t, server, "request")
		if !l.Awaiting() {
			t.Error("not awaiting a request the target has not answered")
		}
		send(t, server, "answer")
		expect(t, client, "answer")
		if l.Awaiting() {
			t.Error("awaiting a request answered")
		}
	})
}

// TestSlowReplies: a reply-only delay holds what the target sends, the
// reply to a request already in flight when it began included, and only
// that: a request crosses at once (the target has it, and the next one,
// while the client still waits for the first answer), and the answer
// reaches the client no sooner than the delay after the link read it.
// Ended, it holds nothing more.
func TestSlowReplies(t *testing.T) {
	const d = 100 * time.Millisecond
	tg := newTarget(t)
	l := listen(t, tg.addr())
	client, server := pair(t, l, tg)
	send(t, client, "request")
	expect(t, server, "request")
	l.SlowReplies(d)
	start := time.Now()
	send(t, server, "answer")
	waitFor(t, "the answer to be held", func() bool { return l.Stats().RepliesHeld == 1 })
	send(t, client, "second")
	expect(t, server, "second") // a request is not held
	if !l.Awaiting() {
		t.Error("no request in flight while its answer is held")
	}
	expect(t, client, "answer")
	if took := time.Since(start); took < d {
		t.Errorf("the answer came %v after it was sent, want at least %v", took, d)
	}
	l.SlowReplies(0)
	send(t, server, "second answer")
	expect(t, client, "second answer")
	if held := l.Stats().RepliesHeld; held != 1 {
		t.Errorf("%d replies held, want the one sent while the delay was on", held)
	}
	if l.Awaiting() {
		t.Error("awaiting with every request answered")
	}
}

// TestDrop: Drop resets open connections on both sides, mid-request, and
// resets new ones without reaching the target, until Heal.
func TestDrop(t *testing.T) {
	tg := newTarget(t)
	l := listen(t, tg.addr())
	client, server := pair(t, l, tg)
	send(t, client, "request")
	expect(t, server, "request")
	l.Drop()
	expectReset(t, client)
	expectReset(t, server)
	refused(t, l.Addr())
	tg.none(t)
	l.Heal()
	client, server = pair(t, l, tg)
	send(t, client, "again")
	expect(t, server, "again")
}

// TestRedisThroughCut: a Redis command through a cut link times out without
// reaching Redis; the client's connection, closed meanwhile, takes the held
// command with it; after Heal the client works again.
func TestRedisThroughCut(t *testing.T) {
	ctx := context.Background()
	srv, err := servers.StartRedis(ctx)
	if errors.Is(err, servers.ErrMissing) {
		t.Skip("redis-server is not installed:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	opt, err := redis.ParseURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t, opt.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: l.Addr(), MaxRetries: -1, PoolSize: 1,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	direct := redis.NewClient(&redis.Options{Addr: opt.Addr, MaxRetries: -1})
	t.Cleanup(func() { direct.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal("through the link:", err)
	}

	l.Cut()
	err = rdb.Incr(ctx, "counter").Err()
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("INCR through a cut link = %v, want a timeout", err)
	}
	waitFor(t, "the client to close its connection", func() bool { return l.Stats().Open == 0 })
	if n, err := direct.Exists(ctx, "counter").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS counter = %d, %v: the INCR crossed the cut", n, err)
	}
	l.Heal()
	if n, err := rdb.Incr(ctx, "counter").Result(); err != nil || n != 1 {
		t.Fatalf("INCR after Heal = %d, %v, want 1", n, err)
	}
}

// TestClose: whatever state its connections are in, Close closes them and
// the listener, and leaves no goroutine behind.
func TestClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes connections in some state and returns the ends that
		// Close must close.
		setup func(t *testing.T, l *topology.Link, tg *target) []net.Conn
	}{
		{"idle", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			client, server := pair(t, l, tg)
			return []net.Conn{client, server}
		}},
		{"cut with bytes held", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			client, server := pair(t, l, tg)
			l.Cut()
			send(t, client, "held")
			send(t, server, "held")
			waitFor(t, "the link to hold them", func() bool { return l.Stats().Up.Read+l.Stats().Down.Read == 8 })
			return []net.Conn{client, server}
		}},
		{"opened while cut", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			l.Cut()
			client := dial(t, l.Addr())
			send(t, client, "held")
			waitFor(t, "the link to hold them", func() bool { return l.Stats().Up.Read == 4 })
			return []net.Conn{client}
		}},
		{"closed during a cut", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			client, server := pair(t, l, tg)
			l.Cut()
			client.Close()
			waitFor(t, "the link to see the close", func() bool { return l.Stats().Open == 0 })
			return []net.Conn{server}
		}},
		{"slowed with chunks held", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			client, server := pair(t, l, tg)
			l.Slow(time.Hour)
			send(t, client, "held")
			send(t, server, "held")
			waitFor(t, "the link to hold them", func() bool { return l.Stats().Up.Read+l.Stats().Down.Read == 8 })
			return []net.Conn{client, server}
		}},
		{"dropped", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			pair(t, l, tg)
			l.Drop()
			refused(t, l.Addr())
			return nil
		}},
		{"target not reading", func(t *testing.T, l *topology.Link, tg *target) []net.Conn {
			client, server := pair(t, l, tg)
			flood(t, client)
			waitFor(t, "bytes to reach the target", func() bool { return l.Stats().Up.Written > 0 })
			return []net.Conn{server}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			before := runtime.NumGoroutine()
			l, err := topology.Listen(tg.addr())
			if err != nil {
				t.Fatal(err)
			}
			ends := tc.setup(t, l, tg)
			closeWithin(t, l)
			closeWithin(t, l)
			for _, c := range ends {
				closed(t, c)
			}
			if c, err := net.Dial("tcp", l.Addr()); err == nil {
				c.Close()
				t.Fatal("the link still accepts after Close")
			}
			waitFor(t, fmt.Sprintf("the goroutines to fall back to %d", before),
				func() bool { return runtime.NumGoroutine() <= before })
		})
	}
}

// TestFaultsWhileTraffic: faults set from another goroutine while clients
// talk through the link lose, duplicate or reorder nothing (and, under
// -race, race with nothing).
func TestFaultsWhileTraffic(t *testing.T) {
	target := echo(t)
	l := listen(t, target)
	stop := make(chan struct{})
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		for i := 0; ; i++ {
			select {
			case <-stop:
				l.Heal()
				l.Slow(0)
				return
			default:
			}
			switch i % 4 {
			case 0:
				l.Cut()
			case 1:
				l.Slow(time.Duration(i%3) * time.Millisecond)
			case 2:
				l.Heal()
			case 3:
				_ = l.Stats()
			}
			runtime.Gosched()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() { errs <- talk(l.Addr(), w, 200) })
	}
	wg.Wait()
	close(stop)
	<-faults
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// talk makes n numbered round trips through an echo target.
func talk(addr string, w, n int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	buf := make([]byte, 16)
	for i := range n {
		msg := fmt.Sprintf("w%02d-%012d", w, i)
		if _, err := io.WriteString(c, msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return fmt.Errorf("worker %d, round trip %d: %w", w, i, err)
		}
		if string(buf) != msg {
			return fmt.Errorf("worker %d sent %q, got back %q", w, msg, buf)
		}
	}
	return nil
}

// BenchmarkLinkRoundTrip: a 64-byte echo round trip, direct and through a
// link, to quote what the proxy costs.
func BenchmarkLinkRoundTrip(b *testing.B) {
	target := echo(b)
	l, err := topology.Listen(target)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	for _, bc := range []struct{ name, addr string }{{"direct", target}, {"link", l.Addr()}} {
		b.Run(bc.name, func(b *testing.B) {
			c := dial(b, bc.addr)
			msg, buf := payload(64, 3), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A target is a TCP server that hands each connection it accepts to the
// test, so that the test holds both ends of a link.
type target struct {
	ln    net.Listener
	conns chan net.Conn
}

func newTarget(t *testing.T) *target {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{ln: ln, conns: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tg.conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(tg.conns)
		for c := range tg.conns {
			c.Close()
		}
	})
	return tg
}

func (tg *target) addr() string { return tg.ln.Addr().String() }

// next returns the next connection the target accepted.
func (tg *target) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-tg.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(patience):
		t.Fatal("no connection reached the target")
		return nil
	}
}

// none fails if a connection reaches the target within quiet.
func (tg *target) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-tg.conns:
		c.Close()
		t.Fatal("a connection reached the target")
	case <-time.After(quiet):
	}
}

// echo starts a target that sends back what it receives, and passes on EOF.
func echo(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			})
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func listen(t *testing.T, target string) *topology.Link {
	l, err := topology.Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(tb testing.TB, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// pair opens a connection through l and returns its two ends.
func pair(t *testing.T, l *topology.Link, tg *target) (client, server net.Conn) {
	t.Helper()
	return dial(t, l.Addr()), tg.next(t)
}

// payload is n bytes that show any loss, duplication or reordering.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) + seed
	}
	return b
}

func send(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// sendAndClose writes b and half-closes c.
func sendAndClose(c net.Conn, b []byte) error {
	if _, err := c.Write(b); err != nil {
		return err
	}
	return c.(*net.TCPConn).CloseWrite()
}

// expect reads len(want) bytes from c and fails unless they are want.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: %v (got %q)", want, err, got)
	}
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// readAll reads c to its EOF and fails unless it got want.
func readAll(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading to EOF: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes before EOF, want %d (or in another order)", len(got), len(want))
	}
}

// silent fails if anything, even an EOF, arrives on c within quiet.
func silent(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	n, err := c.Read(make([]byte, 64))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a cut link let through %d bytes and %v", n, err)
	}
}

// expectReset fails unless reading c ends in a reset, not a clean EOF.
func expectReset(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	n, err := c.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %d bytes and %v, want a reset", n, err)
	}
}

// refused fails unless a connection to addr is reset, as soon as it is
// made or at the first read.
func refused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial %s: %v, want a reset", addr, err)
		}
		return
	}
	defer c.Close()
	expectReset(t, c)
}

// closed fails unless c's peer has closed it: reading it ends, other than
// by a timeout, once any bytes it holds are read.
func closed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the link left a connection open")
	}
}

// flood writes to c from another goroutine until writing fails, and makes
// the test wait for it, so that it ends before the goroutines are counted.
func flood(t *testing.T, c net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.SetWriteDeadline(time.Now().Add(patience))
		b := make([]byte, 64<<10)
		for {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { <-done })
}

// closeWithin closes l, failing if that takes more than patience: Close
// waits for the link's goroutines, so a goroutine that does not end hangs it.
func closeWithin(t *testing.T, l *topology.Link) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal("Close:", err)
		}
	case <-time.After(patience):
		t.Fatalf("Close did not return within %v: a goroutine of the link did not end", patience)
	}
}

// waitFor polls ok until it holds, failing after patience.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", patience, what)
		}
		<-tick.C
	}
}
