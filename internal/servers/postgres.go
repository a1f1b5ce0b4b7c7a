package servers

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
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
// postgres on a free loopback port, where a client must give the password
// of the server's own, a random one, which its URL carries: a local user
// who could connect as the superuser could run commands as the server's
// user (COPY … TO PROGRAM). initdb and postgres refuse to run as root, so
// as root they run as the unprivileged user postgres, which owns the
// server's data and nothing else of the directory (tempDir). fsync is off:
// the data outlives a crash of the server (the kernel keeps the writes),
// which is all the nemesis does, and runs are not slowed by the disk.
func StartPostgres(ctx context.Context) (*Server, error) { return StartPostgresOn(ctx, nil) }

// StartPostgresOn starts PostgreSQL as StartPostgres does, on host h; nil
// for this machine.
func StartPostgresOn(ctx context.Context, h Host) (*Server, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCred()
	if err != nil {
		return nil, err
	}
	password, verifier, err := newPassword()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	d, err := tempDir("hiatus-postgres-", cred)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	data := d.Join("data")
	if err := errors.Join(d.WriteFile(hbaFile, []byte(hbaConf)), initdb(ctx, bin, d.Path(), data, verifier, cred)); err != nil {
		removeDir(d)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// SIGINT is postgres's fast shutdown (SIGTERM would wait for clients);
	// SIGQUIT its immediate shutdown, a crash that recovery repairs.
	s := &Server{name: "postgres", host: h, bin: filepath.Join(bin, "postgres"), cred: cred, dir: d.Path(), home: d,
		log: d.Join("postgres.log"), quit: syscall.SIGINT, crash: syscall.SIGQUIT}
	s.ready = s.postgresReady
	s, err = launch(ctx, s, func(port int) { s.postgresOn(s.ip(), port, data, d.Join(hbaFile), password) })
	if err != nil {
		removeDir(d)
		return nil, err
	}
	return s, nil
}

// postgresCred is the user the server runs as: postgres when this process
// is root's, else nil for this process's own.
func postgresCred() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("postgres: running as root needs the user postgres to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// initdb makes the server's data in data, as cred's user, in dir, and
// gives the superuser postgres the password whose verifier is verifier:
// through the standard input of postgres in single-user mode, so that not
// even the verifier is on a command line or in a file. initdb's own
// pg_hba.conf rejects every client; the server reads hiatus's (hbaFile).
func initdb(ctx context.Context, bin, dir, data, verifier string, cred *syscall.Credential) error {
	for _, c := range []struct {
		argv  []string
		stdin string
	}{
		{[]string{filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=reject", "--encoding=UTF8", "--no-sync", "--no-instructions"}, ""},
		{[]string{filepath.Join(bin, "postgres"), "--single", "-D", data, "-c", "exit_on_error=on", "-c", "fsync=off", "postgres"}, passwordSQL(verifier)},
	} {
		cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
		// As the server: a terminal's Ctrl-C reaches hiatus alone, which
		// ends the command through ctx, and the command ends if hiatus
		// dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(c.stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", filepath.Base(c.argv[0]), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// hbaFile, in the server's directory, is the server's pg_hba.conf
// (hba_file), this process's and so out of reach of the server's user:
// every client over TCP with the password, scram-sha-256; the server
// listens on no Unix socket.
const (
	hbaFile = "pg_hba.conf"
	hbaConf = "# hiatus's throwaway PostgreSQL: a client over TCP with its password\n" +
		"host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n"
)

// newPassword is a random password for a server, and its SCRAM-SHA-256
// verifier, which is all the server keeps of it: 128 bits, as hex, which
// a URL and SQL take as they are.
func newPassword() (password, verifier string, err error) {
	b := make([]byte, 16)
	salt := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	if _, err := rand.Read(salt); err != nil {
		return "", "", err
	}
	password = hex.EncodeToString(b)
	return password, scramVerifier(password, salt, 4096), nil
}

// scramVerifier is the SCRAM-SHA-256 verifier PostgreSQL keeps of
// password (RFC 5802, RFC 7677), in the form it takes in place of one:
// the client's key cannot be had from it, so it lets no one log in.
func scramVerifier(password string, salt []byte, iterations int) string {
	salted, _ := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key")))
}

// passwordSQL is the statement that gives the superuser the password
// whose verifier is verifier (base64 and punctuation: no quote).
func passwordSQL(verifier string) string {
	return "ALTER ROLE postgres PASSWORD '" + verifier + "';\n"
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
// ip and port, with its data in data, its pg_hba.conf hba and password
// the superuser's: a throwaway server, fast and unsafe (no fsync), with a
// session for many workers, on no Unix socket (no client uses one).
func (s *Server) postgresOn(ip string, port int, data, hba, password string) {
	s.Addr = net.JoinHostPort(ip, strconv.Itoa(port))
	s.URL = (&url.URL{Scheme: "postgres", User: url.UserPassword("postgres", password), Host: s.Addr,
		Path: "/postgres", RawQuery: "sslmode=disable"}).String()
	s.args = []string{"-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=" + ip,
		"-c", "hba_file=" + hba, "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300"}
}
