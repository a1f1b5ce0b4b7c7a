package gen

import (
	"bytes"
	"context"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
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
		// The verdicts of the checks: a lost update is found by both; an
		// :info write that took effect may hide a lost update from the
		// count (anyCount), but not from the linearizability check.
		lockCounter, linear checker.Validity
		anyCount            bool
	}{
		{"serial", Config{Sections: 200, Workers: 1, Seed: 1}, checker.Valid, checker.Valid, false},
		{"contended", Config{Sections: 500, Workers: 16, Seed: 2}, checker.Valid, checker.Valid, false},
		{"lost", Config{Sections: 500, Workers: 4, Lost: 3, Seed: 3}, checker.Invalid, checker.Invalid, false},
		{"info", Config{Sections: 500, Workers: 64, Info: 40, Seed: 4}, checker.Valid, checker.Valid, false},
		{"lost and info", Config{Sections: 500, Workers: 8, Lost: 1, Info: 5, Seed: 5}, checker.Invalid, checker.Invalid, true},
		{"none", Config{Sections: 0, Workers: 3, Seed: 6}, checker.Valid, checker.Valid, false},
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
			if !tc.anyCount && lc.Valid != tc.lockCounter {
				t.Errorf("lock-counter %v, want %v: %s", lc.Valid, tc.lockCounter, lc.Explanation)
			}
			if final, _ := history.Int(lc.Get("final")); final != st.Final {
				t.Errorf("the final read says %d, Stats %d", final, st.Final)
			}
			if tc.cfg.Info == 0 {
				if lost, _ := history.Int(lc.Get("lost")); lost != int64(tc.cfg.Lost) {
					t.Errorf("lost %d, want %d", lost, tc.cfg.Lost)
				}
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
