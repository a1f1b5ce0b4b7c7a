package servers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// StartRedis starts redis-server on a free loopback port, keeping nothing on
// disk: a restart after Crash starts empty, every lease and key gone.
func StartRedis(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w (on Debian: apt-get install redis-server)", ErrMissing)
	}
	dir, err := tempDir("hiatus-redis-", nil)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	s := &Server{name: "redis-server", bin: bin, dir: dir, log: filepath.Join(dir, "redis.log"),
		quit: syscall.SIGTERM, crash: syscall.SIGKILL}
	var addr string
	s.ready = func(ctx context.Context) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		return rdb.Ping(ctx).Err()
	}
	s, err = launch(ctx, s, func(port int) {
		addr = fmt.Sprintf("127.0.0.1:%d", port)
		s.URL = "redis://" + addr + "/0"
		s.args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", s.log, "--daemonize", "no"}
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}
