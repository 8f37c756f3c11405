package raftgroup

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newHCLogger returns an hclog.Logger whose lines at level or above go to log.
// hclog's own output is discarded; a sink forwards each line with its key/value
// pairs as slog attributes.
func newHCLogger(log *slog.Logger, level hclog.Level) hclog.Logger {
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  level,
		Output: io.Discard,
	})
	l.RegisterSink(&slogSink{log: log, level: level})
	return l
}

// slogSink is an hclog.SinkAdapter writing to slog.
type slogSink struct {
	log   *slog.Logger
	level hclog.Level
}

// Accept forwards one hclog line. hclog calls it with its own lock held, so it
// must not log through hclog.
func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < s.level || level == hclog.Off {
		return
	}
	lvl := slogLevel(level)
	ctx := context.Background()
	if !s.log.Enabled(ctx, lvl) {
		return
	}
	attrs := make([]any, 0, len(args)+2)
	if name != "" {
		attrs = append(attrs, slog.String("logger", name))
	}
	for i := 0; i+1 < len(args); i += 2 {
		key, ok := args[i].(string)
		if !ok {
			key = "arg"
		}
		attrs = append(attrs, slog.Any(key, args[i+1]))
	}
	if len(args)%2 == 1 {
		attrs = append(attrs, slog.Any("extra", args[len(args)-1]))
	}
	s.log.Log(ctx, lvl, strings.TrimSpace(msg), attrs...)
}

func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
