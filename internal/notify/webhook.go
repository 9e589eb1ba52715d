package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// wire is a notice as a webhook receives it.
type wire struct {
	Notice
	Content string `json:"content"`
}

// post delivers nt to t's URL, retrying what may pass (5xx, 429,
// connection errors, timeouts) up to maxAttempts times.
func (n *Notifier) post(t *target, nt Notice) error {
	body, err := json.Marshal(wire{nt, nt.Text})
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	for attempt := 1; ; attempt++ {
		retry, after, err := n.attempt(t.url, body)
		if err == nil {
			return nil
		}
		if !retry || attempt >= n.cfg.MaxAttempts {
			return fmt.Errorf("attempt %d: %w", attempt, err)
		}
		d := after
		if d <= 0 {
			d = n.delay(attempt)
		}
		d = min(d, n.cfg.maxDelay)
		n.log.Info("notify: will retry", "target", t.name, "attempt", attempt, "in", d, "err", err)
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-n.ctx.Done():
			timer.Stop()
			return fmt.Errorf("attempt %d: %w; closing", attempt, err)
		}
	}
}

// attempt posts body once. It reports whether a failure may pass on a
// retry, and after how long the receiver asked to be retried (0: not
// said). Its errors never hold the URL.
func (n *Notifier) attempt(rawURL string, body []byte) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(n.ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return false, 0, errors.New("cannot make the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "drover/notify")
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		// A *url.Error repeats the URL, token and all: keep its cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return n.ctx.Err() == nil, 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return false, 0, nil
	case code == http.StatusTooManyRequests || code >= 500:
		return true, retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("status %d", code)
	case code >= 300 && code < 400:
		return false, 0, fmt.Errorf("status %d: redirects are not followed", code)
	default:
		return false, 0, fmt.Errorf("status %d", code)
	}
}

// delay is the backoff before retry number attempt: Backoff doubled per
// earlier retry, capped, and jittered down by up to half so that
// notifiers failing together do not retry together.
func (n *Notifier) delay(attempt int) time.Duration {
	d := n.cfg.Backoff
	for i := 1; i < attempt && d < n.cfg.maxDelay; i++ {
		d *= 2
	}
	d = min(d, n.cfg.maxDelay)
	return d/2 + rand.N(d/2+1)
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date;
// 0 when it is absent, past or unreadable.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(min(max(s, 0), 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
