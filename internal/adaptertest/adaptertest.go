// Package adaptertest makes a test binary a lock adapter, well behaved or
// not, for the tests of the protocol and of runs with adapters: real
// processes that speak (or break) the protocol, as a user's adapter might.
package adaptertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/internal/shellquote"
	"github.com/redis/go-redis/v9"
)

// Env names the behaviour a test binary started as an adapter takes.
const Env = "HIATUS_TEST_ADAPTER"

// Command is the adapter command that runs this test binary as an adapter
// behaving as mode: setnx (well behaved: client.SetNX over the protocol),
// exit (exits at start), hang (never answers), garbage-hello, twice
// (answers each acquire twice), garbage-after=N, mute-after=N and
// die-after=N (at the Nth acquire: writes garbage, stops answering, exits),
// and late-grant-after=N (at the Nth acquire: answers busy at once, then
// takes the lock all the same, for nobody, as a library whose SET lands
// after it gave up: npm simple-redis-mutex 3.0.0's failAfter).
func Command(mode string) string {
	return fmt.Sprintf("env %s=%s %s", Env, mode, os.Args[0])
}

// Fields are answer fields that CommandWith has an adapter put into its
// hello, or into each grant (an ok answer to an acquire), over what it
// would say: a hello's name, a fence out of the protocol.
type Fields map[string]any

// Env names of the fields CommandWith sets.
const (
	helloEnv = "HIATUS_TEST_ADAPTER_HELLO"
	grantEnv = "HIATUS_TEST_ADAPTER_GRANT"
)

// CommandWith is Command, its hello and its grants carrying the fields
// given (either may be nil).
func CommandWith(mode string, hello, grant Fields) string {
	cmd := fmt.Sprintf("env %s=%s", Env, mode)
	for _, f := range []struct {
		env    string
		fields Fields
	}{{helloEnv, hello}, {grantEnv, grant}} {
		if f.fields != nil {
			b, err := json.Marshal(f.fields)
			if err != nil {
				panic(err) // a test's own literal
			}
			cmd += " " + f.env + "=" + shellquote.Quote(string(b))
		}
	}
	return cmd + " " + os.Args[0]
}

// overlaid is the answer line to a request of type kind, with the fields
// CommandWith gave for a hello or a grant.
func overlaid(kind, line string) (string, error) {
	switch {
	case kind == "init":
		return overlay(line, helloEnv)
	case kind == "acquire" && strings.Contains(line, `"type":"ok"`):
		return overlay(line, grantEnv)
	}
	return line, nil
}

// overlay puts the fields of the JSON object env names (if set) into the
// answer line, over its own.
func overlay(line, env string) (string, error) {
	over, ok := os.LookupEnv(env)
	if !ok {
		return line, nil
	}
	var a, o map[string]any
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		return "", err
	}
	if err := json.Unmarshal([]byte(over), &o); err != nil {
		return "", fmt.Errorf("%s: %w", env, err)
	}
	maps.Copy(a, o)
	b, err := json.Marshal(a)
	return string(b), err
}

// Serve makes this process the adapter Command started, and returns at
// once when it was not started as one. Call it first in TestMain.
func Serve() {
	mode, ok := os.LookupEnv(Env)
	if !ok {
		return
	}
	if err := serve(mode); err != nil {
		fmt.Fprintf(os.Stderr, "adaptertest: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serve(mode string) error {
	name, n := mode, 0
	if i := strings.IndexByte(mode, '='); i > 0 {
		name = mode[:i]
		var err error
		if n, err = strconv.Atoi(mode[i+1:]); err != nil {
			return fmt.Errorf("mode %q: %w", mode, err)
		}
	}
	if done, err := atStart(name); done {
		return err
	}
	// The well-behaved adapter, behind a layer that misbehaves as asked.
	reqR, reqW := io.Pipe()
	ansR, ansW := io.Pipe()
	newLock := func(cfg client.LockConfig) (client.Lock, error) {
		return client.NewLock(context.Background(), "setnx", cfg)
	}
	go func() {
		err := client.ServeAdapter(context.Background(), reqR, ansW, "adaptertest-"+mode, newLock)
		ansW.CloseWithError(err)
	}()
	answers := bufio.NewScanner(ansR)
	acquires := 0
	var redisURL string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var req struct {
			Type     string `json:"type"`
			ID       int64  `json:"id"`
			Lock     string `json:"lock"`
			RedisURL string `json:"redis_url"`
			LeaseMS  int64  `json:"lease_ms"`
			WaitMS   int64  `json:"wait_ms"`
		}
		_ = json.Unmarshal(sc.Bytes(), &req)
		if req.Type == "acquire" {
			acquires++
		}
		if req.Type == "init" {
			redisURL = req.RedisURL
		}
		due := req.Type == "acquire" && acquires >= n
		switch {
		case due && name == "late-grant-after" && acquires == n:
			fmt.Printf(`{"type":"fail","in_reply_to":%d,"reason":"busy"}`+"\n", req.ID)
			go grantLate(redisURL, req.Lock, req.LeaseMS, req.WaitMS)
			continue
		case due && name == "garbage-after":
			fmt.Println("{not json")
			continue
		case due && name == "mute-after":
			continue
		case due && name == "die-after":
			fmt.Fprintln(os.Stderr, "adaptertest: dying mid-run, as asked")
			os.Exit(4)
		}
		if _, err := reqW.Write(append(sc.Bytes(), '\n')); err != nil {
			return err
		}
		if !answers.Scan() {
			return fmt.Errorf("the adapter behind ended: %v", answers.Err())
		}
		line, err := overlaid(req.Type, answers.Text())
		if err != nil {
			return err
		}
		fmt.Println(line)
		if name == "twice" && req.Type == "acquire" {
			fmt.Println(line)
		}
	}
	reqW.Close()
	return sc.Err()
}

// atStart acts out the modes that never get to serve a request, and says
// whether name was one.
func atStart(name string) (bool, error) {
	switch name {
	case "exit":
		fmt.Fprintln(os.Stderr, "adaptertest: exiting at start, as asked")
		os.Exit(3)
	case "hang":
		_, err := io.Copy(io.Discard, os.Stdin)
		return true, err
	case "garbage-hello":
		fmt.Println("hello there")
		_, err := io.Copy(io.Discard, os.Stdin)
		return true, err
	}
	return false, nil
}

// grantLate takes the lock for nobody: SET NX PX, every 5 ms for wait_ms,
// until it lands.
func grantLate(redisURL, lock string, leaseMS, waitMS int64) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	deadline := time.Now().Add(time.Duration(waitMS) * time.Millisecond)
	for time.Now().Before(deadline) {
		if ok, _ := rdb.SetNX(ctx, lock, "nobody", time.Duration(leaseMS)*time.Millisecond).Result(); ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Marked returns command run with an environment variable no other
// process has, and that variable: what a test finds its leftovers by.
func Marked(command string) (marked, mark string) {
	mark = fmt.Sprintf("HIATUS_TEST_MARK=%d", rand.Int64())
	return "env " + mark + " " + command, mark
}

// Leftovers lists, by PID, the command lines of the processes whose
// environment holds mark.
func Leftovers(mark string) map[int]string {
	found := map[int]string{}
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range envs {
		env, err := os.ReadFile(f)
		pid, perr := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err == nil && perr == nil && bytes.Contains(env, []byte(mark+"\x00")) {
			cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
			found[pid] = string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
		}
	}
	return found
}

// BuildGo builds the Go lock adapter in dir, a module of its own, into out:
// with its go.mod, or with modfile when not "" (a second pin of its
// libraries, as adapters/go-redsync's v4.0.3.mod).
func BuildGo(dir, modfile, out string) error {
	args := []string{"build", "-o", out}
	if modfile != "" {
		args = append(args, "-modfile", modfile)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", strings.Join(args, " "), dir, err, b)
	}
	return nil
}
