package lockserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/jackc/pgx/v5"
)

// A PostgresNode is a PostgreSQL server whose advisory lock is the lock.
type PostgresNode struct {
	Name string // the record's process for it: "postgres"
	URL  string
	Key  int64 // the advisory lock's key
}

// PostgreSQL logs no function's result, and pg_locks, sampled, misses
// what comes and goes between two samples. So the record is made by the
// lock's own SQL calls, in the server: the schema hiatus_record holds
// functions of the names and arguments of the advisory lock's
// (pg_try_advisory_lock, pg_advisory_lock, pg_advisory_unlock, on a
// bigint), each of which calls pg_catalog's and, in the same statement,
// logs what it answered, with the backend's PID, the server's clock right
// after the call, and the session's hiatus.client (the worker's name). A
// session whose search_path puts hiatus_record before pg_catalog
// (SessionParams) runs them in place of the built-in ones: the lock's SQL
// is unchanged. A statement cancelled between the call and its end rolls
// its log back while a lock it took stays with the session: the record
// then lacks that grant (the client saw an :info, and ends the session).
// A session's end releases its locks without a call: the next grant shows
// it.

// RecordSchema is the schema of the functions that log the advisory
// lock's calls.
const RecordSchema = "hiatus_record"

// SessionParams are the runtime parameters of a PostgreSQL session whose
// advisory lock calls the record is to see, by client.
func SessionParams(client string) map[string]string {
	return map[string]string{"search_path": RecordSchema + `, pg_catalog, "$user", public`, "hiatus.client": client}
}

// setupSQL makes the log and its functions; a transaction-scoped advisory
// lock keeps two runs on one server from making them at once.
var setupSQL = []string{
	`SELECT pg_catalog.pg_advisory_xact_lock(7157301712946122)`,
	`CREATE SCHEMA IF NOT EXISTS ` + RecordSchema,
	`CREATE TABLE IF NOT EXISTS ` + RecordSchema + `.log (
		id bigserial PRIMARY KEY,
		at timestamptz NOT NULL DEFAULT clock_timestamp(),
		pid int NOT NULL DEFAULT pg_backend_pid(),
		client text NOT NULL DEFAULT coalesce(current_setting('hiatus.client', true), ''),
		act text NOT NULL, key bigint NOT NULL, ok boolean NOT NULL)`,
	`CREATE OR REPLACE FUNCTION ` + RecordSchema + `.pg_try_advisory_lock(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$
	DECLARE ok boolean;
	BEGIN
		ok := pg_catalog.pg_try_advisory_lock(k);
		INSERT INTO ` + RecordSchema + `.log(act, key, ok) VALUES ('lock', k, ok);
		RETURN ok;
	END $$`,
	`CREATE OR REPLACE FUNCTION ` + RecordSchema + `.pg_advisory_lock(k bigint) RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_catalog.pg_advisory_lock(k);
		INSERT INTO ` + RecordSchema + `.log(act, key, ok) VALUES ('lock', k, true);
	END $$`,
	`CREATE OR REPLACE FUNCTION ` + RecordSchema + `.pg_advisory_unlock(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$
	DECLARE ok boolean;
	BEGIN
		ok := pg_catalog.pg_advisory_unlock(k);
		INSERT INTO ` + RecordSchema + `.log(act, key, ok) VALUES ('unlock', k, ok);
		RETURN ok;
	END $$`,
}

// A postgresSource records one PostgreSQL server's advisory lock.
type postgresSource struct {
	rec   *Recorder
	index int
	node  PostgresNode
	conn  *pgx.Conn
	clock nodeClock
	from  int64 // the log's last id before the record began
}

// startPostgres makes the log's functions on the server and notes where
// the run's calls begin.
func (r *Recorder) startPostgres(ctx context.Context, index int, n PostgresNode) (_ *postgresSource, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Name, err)
	}
	defer func() {
		if err != nil {
			conn.Close(context.Background())
		}
	}()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range setupSQL {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%.60s…: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %s: make the log of the advisory lock's calls: %w", n.Name, err)
	}
	s := &postgresSource{rec: r, index: index, node: n, conn: conn}
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+RecordSchema+`.log`).Scan(&s.from); err != nil {
		return nil, fmt.Errorf("record %s: %w", n.Name, err)
	}
	s.clock = nodeClock{own: true, hist: r.hist, node: func(ctx context.Context) (time.Time, error) {
		var t time.Time
		err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
		return t, err
	}}
	if _, ok := s.clock.firstSample(ctx); !ok {
		// Its events are stamped as if its clock were the history's, and
		// say no :uncertainty: how far off that is, is unknown.
		r.logf("%s: its clock beside the run's Redis's did not answer: its events are stamped as if it were the history's", n.Name)
	}
	return s, nil
}

// end reads the run's calls from the log, in the order the server made
// them, and removes them.
func (s *postgresSource) end(ctx context.Context) {
	defer s.conn.Close(context.WithoutCancel(ctx))
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rows, err := s.conn.Query(ctx, `SELECT floor(extract(epoch FROM at) * 1000000)::bigint, pid, client, act, ok
		FROM `+RecordSchema+`.log WHERE id > $1 AND key = $2 ORDER BY at, id`, s.from, s.node.Key)
	if err != nil {
		s.gap(fmt.Sprintf("read the log of %s: %v", s.node.Name, err))
		return
	}
	m := advisoryModel{emit: s.emit}
	var c advisoryCall
	_, err = pgx.ForEachRow(rows, []any{&c.us, &c.pid, &c.client, &c.act, &c.ok}, func() error {
		m.call(c)
		return nil
	})
	if err != nil {
		s.gap(fmt.Sprintf("read the log of %s: %v", s.node.Name, err))
		return
	}
	if _, err := s.conn.Exec(ctx, `DELETE FROM `+RecordSchema+`.log WHERE id > $1 AND key = $2`, s.from, s.node.Key); err != nil {
		s.rec.logf("%s: remove the run's calls from its log: %v", s.node.Name, err)
	}
}

// emit sends an event of the model to the journal.
func (s *postgresSource) emit(e event) {
	o := s.rec.op(s.index, s.clock.at(e.us*1000), event{act: e.act, key: strconv.FormatInt(s.node.Key, 10), token: e.token,
		client: e.client, command: e.command, uncertainty: s.clock.uncertainty()})
	o.Extra[history.KeyNodeTime] = e.us*1000 - s.rec.hist.startNS
	s.rec.send(o)
}

// gap says the record of the node could not be read.
func (s *postgresSource) gap(why string) {
	s.rec.logf("%s", why)
	s.rec.send(s.rec.op(s.index, s.rec.hist.startNS, event{act: history.SGap, key: strconv.FormatInt(s.node.Key, 10), reason: why}))
}

// An advisoryCall is one logged call of the advisory lock.
type advisoryCall struct {
	us     int64 // the server's clock after the call, µs since the epoch
	pid    int32
	client string
	act    string // "lock" or "unlock"
	ok     bool
}

// An advisoryModel replays the calls: a session holds the lock from the
// call that granted it to the unlock that freed it (re-entered, to as
// many unlocks). A token is the holding backend, "pid 48213". The calls
// are in the order of their stamps, taken right after each call: a
// holder's unlock may be stamped after the grant to the next session, which
// it made possible. So a grant while another holds displaces that holder,
// whose unlock, when it comes, is its delete, a microsecond before that
// grant at the latest; a holder that never unlocks ended its session, which freed it.
type advisoryModel struct {
	holder    int32 // the holding backend's PID; 0 for none
	count     int
	displaced map[int32]displaced
	emit      func(event)
}

// A displaced holder is one whose lock went to another before its unlock
// came: by then it had freed it.
type displaced struct {
	by int64 // the grant to the next, µs
}

func (m *advisoryModel) call(c advisoryCall) {
	e := event{us: c.us, client: c.client, command: fmt.Sprintf("%s by backend %d: %v", c.act, c.pid, c.ok)}
	switch {
	case c.act == "lock" && c.ok && m.holder == c.pid:
		m.count++ // re-entered: held as before
	case c.act == "lock" && c.ok:
		if m.holder != 0 {
			if m.displaced == nil {
				m.displaced = map[int32]displaced{}
			}
			m.displaced[m.holder] = displaced{by: c.us}
		}
		delete(m.displaced, c.pid)
		m.holder, m.count = c.pid, 1
		e.act, e.token = history.SGrant, pidToken(c.pid)
		m.emit(e)
	case c.act == "lock":
		e.act, e.token = history.SRefuse, pidToken(m.holder)
		m.emit(e)
	case c.act == "unlock" && c.ok && m.holder == c.pid:
		if m.count--; m.count == 0 {
			m.holder = 0
			e.act, e.token = history.SDelete, pidToken(c.pid)
			m.emit(e)
		}
	case c.act == "unlock" && c.ok:
		if d, ok := m.displaced[c.pid]; ok {
			delete(m.displaced, c.pid)
			e.act, e.token, e.us = history.SDelete, pidToken(c.pid), min(c.us, d.by-1)
			m.emit(e)
		}
	}
}

// pidToken names the backend that holds the lock; "" for none.
func pidToken(pid int32) string {
	if pid == 0 {
		return ""
	}
	return "pid " + strconv.Itoa(int(pid))
}
