package gen

import (
	"bytes"
	"context"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

func generate(t *testing.T, cfg Config) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(&buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		// The verdicts of the checks: a lost update is found by both, even
		// beside :info writes, since the reads prove which took effect.
		lockCounter, linear checker.Validity
	}{
		{"serial", Config{Sections: 200, Workers: 1, Seed: 1}, checker.Valid, checker.Valid},
		{"contended", Config{Sections: 500, Workers: 16, Seed: 2}, checker.Valid, checker.Valid},
		{"lost", Config{Sections: 500, Workers: 4, Lost: 3, Seed: 3}, checker.Invalid, checker.Invalid},
		{"info", Config{Sections: 500, Workers: 64, Info: 40, Seed: 4}, checker.Valid, checker.Valid},
		{"lost and info", Config{Sections: 500, Workers: 8, Lost: 1, Info: 5, Seed: 5}, checker.Invalid, checker.Invalid},
		{"none", Config{Sections: 0, Workers: 3, Seed: 6}, checker.Valid, checker.Valid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, st := generate(t, tc.cfg)
			ops, err := history.ReadAll(bytes.NewReader(data), "history.edn")
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != st.Ops {
				t.Errorf("read %d ops, Stats says %d", len(ops), st.Ops)
			}
			var pauses, infos, sections int
			for i, o := range ops {
				if o.Index != int64(i) || i > 0 && o.Time < ops[i-1].Time {
					t.Fatalf("op %d (index %d, time %d) out of order", i, o.Index, o.Time)
				}
				switch {
				case o.F == history.FPause:
					pauses++
				case o.F == history.FWrite && o.Type == history.Info:
					infos++
				case o.F == history.FAcquire && o.Type == history.Ok:
					sections++
				}
			}
			if pauses != tc.cfg.Lost || infos != tc.cfg.Info || sections != tc.cfg.Sections {
				t.Errorf("%d pauses, %d :info writes, %d sections; want %d, %d, %d",
					pauses, infos, sections, tc.cfg.Lost, tc.cfg.Info, tc.cfg.Sections)
			}
			if want := int64(tc.cfg.Sections - tc.cfg.Lost - tc.cfg.Info + st.Happened); st.Final != want {
				t.Errorf("final counter %d, want %d", st.Final, want)
			}

			rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
			if err != nil {
				t.Fatal(err)
			}
			lc, _ := rs.Check("lock-counter")
			if lc.Valid != tc.lockCounter {
				t.Errorf("lock-counter %v, want %v: %s", lc.Valid, tc.lockCounter, lc.Explanation)
			}
			if final, _ := history.Int(lc.Get("final")); final != st.Final {
				t.Errorf("the final read says %d, Stats %d", final, st.Final)
			}
			f, _ := rs.LockFigures()
			if f.LostMin > int64(tc.cfg.Lost) || f.LostMax < int64(tc.cfg.Lost) || tc.cfg.Info == 0 && f.LostMin != f.LostMax {
				t.Errorf("lost %d–%d, want %d", f.LostMin, f.LostMax, tc.cfg.Lost)
			}
			if lin, _ := rs.Check("linear"); lin.Valid != tc.linear {
				t.Errorf("linear %v, want %v: %s", lin.Valid, tc.linear, lin.Explanation)
			}
			if _, ok := rs.Check("history"); ok {
				t.Errorf("the history breaks the rules of a history:\n%s", rs.AppendEDN(nil))
			}
		})
	}
}

func TestWriteSeeded(t *testing.T) {
	cfg := Config{Sections: 300, Workers: 5, Lost: 2, Info: 3, Seed: 9}
	a, _ := generate(t, cfg)
	b, _ := generate(t, cfg)
	if !bytes.Equal(a, b) {
		t.Error("one Config gave two histories")
	}
	cfg.Seed++
	if c, _ := generate(t, cfg); bytes.Equal(a, c) {
		t.Error("two seeds gave one history")
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default-like", Config{Sections: 10, Workers: 3}, true},
		{"no workers", Config{Sections: 10}, false},
		{"negative", Config{Sections: -1, Workers: 1}, false},
		{"lost with one worker", Config{Sections: 10, Workers: 1, Lost: 1}, false},
		{"too many injections", Config{Sections: 10, Workers: 2, Lost: 4, Info: 3}, false},
		{"exactly enough", Config{Sections: 10, Workers: 2, Lost: 4, Info: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Check(); (err == nil) != tc.ok {
				t.Errorf("Check() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestLostFound is the property of gen and the checker together: whatever
// the writes of unknown outcome, the lost updates a history was made with
// lie within the bounds the check reports, and any is found invalid.
func TestLostFound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			Workers: rapid.IntRange(2, 16).Draw(t, "workers"),
			Lost:    rapid.IntRange(0, 4).Draw(t, "lost"),
			Info:    rapid.IntRange(0, 30).Draw(t, "info"),
			Seed:    rapid.Int64().Draw(t, "seed"),
		}
		cfg.Sections = 2*cfg.Lost + cfg.Info + rapid.IntRange(0, 100).Draw(t, "plain")
		ops, _, err := Ops(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
		if err != nil {
			t.Fatal(err)
		}
		lc, _ := rs.LockFigures()
		if lc.LostMin > int64(cfg.Lost) || lc.LostMax < int64(cfg.Lost) {
			t.Fatalf("%+v: lost %d–%d\n%s", cfg, lc.LostMin, lc.LostMax, rs.AppendEDN(nil))
		}
		if cfg.Lost > 0 && rs.Valid != checker.Invalid {
			t.Fatalf("%+v: %d lost, but valid? %v\n%s", cfg, cfg.Lost, rs.Valid, rs.AppendEDN(nil))
		}
	})
}
