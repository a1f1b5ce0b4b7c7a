package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/web"
)

// TestServe: the server answers until its context ends, then stops and
// frees its address; a store that cannot be read, an address that cannot be
// had or an argument is the user's to fix.
func TestServe(t *testing.T) {
	h, err := web.Handler(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, h) }()
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "No runs here yet") {
		t.Errorf("GET /: %d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve ended with %v", err)
	}
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Errorf("still serving after its context ended")
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", "/nonexistent/store"}, "/nonexistent/store"},
		{[]string{"serve", "--store", t.TempDir(), "--addr", busy.Addr().String()}, "--addr"},
		{[]string{"serve", "extra"}, "flags only"},
	} {
		code, _, stderr := hiatus(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}
