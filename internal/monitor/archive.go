package monitor

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The archive's pages (internal/archive): what was written, and what could not be.
var (
	ArchivedPages = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_archive_pages_total", Help: "Pages archived as WARC records, by record type (response, revisit).",
	}, []string{"type"})
	ArchiveFailures = promauto.NewCounter(prometheus.CounterOpts{
		Name: "trawler_archive_failures_total", Help: "Pages that could not be archived (their items were stored); the worker's log says why.",
	})
)
