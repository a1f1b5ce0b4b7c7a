package adapter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// A Lock is the adapter's side of the protocol, for a Go adapter that
// Serve runs: each method answers one request. Acquire keeps trying for
// up to wait, then answers Fail(ReasonBusy).
type Lock interface {
	Init(ctx context.Context, s Setup) (Hello, error)
	Acquire(ctx context.Context, lock string, lease, wait time.Duration) Answer
	Release(ctx context.Context, lock, token string) Answer
	Renew(ctx context.Context, lock, token string, lease time.Duration) Answer
}

// OK is a request done; FailWith one certainly not done; Unknown one that
// may or may not have been.
func OK() Answer                      { return Answer{Type: TypeOK} }
func FailWith(reason string) Answer   { return Answer{Type: TypeFail, Reason: reason} }
func Unknown(reason string) Answer    { return Answer{Type: TypeInfo, Reason: reason} }
func notUnderstood(why string) Answer { return Answer{Type: TypeError, Reason: why} }

// Serve answers the requests read from r on w, one at a time, until r
// ends: the adapter side of the protocol for a lock written in Go.
func Serve(ctx context.Context, r io.Reader, w io.Writer, l Lock) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		var req Request
		var a Answer
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			// No id to answer to: the request is lost; say so where a
			// person will read it.
			return fmt.Errorf("request %q is not JSON: %w", clip(sc.Bytes()), err)
		}
		a = answer(ctx, l, req)
		id := req.ID
		a.InReplyTo = &id
		line, err := json.Marshal(a)
		if err != nil {
			return err
		}
		bw.Write(append(line, '\n'))
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write answer: %w", err)
		}
	}
	return sc.Err()
}

// answer is l's answer to req.
func answer(ctx context.Context, l Lock, req Request) Answer {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	switch {
	case req.Type == "init":
		h, err := l.Init(ctx, Setup{RedisURL: req.RedisURL, RedisURLs: req.RedisURLs, PostgresURL: req.PostgresURL, ZooKeeper: req.ZooKeeper, Etcd: req.EtcdEndpoints, Sentinel: req.Sentinel, Lock: req.Lock, Lease: ms(req.LeaseMS), Retry: ms(req.RetryMS),
			ClientName: req.ClientName})
		if err != nil {
			return notUnderstood(err.Error())
		}
		return Answer{Type: TypeHello, Hello: h}
	case req.Lock == "":
		return notUnderstood(fmt.Sprintf("%s request without a lock", req.Type))
	case req.Type == "acquire" && req.LeaseMS > 0:
		return l.Acquire(ctx, req.Lock, ms(req.LeaseMS), ms(req.WaitMS))
	case req.Type == "release" && req.Token != "":
		return l.Release(ctx, req.Lock, req.Token)
	case req.Type == "renew" && req.Token != "" && req.LeaseMS > 0:
		return l.Renew(ctx, req.Lock, req.Token, ms(req.LeaseMS))
	}
	return notUnderstood(fmt.Sprintf("no request %q with those fields (want init, acquire with lease_ms, release with token, renew with token and lease_ms)", req.Type))
}
