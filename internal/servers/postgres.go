package servers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// PostgresBin finds the directory holding initdb and postgres: on PATH, else
// the newest /usr/lib/postgresql/*/bin.
func PostgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("initdb and postgres: %w (on Debian: apt-get install postgresql)", ErrMissing)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// StartPostgres runs initdb into a private temporary directory and starts
// postgres on a free loopback port with trust authentication for the user
// postgres. initdb and postgres refuse to run as root, so as root they run as
// the unprivileged user postgres. fsync is off: the data outlives a crash of
// the server (the kernel keeps the writes), which is all the nemesis does,
// and runs are not slowed by the disk.
func StartPostgres(ctx context.Context) (*Server, error) { return StartPostgresOn(ctx, nil) }

// StartPostgresOn starts PostgreSQL as StartPostgres does, on host h; nil
// for this machine.
func StartPostgresOn(ctx context.Context, h Host) (*Server, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("postgres: running as root needs the user postgres to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := tempDir("hiatus-postgres-", cred)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-sync", "--no-instructions")
	// As the server: a terminal's Ctrl-C reaches hiatus alone, which
	// ends initdb through ctx, and initdb ends if hiatus dies.
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if h != nil {
		// Its clients are on other hosts of the test network, which
		// initdb's trust for loopback alone would turn away.
		if err := appendFile(filepath.Join(data, "pg_hba.conf"), "host all all 0.0.0.0/0 trust\n"); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	// SIGINT is postgres's fast shutdown (SIGTERM would wait for clients);
	// SIGQUIT its immediate shutdown, a crash that recovery repairs.
	s := &Server{name: "postgres", host: h, bin: filepath.Join(bin, "postgres"), cred: cred, dir: dir,
		log: filepath.Join(dir, "postgres.log"), quit: syscall.SIGINT, crash: syscall.SIGQUIT}
	s.ready = s.postgresReady
	s, err = launch(ctx, s, func(port int) { s.postgresOn(s.ip(), port, data, dir) })
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// appendFile adds text at the end of the file at path.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// postgresReady says whether the PostgreSQL s can be connected to.
func (s *Server) postgresReady(ctx context.Context) error {
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// postgresOn sets the address, URL and arguments of the PostgreSQL s on
// ip and port, with its data in data and its socket in dir: a throwaway
// server, fast and unsafe (no fsync), with a session for many workers.
func (s *Server) postgresOn(ip string, port int, data, dir string) {
	s.Addr = net.JoinHostPort(ip, strconv.Itoa(port))
	s.URL = "postgres://postgres@" + s.Addr + "/postgres?sslmode=disable"
	s.args = []string{"-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=" + ip,
		"-c", "unix_socket_directories=" + dir, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300"}
}
