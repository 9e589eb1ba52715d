// Package fanin merges streams that each run on a goroutine of their own
// into one, in the order their items arrive.
package fanin

import (
	"context"
	"iter"
	"sync"
)

// Merge yields the items of every source as they arrive. Each source is
// iterated on a goroutine of its own, with a context that ends when the
// merged iteration does; a source's error is passed on and ends that
// source, the others go on. The goroutines are owned by the iteration:
// when it returns, by the end of every source or by the consumer breaking
// out, they have been stopped and waited for.
func Merge[T any](ctx context.Context, sources ...func(context.Context) iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type item struct {
			v   T
			err error
		}
		ch := make(chan item)
		var wg sync.WaitGroup
		for _, src := range sources {
			wg.Go(func() {
				for v, err := range src(ctx) {
					select {
					case ch <- item{v, err}:
					case <-ctx.Done():
						return
					}
					if err != nil {
						return
					}
				}
			})
		}
		// The closer is owned here too: the deferred drain returns only
		// once it has closed ch, after every source's goroutine ended.
		go func() { wg.Wait(); close(ch) }()
		defer func() {
			cancel()
			for range ch {
			}
		}()
		for it := range ch {
			if !yield(it.v, it.err) {
				return
			}
		}
	}
}
