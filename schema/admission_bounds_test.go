//go:build !race

// Bounds on time: outside the race detector, in make test's step without it.

package schema

import "testing"

func TestHostileDocumentsAreAnsweredInBoundedTimeAndMemory(t *testing.T) {
	s := admissionSchema(t)
	admitted(s, hostile{query: "{ __typename }"}) // reads the type system once
	for _, h := range hostileDocuments() {
		verdict := "is admitted"
		if h.code != "" {
			verdict = "is refused with " + h.code
		}
		t.Run(h.name+" "+verdict+" within 50 ms and 16 MB", func(t *testing.T) {
			if len(h.query) > DefaultLimits.MaxQueryLength {
				t.Fatalf("the document is %d bytes long", len(h.query))
			}
			code, errs := admitted(s, h)
			if code != h.code {
				t.Errorf("refusal %q; want %q", code, h.code)
			}
			best, bytes := cost(s, h)
			t.Logf("%d bytes: %v, %d KiB allocated, %d errors of graphql-go's validation", len(h.query), best, bytes>>10, errs)
			if best > admissionTime {
				t.Errorf("took %v; want at most %v", best, admissionTime)
			}
			if bytes > admissionBytes {
				t.Errorf("allocated %d bytes; want at most %d", bytes, admissionBytes)
			}
		})
	}
}
