package telemetry

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// NewLogHandler returns the slog.Handler for the server's logs: JSON lines
// when format is "json" (the value of BUB_LOG_FORMAT), text otherwise, at
// level (nil means Info). Every record logged with a ctx that holds a span
// gets trace_id and span_id attributes, so a log line leads to its trace;
// records without one are unchanged.
//
// The ids are added when the record is handled, after any WithGroup, so on a
// grouped logger they appear inside the group.
func NewLogHandler(w io.Writer, format string, level slog.Leveler) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if strings.EqualFold(strings.TrimSpace(format), "json") {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return traceHandler{h}
}

// traceHandler adds the ids of ctx's span to each record it passes on.
type traceHandler struct{ next slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// Clone: r may share its attribute storage with the caller's copy.
		r = r.Clone()
		r.AddAttrs(
			slog.String("trace_id", sc.TraceID().String()),
			slog.String("span_id", sc.SpanID().String()),
		)
	}
	return h.next.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.next.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.next.WithGroup(name)}
}

var _ slog.Handler = traceHandler{}
