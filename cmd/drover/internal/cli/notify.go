package cli

import (
	"context"
	"time"

	"github.com/drover-run/drover/internal/config"
	"github.com/drover-run/drover/internal/notify"
	"github.com/spf13/cobra"
)

// notifyClose is how long a command that ends waits for its last
// notifications to be delivered.
const notifyClose = 10 * time.Second

// addNotifyFlag adds --notify to cmd.
func addNotifyFlag(cmd *cobra.Command, targets *[]string) {
	cmd.Flags().StringArrayVar(targets, "notify", nil,
		"post a JSON notice to this URL (or 'desktop': the desktop's notifier) when a run asks for permission, ends, or crosses its budget; repeatable; also \"notify\" in drover's config.json")
}

// notifier returns the notifier of --notify and drover's settings, nil
// when there is no target. A bad target is a usage error, found before
// anything runs. The caller closes it (closeNotifier).
func (e *env) notifier(flags []string) (*notify.Notifier, error) {
	targets := flags
	if path, err := config.SettingsFile(); err == nil {
		s, err := config.LoadSettings(path)
		if err != nil {
			return nil, usagef("%v", err)
		}
		targets = append(targets[:len(targets):len(targets)], s.Notify...)
	}
	if len(targets) == 0 {
		return nil, nil
	}
	for _, t := range targets {
		if err := notify.ParseTarget(t); err != nil {
			return nil, usagef("%v", err)
		}
	}
	n, err := notify.New(notify.Config{Targets: targets, Log: e.log})
	if err != nil {
		return nil, usagef("--notify: %v", err)
	}
	return n, nil
}

// closeNotifier delivers what n still holds, for at most notifyClose.
func closeNotifier(n *notify.Notifier) {
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyClose)
	defer cancel()
	_ = n.Close(ctx)
}
