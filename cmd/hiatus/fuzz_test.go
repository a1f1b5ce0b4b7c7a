package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheck feeds arbitrary bytes to `hiatus check` as a history: whatever
// the input, the command answers with a verdict (0, 1, 2) or a clear refusal
// (254), never a panic or an internal error (255).
//
//	go test ./cmd/hiatus -run '^$' -fuzz FuzzCheck -fuzztime 60s
func FuzzCheck(f *testing.F) {
	section := `{:index 0, :time 1, :type :invoke, :process 0, :f :acquire, :value nil}
{:index 1, :time 2, :type :ok, :process 0, :f :acquire, :value nil, :lease-ms 500, :token "a"}
{:index 2, :time 3, :type :invoke, :process 0, :f :read, :value nil}
{:index 3, :time 4, :type :ok, :process 0, :f :read, :value 0}
{:index 4, :time 5, :type :invoke, :process 0, :f :write, :value 1, :section 1}
{:index 5, :time 6, :type :ok, :process 0, :f :write, :value 1, :section 1}
{:index 6, :time 7, :type :invoke, :process 0, :f :release, :value nil}
{:index 7, :time 8, :type :ok, :process 0, :f :release, :value nil}
{:index 8, :time 9, :type :info, :process :nemesis, :f :pause, :value {:kind :sigstop, :process 0, :ms 800}}
{:index 9, :time 10, :type :invoke, :process 1, :f :read, :value nil, :final? true}
{:index 10, :time 11, :type :ok, :process 1, :f :read, :value 1, :final? true}
`
	for _, seed := range []string{
		section,
		section[:len(section)/2], // truncated mid-op
		"[{:type :invoke, :f :cas, :value [0 1], :process 0} {:type :ok, :f :cas, :value [0 1], :process 0}]",
		"({:type :invoke :f :acquire :process 0} {:type :fail :f :acquire :process 0})",
		"{:type :ok, :process 0, :f :write, :value 3}\n",
		"{:type :invoke, :f :add, :value 1, :process 0}\n{:type :ok, :f :read, :value 5, :process 1}\n",
		"; nothing but a comment\n",
		"{:type",
		"",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "history.edn")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := hiatus(t, "check", "--timeout", "2s", path)
		if code == exitInternal || strings.Contains(errOut, "panic") {
			t.Fatalf("exit %d on input %q\n%s%s", code, data, out, errOut)
		}
	})
}
