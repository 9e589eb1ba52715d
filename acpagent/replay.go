package acpagent

import (
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// replay sends the editor a session's conversation as recorded: for each
// run, oldest first, its prompt as a user message, then its events as a
// live turn would have shown them (answered questions included, as their
// calls' statuses).
func (a *agent) replay(sessionID string, rs []store.Run) error {
	st := a.sup.Store()
	for _, r := range rs {
		if r.Prompt != "" {
			a.update(sessionID, acp.UpdateUserMessageText(r.Prompt))
		}
		tr := newTranslator()
		for after := int64(0); ; {
			evs, err := st.Events(a.ctx, r.ID, after, 1000)
			if err != nil {
				return fmt.Errorf("run %s: %w", r.ID, err)
			}
			for _, sev := range evs {
				after = sev.Seq
				var ev drover.Event
				if err := json.Unmarshal(sev.JSON, &ev); err != nil {
					a.log.Warn("acp: undecodable event", "run", r.ID, "seq", sev.Seq, "err", err)
					continue
				}
				for _, u := range tr.updates(ev) {
					a.update(sessionID, u)
				}
			}
			if len(evs) < 1000 {
				break
			}
		}
	}
	return nil
}
