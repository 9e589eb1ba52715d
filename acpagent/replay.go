package acpagent

import (
	"encoding/json"
	"fmt"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/store"
)

// replay sends the editor a session's conversation as recorded: for each
// run, oldest first, its prompt as a user message, then its events as a
// live turn would have shown them (answered questions included, as their
// calls' statuses).
func (a *agent) replay(sessionID string, rs []store.Run) error {
	for _, r := range rs {
		if r.Prompt != "" {
			a.update(sessionID, acp.UpdateUserMessageText(r.Prompt))
		}
		tr := newTranslator()
		for after := int64(0); ; {
			page, err := a.svc.Events(a.ctx, api.EventsParams{RunID: r.ID, AfterSeq: after, Limit: 1000})
			if err != nil {
				return fmt.Errorf("run %s: %w", r.ID, err)
			}
			for _, raw := range page.Events {
				var ev drover.Event
				if err := json.Unmarshal(raw, &ev); err != nil {
					a.log.Warn("acp: undecodable event", "run", r.ID, "after", after, "err", err)
					continue
				}
				after = ev.Seq
				for _, u := range tr.updates(ev) {
					a.update(sessionID, u)
				}
			}
			if !page.More || len(page.Events) == 0 {
				break
			}
		}
	}
	return nil
}
