package metrics

import (
	"fmt"
	"testing"
)

func TestSeriesAreTheVectorsOwn(t *testing.T) {
	tests := []struct {
		name     string
		got, own any
	}{
		{"a request's count", requestSeries.get([3]string{REST, "GET /posts/{id}", "404"}).count, requests.WithLabelValues(REST, "GET /posts/{id}", "404")},
		{"a request's duration", requestSeries.get([3]string{REST, "GET /posts/{id}", "404"}).took, requestDuration.WithLabelValues(REST, "GET /posts/{id}", "404")},
		{"a store operation's duration", storeSeries.get([2]string{"sqlite", "get_post"}), storeDuration.WithLabelValues("sqlite", "get_post")},
		{"a credential's outcome", authSeries.get([2]string{"api_key", "ok"}), authOutcomes.WithLabelValues("api_key", "ok")},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is recorded in the vector's series of its labels", func(t *testing.T) {
			if tt.got != tt.own {
				t.Errorf("the series found is not the vector's")
			}
		})
	}
}

func TestSeriesKeepsAtMostMaxSeries(t *testing.T) {
	made := 0
	s := newSeries(func(l [1]string) string { made++; return l[0] })
	for i := range maxSeries + 10 {
		for range 2 {
			if got, want := s.get([1]string{fmt.Sprint(i)}), fmt.Sprint(i); got != want {
				t.Fatalf("get(%q) = %q", want, got)
			}
		}
	}
	if n := len(*s.known.Load()); n != maxSeries {
		t.Errorf("%d series kept; want %d", n, maxSeries)
	}
	if want := maxSeries + 2*10; made != want {
		t.Errorf("%d series made; want %d (those kept once, the others on every call)", made, want)
	}
}
