// Command release is imagemem's test subject: it touches its whole
// read-only image, releases it, and prints as JSON what Release returned
// and the process's resident file pages before and after, then proves
// the released code and data still work by summing them again.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/drover-run/drover/internal/imagemem"
)

// report is what the test reads.
type report struct {
	Released     int64
	Err          string
	FileKBBefore int64
	FileKBAfter  int64
	SumBefore    uint64
	SumAfter     uint64
}

func main() {
	var r report
	r.SumBefore = work()
	r.FileKBBefore = rssFileKB()
	n, err := imagemem.Release()
	r.Released = n
	if err != nil {
		r.Err = err.Error()
	}
	r.FileKBAfter = rssFileKB()
	r.SumAfter = work()
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		os.Exit(1)
	}
}

// work runs code and reads read-only data from several packages
// (unicode's tables are large read-only data) and sums what it saw.
func work() uint64 {
	var sum uint64
	for r := rune(0); r < 0x30000; r++ {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsSpace(r) {
			sum += uint64(r)
		}
	}
	for i := range 2000 {
		sum += uint64(len(fmt.Sprintf("%d %x %q", i, i, strconv.Itoa(i))))
	}
	return sum
}

// rssFileKB is RssFile from /proc/self/status, or -1.
func rssFileKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
