package main

import (
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/urfave/cli/v2"
)

// settingFlags are the flags of harness.Settings: every one, for run, or
// those compare shares.
func settingFlags(sharedOnly bool) []cli.Flag {
	return settingFlagsOf(func(s harness.Setting) bool { return s.Shared || !sharedOnly })
}

// settingFlagsOf are the flags of the settings keep keeps.
func settingFlagsOf(keep func(harness.Setting) bool) []cli.Flag {
	var out []cli.Flag
	for _, s := range harness.Settings() {
		if s.Flag != "" && keep(s) {
			out = append(out, settingFlag(s))
		}
	}
	return out
}

// settingFlag is the flag of s, of its value's type, with its default.
func settingFlag(s harness.Setting) cli.Flag {
	var env []string
	if s.Env != "" {
		env = []string{s.Env}
	}
	switch d := s.Default().(type) {
	case time.Duration:
		return &cli.DurationFlag{Name: s.Flag, Value: d, Usage: s.Usage, DefaultText: s.DefaultText, EnvVars: env}
	case int:
		return &cli.IntFlag{Name: s.Flag, Value: d, Usage: s.Usage, DefaultText: s.DefaultText, EnvVars: env}
	case int64:
		return &cli.Int64Flag{Name: s.Flag, Value: d, Usage: s.Usage, DefaultText: s.DefaultText, EnvVars: env}
	case bool:
		return &cli.BoolFlag{Name: s.Flag, Value: d, Usage: s.Usage, DefaultText: s.DefaultText, EnvVars: env}
	case string:
		return &cli.StringFlag{Name: s.Flag, Value: d, Usage: s.Usage, DefaultText: s.DefaultText, EnvVars: env}
	}
	panic(fmt.Sprintf("setting --%s: a value of type %T", s.Flag, s.Default()))
}

// settingsConfig is DefaultConfig with each setting whose flag c has set.
func settingsConfig(c *cli.Context) (harness.Config, error) {
	return settingsConfigOf(c, func(harness.Setting) bool { return true })
}

// settingsConfigOf is DefaultConfig with each setting keep keeps whose
// flag c has set: a command's own flag of a setting's name is its own.
func settingsConfigOf(c *cli.Context, keep func(harness.Setting) bool) (harness.Config, error) {
	cfg := harness.DefaultConfig()
	for _, s := range harness.Settings() {
		if s.Flag == "" || !keep(s) || !c.IsSet(s.Flag) {
			continue
		}
		if err := s.Set(&cfg, c.Value(s.Flag)); err != nil {
			return cfg, fmt.Errorf("--%s: %v", s.Flag, err)
		}
	}
	return cfg, nil
}
