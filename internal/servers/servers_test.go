package servers

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// TestThrowaway starts both servers, uses them, stops them, and checks that
// nothing is left: no process, no directory.
func TestThrowaway(t *testing.T) {
	ctx := context.Background()
	r, err := StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartPostgres(ctx)
	if err != nil {
		r.Stop()
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("redis: %v", err)
	}
	rdb.Close()
	c, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Errorf("postgres: got %d, %v", n, err)
	}
	c.Close(ctx)

	for _, s := range []*Server{r, p} {
		dir := s.dir
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind after Stop (%v)", dir, err)
		}
		if _, err := os.Stat("/proc/" + itoa(s.PID)); err == nil {
			t.Errorf("pid %d still running after Stop", s.PID)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
