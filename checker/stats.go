package checker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hiatus-dev/hiatus/history"
)

// stats counts client ops by :f and outcome, as Jepsen's stats checker
// does, one completion at a time.
type stats struct {
	byF map[history.Keyword]*outcomes
}

// outcomes counts the completions of one :f, or of all.
type outcomes struct{ ok, fail, info int64 }

func (o outcomes) count() int64 { return o.ok + o.fail + o.info }

func (o outcomes) fields() []Field {
	return []Field{{"count", o.count()}, {"ok-count", o.ok}, {"fail-count", o.fail}, {"info-count", o.info}}
}

// add counts o if it is a client op's completion.
func (s *stats) add(o history.Op) {
	if !o.IsClient() || o.Type == history.Invoke {
		return
	}
	if s.byF == nil {
		s.byF = map[history.Keyword]*outcomes{}
	}
	c := s.byF[o.F]
	if c == nil {
		c = &outcomes{}
		s.byF[o.F] = c
	}
	switch o.Type {
	case history.Ok:
		c.ok++
	case history.Fail:
		c.fail++
	case history.Info:
		c.info++
	}
}

// result is the :stats check: the counts overall and by :f. With need, an
// :f of those that never completed :ok leaves the verdict unknown: a
// lock-counter run none of whose writes succeeded, say, tested nothing.
func (s *stats) result(need []history.Keyword) Result {
	r := Result{Name: "stats", Valid: Valid}
	var all outcomes
	fs := make([]history.Keyword, 0, len(s.byF))
	for f, c := range s.byF {
		fs = append(fs, f)
		all.ok, all.fail, all.info = all.ok+c.ok, all.fail+c.fail, all.info+c.info
	}
	slices.Sort(fs)
	byF := make(map[history.Keyword]any, len(fs))
	for _, f := range fs {
		m := map[history.Keyword]any{}
		for _, fl := range s.byF[f].fields() {
			m[history.Keyword(fl.Key)] = fl.Value
		}
		byF[f] = m
	}
	r.Fields = append(all.fields(), Field{"by-f", byF})
	var never []string
	for _, f := range need {
		if c := s.byF[f]; c == nil || c.ok == 0 {
			never = append(never, ":"+string(f))
		}
	}
	if len(never) > 0 {
		r.Valid = Unknown
		r.Explanation = fmt.Sprintf("no %s ever completed :ok, so the history shows nothing of what the checks look for", strings.Join(never, " or "))
	}
	return r
}
