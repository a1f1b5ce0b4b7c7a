// Command go-redsync is a lock adapter (docs/adapter-protocol.md) for
// redsync's Mutex on one Redis, built at four versions for two findings
// (docs/findings.md). "redsync Extend and Unlock always report success":
// go.mod pins v4.0.4, the fix; v4.0.3.mod the version before it, whose
// Extend says true of a lock another holder has. "An extend answered after
// the lease ended says extended": v4.3.0.mod, whose Extend checks no
// validity time; v4.4.1.mod, which does (ErrExtendFailed, answered info:
// this source builds at v4.0.3 too, which has no such error).
//
//	go build -o redsync-v4.0.4 .
//	go build -modfile v4.0.3.mod -o redsync-v4.0.3 .
//	go build -modfile v4.3.0.mod -o redsync-v4.3.0 .
//	go build -modfile v4.4.1.mod -o redsync-v4.4.1 .
//
// It renews (hello renewal: true): each renew request is one Extend, and
// its answer is what Extend returned, as a careful user heeds it.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	goredislib "github.com/go-redis/redis/v8"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v8"
)

// message is a request or an answer: the fields of both, as the protocol
// names them.
type message struct {
	Type      string `json:"type"`
	ID        int64  `json:"id,omitempty"`
	InReplyTo *int64 `json:"in_reply_to,omitempty"`
	RedisURL  string `json:"redis_url,omitempty"`
	Lock      string `json:"lock,omitempty"`
	LeaseMS   int64  `json:"lease_ms,omitempty"`
	WaitMS    int64  `json:"wait_ms,omitempty"`
	RetryMS   int64  `json:"retry_ms,omitempty"`
	// ClientName is what its connections call themselves (CLIENT
	// SETNAME), for the lock server's record.
	ClientName string `json:"client_name,omitempty"`
	Token      string `json:"token,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Name       string `json:"name,omitempty"`
	Version    string `json:"version,omitempty"`
	Library    string `json:"library,omitempty"`
	Renewal    bool   `json:"renewal,omitempty"`
}

type adapter struct {
	rs      *redsync.Redsync
	retry   time.Duration
	mutexes map[string]*redsync.Mutex // by token
}

func main() {
	a := &adapter{mutexes: map[string]*redsync.Mutex{}}
	in, out := bufio.NewScanner(os.Stdin), json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req message
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintf(os.Stderr, "go-redsync: %v\n", err)
			continue
		}
		ans := a.answer(req)
		ans.InReplyTo = &req.ID
		if err := out.Encode(ans); err != nil {
			os.Exit(1)
		}
	}
}

func (a *adapter) answer(req message) message {
	switch req.Type {
	case "init":
		opt, err := goredislib.ParseURL(req.RedisURL)
		if err != nil {
			return message{Type: "error", Reason: err.Error()}
		}
		opt.OnConnect = setName(req.ClientName)
		a.rs, a.retry = redsync.New(goredis.NewPool(goredislib.NewClient(opt))), time.Duration(req.RetryMS)*time.Millisecond
		return message{Type: "hello", Name: "go-redsync", Version: "1", Library: library(), Renewal: true}
	case "acquire":
		return a.acquire(req)
	case "release", "renew":
		m := a.mutexes[req.Token]
		if m == nil {
			return message{Type: "fail", Reason: "no grant with token " + req.Token}
		}
		act := m.Extend
		if req.Type == "release" {
			delete(a.mutexes, req.Token)
			act = m.Unlock
		}
		switch ok, err := act(); {
		case ok:
			return message{Type: "ok"}
		case err != nil && !errors.Is(err, redsync.ErrFailed):
			return message{Type: "info", Reason: err.Error()}
		}
		return message{Type: "fail", Reason: "not-held"} // redsync cannot tell expired from taken
	}
	return message{Type: "error", Reason: "no request type " + req.Type}
}

// acquire tries the lock every retry until it is had or wait_ms have
// passed: one Lock of one try each time, as redsync's own retries would.
func (a *adapter) acquire(req message) message {
	lease, deadline := time.Duration(req.LeaseMS)*time.Millisecond, time.Now().Add(time.Duration(req.WaitMS)*time.Millisecond)
	for {
		token := rand.Text() // redsync v4.0.3 has no Mutex.Value: the token is ours
		m := a.rs.NewMutex(req.Lock, redsync.WithExpiry(lease), redsync.WithTries(1),
			redsync.WithGenValueFunc(func() (string, error) { return token, nil }))
		err := m.LockContext(context.Background())
		switch {
		case err == nil:
			a.mutexes[token] = m
			return message{Type: "ok", Token: token}
		case !errors.Is(err, redsync.ErrFailed):
			return message{Type: "info", Reason: err.Error()} // its SET may have landed
		case time.Now().After(deadline):
			return message{Type: "fail", Reason: "busy"}
		}
		time.Sleep(a.retry)
	}
}

// library names redsync's version, as this binary was built with it.
func library() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/go-redsync/redsync/v4" {
				return "redsync " + d.Version
			}
		}
	}
	return "redsync (version unknown)"
}

// setName has each connection name itself (CLIENT SETNAME) as it opens:
// the worker's name, which the lock server's record gives its commands.
// "" leaves them unnamed.
func setName(name string) func(context.Context, *goredislib.Conn) error {
	if name == "" {
		return nil
	}
	return func(ctx context.Context, cn *goredislib.Conn) error { return cn.ClientSetName(ctx, name).Err() }
}
