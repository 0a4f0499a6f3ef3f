package console

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/archive"
)

// MaxArchivedBody is how much of an archived body the viewer shows; the rest is cut,
// and the answer says so.
const MaxArchivedBody = 2 << 20

// archivedResponse: GET /api/archive/{biz}/{key...}?tenant= — the response archived
// for the page of a record: found through the run that stored it (its step's archive:,
// the run's CDXJ index). The answer holds the status, the headers as received and the
// body (gzip decoded, cut at MaxArchivedBody), or archived: false and why. A record of
// another tenant is not found, like the record itself.
func (s *Server) archivedResponse(w http.ResponseWriter, r *http.Request) {
	it, tenant, ok := s.record(w, r)
	if !ok {
		return
	}
	notArchived := func(why string) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "archived": false, "reason": why})
	}
	if it.URL == "" || it.RunID == "" {
		notArchived("the record names no page or no run")
		return
	}
	plan, status, err := s.runPlan(r.Context(), it.RunID)
	if status == http.StatusNotFound {
		notArchived(err.Error())
		return
	}
	if err != nil {
		writeError(w, status, err.Error(), "")
		return
	}
	// The steps that store this biz and archive their pages, by destination.
	steps := map[string][]string{}
	var dests []string
	for _, st := range plan.Steps {
		if st.Biz == it.Biz && st.Archive != nil && st.Archive.To != "" {
			if steps[st.Archive.To] == nil {
				dests = append(dests, st.Archive.To)
			}
			steps[st.Archive.To] = append(steps[st.Archive.To], st.ID)
		}
	}
	if len(dests) == 0 {
		notArchived(fmt.Sprintf("the step of run %s that stored %s does not archive its pages (archive:)", it.RunID, it.Biz))
		return
	}
	var why []string
	for _, to := range dests {
		rd, err := archive.OpenReader(r.Context(), crawl.Reparse{From: to, Run: it.RunID}, tenant)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		e, ok := rd.Page(it.URL)
		if !ok || !slices.Contains(steps[to], e.Step) {
			rd.Close()
			why = append(why, fmt.Sprintf("%s is not in the archive of run %s (%s)", crawl.RedactURL(it.URL), it.RunID, crawl.RedactURL(to)))
			continue
		}
		a, err := rd.Archived(r.Context(), it.URL)
		rd.Close()
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error(), "")
			return
		}
		received := a.Header.Clone()
		body, err := archive.Decoded(a.Header, a.Body)
		if err != nil {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("archive %s: the body of %s: %v", crawl.RedactURL(to), crawl.RedactURL(it.URL), err), "")
			return
		}
		size := len(body)
		truncated := size > MaxArchivedBody
		if truncated {
			body = body[:MaxArchivedBody]
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"ok": true, "archived": true, "url": e.URL, "run_id": e.RunID, "step": e.Step, "task": e.Task, "type": e.Type,
			"fetched_at": e.At.Format(time.RFC3339Nano), "digest": e.Digest, "file": e.File, "offset": e.Offset, "length": e.Length,
			"status": a.Status, "header": received, "content_encoding": received.Get("Content-Encoding"),
			"body": string(body), "body_bytes": size, "truncated": truncated,
		})
		return
	}
	notArchived(strings.Join(why, "; "))
}
