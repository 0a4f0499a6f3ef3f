package console

import (
	"context"
	"net/http"
)

func (s *Server) extraProbes() map[string]func(context.Context) error { return nil }

// itemHistory: GET /api/history/{biz}/{key}
func (s *Server) itemHistory(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusServiceUnavailable, "no HBase configured: record history needs --hbase", "hbase")
}

// pools: GET /api/pools
func (s *Server) pools(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusServiceUnavailable, "no resource pools configured", "pools")
}
