package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// PERF-2: the write connection's page cache is 1 MiB unless the opener
// says (drover run, with few runs at once, asks for 512 KiB); 64 KiB at
// least.
func TestPERF2_WriteCache(t *testing.T) {
	for _, c := range []struct {
		opts []Option
		want int // cache_size: negative is KiB
	}{
		{nil, -1024},
		{[]Option{WithWriteCache(512 << 10)}, -512},
		{[]Option{WithWriteCache(1)}, -64},
	} {
		s, err := Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		err = s.w.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&got)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err != nil || got != c.want {
			t.Errorf("cache_size %d, %v; want %d", got, err, c.want)
		}
	}
}
