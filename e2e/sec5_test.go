package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// TestSEC5_AgentsFindNoDroverSecret: each real CLI, contained, runs a
// shell command that dumps its environment and reads the environment of
// every drover process from /proc. drover's own variables (its server
// token, its ledger's address) and credentials meant for no vendor are in
// neither, even run as root, which may read any process's environ;
// drover's run id is (the dump worked).
func TestSEC5_AgentsFindNoDroverSecret(t *testing.T) {
	droverBin := buildDrover(t)
	secrets := map[string]string{
		"DROVER_TOKEN": "drover-token-s3cret", "DROVER_DB_PASSWORD": "db-s3cret", "PGPASSWORD": "pg-s3cret",
		"GITHUB_TOKEN": "ghp-s3cret", "DATABASE_URL": "postgres://app:url-s3cret@db/app",
	}
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			w := newContainWorld(t, droverBin, agent)
			for k, v := range secrets {
				w.env = append(w.env, k+"="+v)
			}
			w.env = append(w.env, "OPENAI_API_KEY=vendor-key", "ANTHROPIC_API_KEY=vendor-key", "GEMINI_API_KEY=vendor-key")
			// No command substitution: Gemini CLI refuses to run it. "$$"
			// is fakemodel's "$".
			shell := `env > env.txt; for d in /proc/[0-9]*; do grep -qx drover $$d/comm 2>/dev/null && echo found $$d >> stolen.txt && tr '\0' '\n' < $$d/environ >> stolen.txt 2>&1; done; echo done >> stolen.txt`
			script := w.write("script.json", fmt.Sprintf(`{"rules":[{"match":"dump","steps":[{"tools":[{"shell":%q}]},{"text":"dumped"}]}]}`, shell))
			evs := w.run("--tier", "autonomous", "--contain", "--fakemodel-script", script, "dump the environment")
			if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
				t.Fatalf("done %+v", d)
			}
			env, err := os.ReadFile(filepath.Join(w.ws, "env.txt"))
			if err != nil {
				t.Fatalf("no environment dumped: %v; the tool said %+v", err, payloads[drover.ToolResultPayload](evs))
			}
			stolen, _ := os.ReadFile(filepath.Join(w.ws, "stolen.txt"))
			if !strings.Contains(string(env), "DROVER_RUN_ID=run_") || !strings.Contains(string(stolen), "found /proc/") {
				t.Fatalf("the dumps did not run:\n%s\n%s", env, stolen)
			}
			for k, v := range secrets {
				if strings.Contains(string(env), v) {
					t.Errorf("the agent's environment holds %s", k)
				}
				if strings.Contains(string(stolen), v) {
					t.Errorf("the agent read %s from a drover process's environment", k)
				}
			}
			if strings.Contains(string(env), "DROVER_DB=") {
				t.Errorf("the agent was told the ledger's address")
			}
			t.Logf("read %d bytes of a drover process's environment, no secret among them", len(stolen))
		})
	}
}

// TestSEC5_NetworkAPIOnly: with --net api-only each real CLI still reaches
// its model (fakemodel's port) but its shell cannot connect to another
// local port; done lists the port allowed. Without it the same command
// connects, so the test can fail. OpenCode, which reaches its own server
// over a TCP port of the moment, refuses the option (UNSUPPORTED_OPTION).
func TestSEC5_NetworkAPIOnly(t *testing.T) {
	droverBin := buildDrover(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, agent := range []string{"claude", "codex", "gemini"} {
		t.Run(agent, func(t *testing.T) {
			w := newContainWorld(t, droverBin, agent)
			shell := fmt.Sprintf(`(echo hi > /dev/tcp/127.0.0.1/%d) 2> dial.txt && echo connected > dial.txt; echo done >> dial.txt`, port)
			script := w.write("script.json", fmt.Sprintf(`{"rules":[{"match":"dial","steps":[{"tools":[{"shell":%q}]},{"text":"dialed"}]}]}`, shell))
			for _, restricted := range []bool{true, false} {
				args := []string{"--tier", "autonomous", "--contain", "--fakemodel-script", script, "dial out"}
				if restricted {
					args = append([]string{"--net", "api-only"}, args...)
				}
				os.Remove(filepath.Join(w.ws, "dial.txt"))
				evs := w.run(args...)
				if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
					t.Fatalf("restricted %v: done %+v", restricted, d)
				}
				said, err := os.ReadFile(filepath.Join(w.ws, "dial.txt"))
				if err != nil || !strings.Contains(string(said), "done") {
					t.Fatalf("restricted %v: the command did not run: %q %v", restricted, said, err)
				}
				if connected := strings.Contains(string(said), "connected"); connected == restricted {
					t.Errorf("restricted %v: the shell said %q", restricted, said)
				}
				md := evs[len(evs)-1].Metadata
				if ports, _ := md["networkPorts"].([]any); restricted && len(ports) != 1 {
					t.Errorf("done metadata %v, want one port", md)
				}
			}
		})
	}
	t.Run("opencode", func(t *testing.T) {
		w := newContainWorld(t, droverBin, "opencode")
		cmd := exec.Command(w.drover, "run", "--json", "--db", w.db, "--cwd", w.ws, "-a", "opencode", "--net", "api-only", "--fakemodel", "hello")
		cmd.Env = w.env
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "UNSUPPORTED_OPTION") || !strings.Contains(string(out), "network is not supported by opencode") {
			t.Errorf("opencode with --net: %s", out)
		}
	})
}

// TestSEC5_ContainReads: with --contain-reads each real CLI still runs and
// reads its workspace, but its shell cannot read drover's ledger nor a
// file elsewhere in the home; without it, it reads both (the control).
func TestSEC5_ContainReads(t *testing.T) {
	droverBin := buildDrover(t)
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			w := newContainWorld(t, droverBin, agent)
			secret := filepath.Join(w.home, "notes", "secret.txt")
			os.MkdirAll(filepath.Dir(secret), 0o700)
			if err := os.WriteFile(secret, []byte("s3cret-in-the-home\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(w.ws, "inside.txt"), []byte("the workspace\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			shell := fmt.Sprintf(`cat inside.txt > read.txt; cat %s >> read.txt 2>&1; head -c 15 %s >> read.txt 2>&1; echo; echo done >> read.txt`, secret, w.db)
			script := w.write("script.json", fmt.Sprintf(`{"rules":[{"match":"read","steps":[{"tools":[{"shell":%q}]},{"text":"read"}]}]}`, shell))
			for _, limited := range []bool{true, false} {
				args := []string{"--tier", "autonomous", "--contain", "--fakemodel-script", script, "read around"}
				if limited {
					args = append([]string{"--contain-reads"}, args...)
				}
				evs := w.run(args...)
				if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
					t.Fatalf("limited %v: done %+v", limited, d)
				}
				said, err := os.ReadFile(filepath.Join(w.ws, "read.txt"))
				if err != nil || !strings.Contains(string(said), "the workspace") || !strings.Contains(string(said), "done") {
					t.Fatalf("limited %v: the command did not run: %q %v", limited, said, err)
				}
				for _, leak := range []string{"s3cret-in-the-home", "SQLite format"} {
					if strings.Contains(string(said), leak) == limited {
						t.Errorf("limited %v: read %q: %s", limited, leak, said)
					}
				}
				os.Remove(filepath.Join(w.ws, "read.txt"))
			}
		})
	}
}
