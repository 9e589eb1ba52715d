package fanin_test

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/drover-run/drover/internal/fanin"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type item struct {
	src string
	n   int
}

// count yields src 1…n, then err if set.
func count(src string, n int, err error) func(context.Context) iter.Seq2[item, error] {
	return func(context.Context) iter.Seq2[item, error] {
		return func(yield func(item, error) bool) {
			for i := 1; i <= n; i++ {
				if !yield(item{src, i}, nil) {
					return
				}
			}
			if err != nil {
				yield(item{}, err)
			}
		}
	}
}

// ENG-010: every item of every source arrives, each source's in its order,
// and a source's error is passed on and ends that source only.
func TestENG010_MergeYieldsEverySourceInOrder(t *testing.T) {
	boom := errors.New("boom")
	last := map[string]int{}
	var errs []error
	for it, err := range fanin.Merge(context.Background(), count("a", 1000, nil), count("b", 10, boom), count("c", 500, nil)) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if it.n != last[it.src]+1 {
			t.Fatalf("%s %d after %d", it.src, it.n, last[it.src])
		}
		last[it.src] = it.n
	}
	if len(errs) != 1 || !errors.Is(errs[0], boom) || last["a"] != 1000 || last["b"] != 10 || last["c"] != 500 {
		t.Fatalf("errors %v, last items %v", errs, last)
	}
}

// A consumer that breaks out stops the sources and waits for them:
// every source has returned when Merge's iteration does (goleak checks
// that no goroutine outlives the test).
func TestENG012_MergeBreakStopsTheSources(t *testing.T) {
	stopped := make(chan struct{}, 2)
	forever := func(ctx context.Context) iter.Seq2[item, error] {
		return func(yield func(item, error) bool) {
			defer func() { stopped <- struct{}{} }()
			for i := 1; ctx.Err() == nil; i++ {
				if !yield(item{"f", i}, nil) {
					return
				}
			}
		}
	}
	n := 0
	for _, err := range fanin.Merge(context.Background(), forever, forever) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 10 {
			break
		}
	}
	if len(stopped) != 2 {
		t.Fatalf("%d sources had returned when Merge did, want 2", len(stopped))
	}
}
