package servers

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hiatus-dev/hiatus/internal/files"
)

// ErrNoFakeClock is returned by JumpClock for a server started without a
// fake clock.
var ErrNoFakeClock = errors.New("server has no fake clock")

// clockFile, in the directory of a server with a fake clock, holds the
// offset of its clock from the real one in libfaketime's format ("+10.5",
// "-3.000000000"). libfaketime reads it at every clock call
// (FAKETIME_NO_CACHE), so a new offset takes effect at once.
const clockFile = "faketime"

// JumpClock sets the server's wall clock to the real clock plus offset, at
// once: 0 puts it back. Its monotonic clock does not move, as when a
// machine's clock is stepped. The offset holds over Crash and Restart.
func (s *Server) JumpClock(offset time.Duration) error {
	if s.dir == "" {
		return fmt.Errorf("jump %s's clock: server stopped", s.name)
	}
	if s.node != nil {
		if !s.clock {
			return fmt.Errorf("jump %s's clock: %w", s.name, ErrNoFakeClock)
		}
		if err := s.jumpOnNode(offset); err != nil {
			return fmt.Errorf("jump %s's clock: %w", s.name, err)
		}
		return nil
	}
	if _, err := s.home.Lstat(clockFile); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("jump %s's clock: %w", s.name, ErrNoFakeClock)
	} else if err != nil {
		return fmt.Errorf("jump %s's clock: %w", s.name, err)
	}
	if err := writeClock(s.home, offset); err != nil {
		return fmt.Errorf("jump %s's clock: %w", s.name, err)
	}
	return nil
}

// writeClock replaces the clock file in the server's directory d by a
// rename, so that libfaketime never reads it half written.
func writeClock(d *files.Dir, offset time.Duration) error {
	return d.WriteFile(clockFile, []byte(clockOffset(offset)+"\n"))
}

// clockOffset is offset as the clock file holds it: "+10.500000000".
func clockOffset(offset time.Duration) string {
	sign := "+"
	if offset < 0 {
		sign, offset = "-", -offset
	}
	return fmt.Sprintf("%s%d.%09d", sign, offset/time.Second, offset%time.Second)
}

// fakeClockArgs are env(1)'s arguments that run bin under libfaketime with
// the LD_PRELOAD preload, its offset read from file at every clock call.
func fakeClockArgs(preload, file, bin string) []string {
	return []string{"-u", "FAKETIME", "LD_PRELOAD=" + preload,
		"FAKETIME_TIMESTAMP_FILE=" + file, "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", bin}
}

// fakeClockCommand returns the program and leading arguments that run bin
// under libfaketime with the LD_PRELOAD preload, its offset read from a
// clock file it makes in the server's directory d, at 0. The environment
// goes on the command line, through env(1), so that Restart sets it again.
func fakeClockCommand(bin, preload string, d *files.Dir) (string, []string, error) {
	env, err := exec.LookPath("env")
	if err != nil {
		return "", nil, fmt.Errorf("env: %w", ErrMissing)
	}
	if err := writeClock(d, 0); err != nil {
		return "", nil, fmt.Errorf("make the fake clock: %w", err)
	}
	return env, fakeClockArgs(preload, d.Join(clockFile), bin), nil
}

// fakeClockPreload returns the LD_PRELOAD that runs bin under libfaketime:
// libfaketimeMT, then the C library, the first of each found in dirs (glob
// patterns) built for bin's architecture. The C library must follow:
// under libfaketime alone, redis-server hangs at start, with "Unexpected
// recursive calls to clock_gettime()" from jemalloc.
func fakeClockPreload(bin string, dirs []string) (string, error) {
	arch, err := archOf(bin)
	if err != nil {
		return "", err
	}
	faketime := findLib(arch, dirs, "faketime/libfaketimeMT.so.1")
	if faketime == "" {
		return "", fmt.Errorf("libfaketimeMT.so.1: %w (on Debian: apt-get install libfaketime)", ErrMissing)
	}
	libc := findLib(arch, dirs, "libc.so.6")
	if libc == "" {
		return "", fmt.Errorf("libc.so.6, for libfaketime: %w", ErrMissing)
	}
	return faketime + " " + libc, nil
}

// libDirs are where shared libraries are, multiarch directories first.
func libDirs() []string {
	return []string{"/usr/lib/*", "/lib/*", "/usr/lib64", "/lib64", "/usr/lib", "/lib",
		"/usr/local/lib/*", "/usr/local/lib"}
}

// An arch is what an ELF file was built for.
type arch struct {
	class   elf.Class
	machine elf.Machine
}

func archOf(path string) (arch, error) {
	f, err := elf.Open(path)
	if err != nil {
		return arch{}, err
	}
	defer f.Close()
	return arch{f.Class, f.Machine}, nil
}

// findLib returns the first file named name in dirs built for a, or "".
func findLib(a arch, dirs []string, name string) string {
	for _, d := range dirs {
		paths, _ := filepath.Glob(filepath.Join(d, name))
		for _, p := range paths {
			if b, err := archOf(p); err == nil && b == a {
				return p
			}
		}
	}
	return ""
}
