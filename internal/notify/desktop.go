package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// desktop is the desktop's notifier: notify-send (Linux) or osascript
// (macOS).
type desktop struct {
	path      string
	osascript bool
}

func findDesktop() (*desktop, error) {
	if p, err := exec.LookPath("notify-send"); err == nil {
		return &desktop{path: p}, nil
	}
	if p, err := exec.LookPath("osascript"); err == nil {
		return &desktop{path: p, osascript: true}, nil
	}
	return nil, errors.New("--notify desktop: found neither notify-send (Linux, from libnotify) nor osascript (macOS) on PATH; install one or notify a webhook URL instead")
}

// osascriptArgs is a script that shows its two arguments: the text is
// passed as data, never written into the script, so it needs no quoting.
var osascriptArgs = []string{"-e", "on run argv", "-e", "display notification (item 2 of argv) with title (item 1 of argv)", "-e", "end run"}

// show runs the notifier once, for at most 5 s, without a shell.
func (d *desktop) show(ctx context.Context, nt Notice) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	title, body := title(nt.Kind), nt.Text
	var args []string
	if d.osascript {
		args = append(append(args, osascriptArgs...), title, body)
	} else {
		// notify-send would take a body starting with "-" for an option,
		// and "--" does not help: it keeps "--" when what follows starts
		// with "-".
		if strings.HasPrefix(body, "-") {
			body = " " + body
		}
		args = []string{"--app-name=drover", title, body}
	}
	cmd := exec.CommandContext(ctx, d.path, args...)
	// A notifier that leaves a child holding its output must not hold
	// up the target's goroutine past the timeout.
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %q", filepath.Base(d.path), err, bytes.TrimSpace(out[:min(len(out), 200)]))
	}
	return nil
}

// title is the desktop notification's title for a kind.
func title(k Kind) string {
	switch k {
	case KindPermission:
		return "drover: permission requested"
	case KindRunEnded:
		return "drover: run ended"
	case KindBudget:
		return "drover: budget crossed"
	}
	return "drover"
}
