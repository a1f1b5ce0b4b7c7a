package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/web"
)

// TestServe: the server answers until its context ends, then stops and
// frees its address; a store that cannot be read (or is no directory: a
// FIFO is refused at once, not waited on), an address that cannot be had
// or an argument is the user's to fix.
func TestServe(t *testing.T) {
	h, err := web.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
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
	notDir, fifo := filepath.Join(t.TempDir(), "file"), filepath.Join(t.TempDir(), "fifo")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", "/nonexistent/store"}, "/nonexistent/store"},
		{[]string{"serve", "--store", notDir}, "not a directory"},
		{[]string{"serve", "--store", fifo}, "not a directory"},
		{[]string{"serve", "--store", t.TempDir(), "--addr", busy.Addr().String()}, "--addr"},
		{[]string{"serve", "extra"}, "flags only"},
	} {
		code, _, stderr := hiatus(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d naming %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestServeStopsWhenHung: a request that never ends does not keep serve
// from stopping: once its context ends, serve gives the requests in flight
// a moment, then closes every connection and returns no error (exit 0).
func TestServeStopsWhenHung(t *testing.T) {
	var once sync.Once
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		once.Do(func() { close(entered) })
		<-release
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, h) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		// The help promises a second; twice that leaves a loaded machine room.
		if took := time.Since(start); err != nil || took > 2*time.Second {
			t.Errorf("serve ended with %v after %v, want nil within a second", err, took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop with a request in flight")
	}
}

// TestServeInterrupted: `hiatus serve` as a process, over a store with
// FIFOs where files should be, answers every request at once and ends with
// exit 0 at Ctrl-C.
func TestServeInterrupted(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "r", "20261201T094801.339Z")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "test.edn"), []byte(`{:name "r"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.edn", "history.edn"} {
		if err := syscall.Mkfifo(filepath.Join(run, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "serve", "--store", root, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`http://([^/]+)/`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("serve said %q (%v), not where it listens", line, err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/", http.StatusOK},
		{"/run/r/20261201T094801.339Z", http.StatusOK},
		{"/file/r/20261201T094801.339Z/history.edn", http.StatusNotFound},
		{"/file/r/20261201T094801.339Z/results.edn", http.StatusNotFound},
	} {
		resp, err := client.Get("http://" + m[1] + tc.path)
		if err != nil {
			t.Errorf("GET %s: %v", tc.path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.code)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve ended with %v at Ctrl-C, want exit 0; stderr %q", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not end at Ctrl-C")
	}
}
