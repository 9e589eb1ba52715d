package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
)

var versionRe = regexp.MustCompile(`\d+\.\d+\.\d+`)

// available finds the CLI with lookup, runs it with versionArgs (bounded by
// ctx and 15 s), takes the first x.y.z in its output as the version, and
// marks it tested when it is one of tested (ADP-4).
func available(ctx context.Context, lookup func() (string, error), versionArgs []string, tested []string) drover.Availability {
	av := drover.Availability{TestedVersions: strings.Join(tested, ", ")}
	path, err := lookup()
	if err != nil {
		av.Error = err.Error()
		return av
	}
	av.Installed, av.Path = true, path
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, versionArgs...)
	cmd.Env = append(os.Environ(), "DISABLE_AUTOUPDATER=1", "NO_COLOR=1")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		av.Error = fmt.Sprintf("%s %s: %v", path, strings.Join(versionArgs, " "), err)
		return av
	}
	av.Version = versionRe.FindString(string(out))
	av.Tested = av.Version != "" && slices.Contains(tested, av.Version)
	return av
}
