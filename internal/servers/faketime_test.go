package servers

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// clockOffset returns the offset JumpClock last set; 0 for a server without
// a fake clock.
func (s *Server) clockOffset() time.Duration {
	if s.dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(s.dir, clockFile))
	if err != nil {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)) + "s")
	if err != nil {
		return 0
	}
	return d
}
