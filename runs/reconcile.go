package runs

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/store"
)

// DefaultOwner is "host:pid" of this process.
func DefaultOwner() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

// ownerAlive reports whether the drover process named owner still runs.
// Owners on other hosts are assumed alive: only their host can tell.
func ownerAlive(owner string) bool {
	host, pidText, ok := strings.Cut(owner, ":")
	me, _ := os.Hostname()
	if !ok || host != me {
		return true
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	return processAlive(pid)
}

// Reconcile marks runs left pending or running by a drover process that is
// gone as failed "engine restart", killing their recorded process groups if
// still alive (RUN-6). owner is the calling process's owner name: runs
// recorded under it come from a dead process that had the same pid. What
// it does is logged to log at info level (nil: not logged). A run it
// cannot mark (a ledger that cannot be written: a full disk) is logged at
// warn level and left as it is, its process group killed all the same:
// what only reads the ledger must still work (LED-7). It fails only when
// the ledger cannot be read. New calls it; a command that reads the ledger
// without supervising calls it itself, so what it shows of a dead drover's
// runs is already true.
func Reconcile(ctx context.Context, st store.Store, owner string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return reconcile(ctx, st, owner, log)
}

func reconcile(ctx context.Context, st store.Store, owner string, log *slog.Logger) error {
	runs, err := st.Unfinished(ctx)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Owner != owner && ownerAlive(r.Owner) {
			continue // another live drover supervises it
		}
		if r.Pgid > 1 && proc.GroupAlive(r.Pgid) {
			err := proc.KillGroup(r.Pgid)
			log.Info("killed the process group of a run left by a dead drover", "run", r.ID, "pgid", r.Pgid, "owner", r.Owner, "err", err)
		}
		err := st.FinishRun(ctx, store.Finish{RunID: r.ID, Status: store.StatusFailed,
			Error: store.ReasonEngineRestart, DoneStatus: drover.StatusError, EndedAt: time.Now()})
		switch {
		case errors.Is(err, store.ErrConflict):
			// It ended meanwhile: its owner was alive after all.
		case err != nil:
			log.Warn("could not mark a run left by a dead drover failed: the ledger shows it as it was", "run", r.ID, "owner", r.Owner, "err", err)
		default:
			log.Info("marked a run left by a dead drover failed", "run", r.ID, "owner", r.Owner, "reason", store.ReasonEngineRestart)
		}
	}
	return nil
}
