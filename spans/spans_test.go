package spans

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestATraceparentReadsBackAsTheSpanItWasWrittenOf is what the event log relies on: the
// traceparent a traced write keeps reads back as its span's context, and nothing else reads as
// one.
func TestATraceparentReadsBackAsTheSpanItWasWrittenOf(t *testing.T) {
	if Traceparent(context.Background()) != "" {
		t.Error("an untraced context has a traceparent")
	}
	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(context.Background(), "write")
	defer span.End()
	tp := Traceparent(ctx)
	if got := spanContextOf(tp); !got.Equal(span.SpanContext().WithRemote(true)) {
		t.Errorf("%q reads as %v, want %v", tp, got, span.SpanContext())
	}
	for _, bad := range []string{"", "00-zz-00-01", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "not a traceparent"} {
		if spanContextOf(bad).IsValid() {
			t.Errorf("%q reads as a span", bad)
		}
	}
}
