package lockserver

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The keyspace notifications ModeFull reads are the server's setting, not
// a connection's: every recorder of one server (runs side by side on a
// Redis given by URL, or the cases of a test on one throwaway server)
// shares it. A recorder that put the setting back when it ended turned
// them off under another still recording, whose grants it then read as
// refusals. So each recorder holds a connection named liveName and the
// server's own setting (hex) while it records, and one ending puts that
// setting back only when no other recorder's connection is there. A
// recorder that begins while another records takes the server's setting
// from that one's name: what it finds is the others' doing. The registry
// is the server's list of clients: it needs no write (a replica takes
// none), and a recorder killed before it ended leaves nothing in it (its
// connections close with it).
const liveName = "hiatus-record-live-"

// A notifyUse is one recorder's use of a server's notifications.
type notifyUse struct {
	live *redis.Conn // named liveName and was while the recorder records
	was  string      // the server's own setting
}

// notifyOn registers a recorder on the server c and adds to its
// notify-keyspace-events the keyspace events of string and generic
// commands, expiries and evictions.
func notifyOn(ctx context.Context, c *redis.Client) (_ *notifyUse, err error) {
	others, err := liveRecorders(ctx, c)
	if err != nil {
		return nil, err
	}
	cur, err := c.ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		return nil, fmt.Errorf("CONFIG GET notify-keyspace-events: %w", err)
	}
	u := &notifyUse{live: c.Conn(), was: cur["notify-keyspace-events"]}
	if len(others) > 0 {
		u.was = others[0]
	}
	defer func() {
		if err != nil {
			u.live.Close()
		}
	}()
	if err := u.live.ClientSetName(ctx, liveName+hex.EncodeToString([]byte(u.was))).Err(); err != nil {
		return nil, fmt.Errorf("CLIENT SETNAME %s: %w", liveName, err)
	}
	want := withRecordEvents(u.was)
	if err := c.ConfigSet(ctx, "notify-keyspace-events", want).Err(); err != nil {
		return nil, fmt.Errorf("CONFIG SET notify-keyspace-events %s: %w", want, err)
	}
	return u, nil
}

// withRecordEvents is the setting nke with the events the record reads.
func withRecordEvents(nke string) string {
	for _, c := range "K$gxe" {
		if !strings.ContainsRune(nke, c) && !(strings.ContainsRune(nke, 'A') && strings.ContainsRune("$gxe", c)) {
			nke += string(c)
		}
	}
	return nke
}

// off unregisters the recorder and, when no other is left, puts back the
// server's own setting.
func (u *notifyUse) off(ctx context.Context, c *redis.Client) error {
	// Renamed, not closed, before the look: the server may read a close
	// after the list it answers next.
	err := u.live.ClientSetName(ctx, "hiatus-record-ending").Err()
	u.live.Close()
	if err != nil {
		return err
	}
	others, err := liveRecorders(ctx, c)
	if err != nil || len(others) > 0 {
		return err
	}
	return c.ConfigSet(ctx, "notify-keyspace-events", u.was).Err()
}

// liveRecorders are the server's own settings that the recorders
// recording it keep in their connections' names.
func liveRecorders(ctx context.Context, c *redis.Client) ([]string, error) {
	list, err := c.ClientList(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLIENT LIST: %w", err)
	}
	var was []string
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			h, ok := strings.CutPrefix(f, "name="+liveName)
			if !ok {
				continue
			}
			if b, err := hex.DecodeString(h); err == nil {
				was = append(was, string(b))
			}
		}
	}
	return was, nil
}
