package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestZooKeeperLeavesNothing: a run on ZooKeeper's lock ended by a Ctrl-C
// to its process group, or by SIGKILL of hiatus itself, while its workers
// take turns, leaves no ZooKeeper server running; the interrupted one
// removes its server's directory, and the next run removes the killed
// one's.
func TestZooKeeperLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*exec.Cmd) error
	}{
		{"ctrl-c", func(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }},
		{"kill-9", func(cmd *exec.Cmd) error { return cmd.Process.Kill() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, root := startRun(t, "--lock", "zookeeper", "--lease", "1s", "--nemesis", "none", "--time-limit", "5m")
			waitJournal(t, cmd, root, ":f :write")
			dirs := zooDirsOf(t, cmd.Process.Pid)
			jvms := zooServers(t, dirs)
			if len(dirs) != 1 || len(jvms) != 1 {
				t.Fatalf("the run's ZooKeeper: directories %v, servers %v; want one of each", dirs, jvms)
			}
			if err := tc.end(cmd); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			gone(t, jvms)
			if tc.name == "ctrl-c" {
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
					t.Errorf("exit %v after Ctrl-C, want %d", err, exitInterrupted)
				}
			} else {
				// Any run removes what runs whose process died left, and the
				// other packages' tests start runs all along: one of theirs
				// may sweep the directory first (seen once in 7 suites).
				if _, err := os.Stat(dirs[0]); err != nil {
					t.Logf("the killed run's server directory was gone before the next run (%v): another run swept it", err)
				}
				if code, out, errOut := hiatus(t, "run", "--store", t.TempDir(), "--time-limit", "1s", "--nemesis", "none", "--lease", "10s"); code != exitValid {
					t.Fatalf("the next run: exit %d\n%s%s", code, out, errOut)
				}
			}
			if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
				t.Errorf("the ZooKeeper server's directory %s is still there (%v)", dirs[0], err)
			}
		})
	}
}

// zooDirsOf are the ZooKeeper server directories in the temporary directory
// that the process pid made (their owner file names it).
func zooDirsOf(t *testing.T, pid int) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(os.TempDir(), "hiatus-zookeeper-*"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, d := range names {
		if b, err := os.ReadFile(filepath.Join(d, "hiatus.owner")); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// zooServers are the PIDs of the processes whose command line names a
// zoo.cfg in one of dirs: the servers started there.
func zooServers(t *testing.T, dirs []string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		for _, d := range dirs {
			if bytes.Contains(b, []byte(filepath.Join(d, "zoo.cfg"))) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
