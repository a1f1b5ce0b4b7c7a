package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/hiatus-dev/hiatus/internal/shellquote"
)

// SessionExpired reports whether a server of the ensemble expired session
// (its ID): the leader's session tracker logs "Expiring session 0x…,
// timeout of …ms exceeded" before it proposes the session's close, so the
// line is there before any watch sees the close's deletes. ZooKeeper's
// four-letter words count expiries but name none, and a count that rose
// while one session closed and another expired was once taken for the
// wrong one's.
func (z *ZooKeeper) SessionExpired(ctx context.Context, session int64) (bool, error) {
	text := fmt.Sprintf("Expiring session 0x%x,", session)
	var errs []error
	for _, s := range z.Servers {
		ok, err := s.logHolds(ctx, text)
		if ok {
			return true, nil
		}
		errs = append(errs, err)
	}
	// A log that could not be read may hold it: not "no".
	return false, errors.Join(errs...)
}

// logHolds reports whether a line of the server's log holds text.
func (s *Server) logHolds(ctx context.Context, text string) (bool, error) {
	if s.node != nil {
		ctx, cancel := context.WithTimeout(ctx, nodeTimeout)
		defer cancel()
		// grep says 0 found, 1 not found, 2 could not read.
		out, err := s.node.Run(ctx, fmt.Sprintf("set -- %s; %s && { grep -qF -- %s \"$1\"; echo \"grep $?\"; }",
			shellquote.Quote(s.log), regularOnNode, shellquote.Quote(text)))
		switch said := strings.TrimSpace(string(out)); {
		case err == nil && said == "grep 0":
			return true, nil
		case err == nil && said == "grep 1":
			return false, nil
		default:
			return false, fmt.Errorf("%s on node %s: read its log: %v: %s", s.name, s.node.Name(), err, said)
		}
	}
	f, err := s.home.Open(filepath.Base(s.log))
	if err != nil {
		return false, fmt.Errorf("%s: read its log: %w", s.name, err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if strings.Contains(line, text) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: read its log: %w", s.name, err)
		}
	}
}
